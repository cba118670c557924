// What an apply shows of an object: without the fields that change on every write, with a Secret's
// values hidden, and as a unified diff of before and after. Pure: no I/O.
import { createTwoFilesPatch } from 'diff';
import { stringify } from 'yaml';

/** What a Secret's values are shown as. */
export const HIDDEN = '***';

/** Metadata the cluster rewrites on every write: left out of diffs and of "unchanged" detection. */
const NOISE_METADATA = ['managedFields', 'resourceVersion', 'generation', 'uid', 'creationTimestamp'] as const;

type Obj = Record<string, any>;

/** The fields of a Secret that hold its values. */
const SECRET_FIELDS = ['data', 'stringData'] as const;

/** A Secret's `data` and `stringData` with every value replaced by `***` (keys stay: they name no secret). */
export function redactSecret<T extends Obj | null>(object: T, secret: boolean): T {
  if (!object || !secret) return object;
  const hidden = (values: unknown) =>
    values && typeof values === 'object' && !Array.isArray(values)
      ? Object.fromEntries(Object.keys(values).map((key) => [key, HIDDEN]))
      : values;
  const copy: Obj = { ...object };
  for (const field of SECRET_FIELDS) if (field in copy) copy[field] = hidden(copy[field]);
  // kubectl's last-applied annotation would carry the whole Secret; server-side apply writes none, but a
  // Secret once applied client-side may still have it.
  const annotations = copy.metadata?.annotations;
  if (annotations && 'kubectl.kubernetes.io/last-applied-configuration' in annotations) {
    copy.metadata = {
      ...copy.metadata,
      annotations: { ...annotations, 'kubectl.kubernetes.io/last-applied-configuration': HIDDEN },
    };
  }
  return copy as T;
}

/**
 * What is wrong with a Secret document's values for the service to send it on: `data` and `stringData`
 * must be mappings of strings. Anything else the cluster would refuse with a message that prints the
 * value in Go's own notation (`&value.valueUnstructured{Value:…}`, `map[…]`), which no scrubbing can
 * enumerate; refused here, the value never reaches a message. The problems name fields, never values.
 */
export function secretValueProblems(document: Obj): string[] {
  const problems: string[] = [];
  for (const field of SECRET_FIELDS) {
    const map = document[field];
    if (map === undefined || map === null) continue;
    if (typeof map !== 'object' || Array.isArray(map)) {
      problems.push(`${field} must be a mapping of keys to strings (the value is not shown)`);
      continue;
    }
    for (const [key, value] of Object.entries(map)) {
      if (typeof value !== 'string') {
        problems.push(`${field}.${key.slice(0, 253)} must be a string: quote it (the value is not shown)`);
      }
    }
  }
  return problems;
}

/** strconv.Quote's escapes (the cluster's messages quote values the Go way); other controls are `\xNN`. */
const GO_ESCAPES: Record<string, string> = {
  '\\': '\\\\',
  '"': '\\"',
  '\x07': '\\a',
  '\b': '\\b',
  '\f': '\\f',
  '\n': '\\n',
  '\r': '\\r',
  '\t': '\\t',
  '\v': '\\v',
};

/** The forms a message can quote a string in: as is, JSON-escaped, Go-escaped. */
function quotedForms(value: string): string[] {
  const json = JSON.stringify(value).slice(1, -1);
  const go = value.replace(
    // eslint-disable-next-line no-control-regex -- control characters are exactly what Go escapes
    /[\\"\x00-\x1f\x7f]/g,
    (c) => GO_ESCAPES[c] ?? `\\x${c.charCodeAt(0).toString(16).padStart(2, '0')}`,
  );
  return [value, json, go];
}

/**
 * Every form a Secret document's values could be echoed in (as written, base64-decoded, base64-encoded,
 * each as is and escaped the way JSON and Go quote strings, and each line of a value of several lines),
 * for scrubbing them out of the cluster's messages. Values shorter than 4 characters (lines: 8) are
 * left alone: they would match all over an unrelated message.
 */
export function secretValuesOf(document: Obj | null | undefined, secret: boolean): string[] {
  if (!document || !secret) return [];
  const values = new Set<string>();
  const add = (value: string) => {
    for (const form of quotedForms(value)) if (form.length >= 4) values.add(form);
    if (value.includes('\n')) {
      for (const line of value.split('\n')) if (line.trim().length >= 8) values.add(line.trim());
    }
  };
  for (const field of SECRET_FIELDS) {
    const map = document[field];
    if (!map || typeof map !== 'object') continue;
    for (const value of Object.values(map)) {
      if (typeof value !== 'string') continue;
      add(value);
      add(Buffer.from(value, 'utf8').toString('base64'));
      if (field === 'data') add(Buffer.from(value, 'base64').toString('utf8'));
    }
  }
  return [...values].sort((a, b) => b.length - a.length);
}

/** `value` (any JSON) with each of `secrets` replaced by `***` in every string it holds. */
export function scrub<T>(value: T, secrets: string[]): T {
  if (secrets.length === 0) return value;
  const clean = (text: string) => secrets.reduce((out, secret) => out.split(secret).join(HIDDEN), text);
  return JSON.parse(JSON.stringify(value), (_key, v: unknown) => (typeof v === 'string' ? clean(v) : v)) as T;
}

/** The object without the metadata every write rewrites. */
function withoutNoise(object: Obj): Obj {
  const metadata: Obj = { ...(object.metadata ?? {}) };
  for (const key of NOISE_METADATA) delete metadata[key];
  return { ...object, metadata };
}

/** What a changed Secret value is shown as, after: a diff of `***` against `***` would hide the change. */
export const HIDDEN_CHANGED = '*** (changed)';

/**
 * The object as a diff shows it: without the noise metadata, a Secret's values hidden. With `before`
 * (the same Secret earlier), a value that differs from its earlier one is shown as `*** (changed)`.
 */
export function shown(object: Obj | null, secret: boolean, before?: Obj | null): Obj | null {
  if (!object) return null;
  const hidden: Obj = redactSecret(withoutNoise(object), secret);
  if (before && secret && hidden.data && typeof object.data === 'object') {
    hidden.data = Object.fromEntries(
      Object.entries(hidden.data).map(([key, value]) => [
        key,
        key in (before.data ?? {}) && before.data[key] !== object.data[key] ? HIDDEN_CHANGED : value,
      ]),
    );
  }
  return hidden;
}

/**
 * The manager under which the apiserver records the fields an object already had when it is first
 * applied to with no managers recorded (a Namespace applied with nothing but its name has none): its own
 * bookkeeping, which changes nothing any client set.
 */
const BEFORE_FIRST_APPLY = 'before-first-apply';

/** managedFields as "unchanged" compares them: without each write's time, and without `before-first-apply`. */
function managersOf(object: Obj): Obj[] {
  const entries: unknown = object.metadata?.managedFields;
  return Array.isArray(entries)
    ? entries
        .filter((entry: Obj) => entry?.manager !== BEFORE_FIRST_APPLY)
        .map(({ time: _time, ...entry }: Obj) => entry)
    : [];
}

/** Deep equality of two JSON values (object keys in any order); stops at the first difference. */
function sameJson(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (a === null || b === null || typeof a !== 'object' || typeof b !== 'object') return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  if (Array.isArray(a)) {
    const other = b as unknown[];
    return a.length === other.length && a.every((item, i) => sameJson(item, other[i]));
  }
  const keys = Object.keys(a);
  if (keys.length !== Object.keys(b).length) return false;
  return keys.every(
    (key) => Object.prototype.hasOwnProperty.call(b, key) && sameJson((a as Obj)[key], (b as Obj)[key]),
  );
}

/**
 * Whether nothing that counts changed between the two (inside the service only, never shown): the
 * objects without the noise, a Secret's values included, and who manages which fields (a change of
 * owners is a change, though the diff does not show it); the time of each manager's last write, and
 * the apiserver's `before-first-apply` record, are left out. Stops at the first difference: no copy.
 */
export function sameObjects(before: Obj, after: Obj): boolean {
  return sameJson(withoutNoise(before), withoutNoise(after)) && sameJson(managersOf(before), managersOf(after));
}

/** The YAML an object is shown as in a diff ('' when it does not exist). */
function yamlOf(object: Obj | null): string {
  return object ? stringify(object, { lineWidth: 0 }) : '';
}

/**
 * A unified diff of the object before and after, as YAML, as shown (no noise, and with `secret`, a
 * Secret's values hidden); '' when equal; undefined when finding the changes took more than `timeoutMs`.
 */
export function unifiedDiff(
  label: string,
  before: Obj | null,
  after: Obj | null,
  secret: boolean,
  timeoutMs = 1_000,
): string | undefined {
  const a = yamlOf(shown(before, secret));
  const b = yamlOf(shown(after, secret, before));
  if (a === b) return '';
  const patch = createTwoFilesPatch(
    before ? `a/${label}` : '/dev/null',
    after ? `b/${label}` : '/dev/null',
    a,
    b,
    '',
    '',
    {
      context: 3,
      timeout: timeoutMs,
    },
  );
  // Without the library's `====` rule: the diff starts at `---`, as git's and kubectl's do.
  return patch === undefined ? undefined : patch.slice(patch.indexOf('---'));
}
