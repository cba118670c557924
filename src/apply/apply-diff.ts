// What an apply shows of an object: without the fields that change on every write, with a Secret's
// values hidden, and as a unified diff of before and after. Pure: no I/O.
import { createTwoFilesPatch } from 'diff';
import { stringify } from 'yaml';

/** What a Secret's values are shown as. */
export const HIDDEN = '***';

/** Metadata the cluster rewrites on every write: left out of diffs and of "unchanged" detection. */
const NOISE_METADATA = ['managedFields', 'resourceVersion', 'generation', 'uid', 'creationTimestamp'] as const;

type Obj = Record<string, any>;

/** A core/v1 Secret (the only kind whose values are hidden). */
export function isSecret(object: Obj | null | undefined): boolean {
  return object?.kind === 'Secret' && object.apiVersion === 'v1';
}

/** A Secret's `data` and `stringData` with every value replaced by `***` (keys stay: they name no secret). */
export function redactSecret<T extends Obj | null>(object: T): T {
  if (!object || !isSecret(object)) return object;
  const hidden = (values: unknown) =>
    values && typeof values === 'object' && !Array.isArray(values)
      ? Object.fromEntries(Object.keys(values).map((key) => [key, HIDDEN]))
      : values;
  const copy: Obj = { ...object };
  if ('data' in copy) copy.data = hidden(copy.data);
  if ('stringData' in copy) copy.stringData = hidden(copy.stringData);
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
 * Every form a Secret document's values could be echoed in (as written, base64-decoded, base64-encoded),
 * for scrubbing them out of the cluster's messages. Values shorter than 4 characters are left alone:
 * they would match all over an unrelated message.
 */
export function secretValuesOf(document: Obj | null | undefined): string[] {
  if (!document || !isSecret(document)) return [];
  const values = new Set<string>();
  const add = (value: string) => {
    if (value.length >= 4) values.add(value);
  };
  for (const field of ['data', 'stringData']) {
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
export function shown(object: Obj | null, before?: Obj | null): Obj | null {
  if (!object) return null;
  const hidden: Obj = redactSecret(withoutNoise(object));
  if (before && isSecret(object) && hidden.data && typeof object.data === 'object') {
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
 * What "unchanged" compares (inside the service only, never shown): the object without the noise, a
 * Secret's values included, plus who manages which fields (a change of owners is a change, though the
 * diff does not show it); the time of each manager's last write is left out.
 */
export function comparable(object: Obj | null): string {
  if (!object) return '';
  const managers = Array.isArray(object.metadata?.managedFields)
    ? object.metadata.managedFields.map(({ time: _time, ...entry }: Obj) => entry)
    : [];
  return JSON.stringify({ object: withoutNoise(object), managers });
}

/** The YAML an object is shown as in a diff ('' when it does not exist). */
function yamlOf(object: Obj | null): string {
  return object ? stringify(object, { lineWidth: 0 }) : '';
}

/** A unified diff of the object before and after, as YAML, as shown (no noise, no Secret values); '' when equal. */
export function unifiedDiff(label: string, before: Obj | null, after: Obj | null): string {
  const a = yamlOf(shown(before));
  const b = yamlOf(shown(after, before));
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
    },
  );
  // Without the library's `====` rule: the diff starts at `---`, as git's and kubectl's do.
  return patch.slice(patch.indexOf('---'));
}
