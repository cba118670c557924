/**
 * The apiserver's field selectors (k8s.io/apimachinery/pkg/fields `ParseSelector`, v1.20): terms
 * `field=value`, `field==value`, `field!=value` joined by `,`, with `\`, `,` and `=` escaped by a
 * backslash in values; and the fields each built-in type can be selected by (the registries'
 * `GetAttrs`/`ToSelectableFields`), as strings. Every type has `metadata.name` and `metadata.namespace`.
 */

export interface FieldTerm {
  field: string;
  value: string;
  /** `!=` */
  negated: boolean;
}

export class FieldSelectorError extends Error {
  override readonly name = 'FieldSelectorError';
}

type Obj = Record<string, any>;
const str = (value: unknown): string => (typeof value === 'string' ? value : '');
const int = (value: unknown): string => String(typeof value === 'number' ? value : 0);

/** Per resource id (as the routes name it), the extra selectable fields and how the apiserver computes each. */
const TYPE_FIELDS: Record<string, Record<string, (o: Obj) => string>> = {
  pods: {
    'spec.nodeName': (o) => str(o.spec?.nodeName),
    'spec.restartPolicy': (o) => str(o.spec?.restartPolicy),
    'spec.schedulerName': (o) => str(o.spec?.schedulerName),
    'spec.serviceAccountName': (o) => str(o.spec?.serviceAccountName),
    'status.phase': (o) => str(o.status?.phase),
    'status.podIP': (o) => str(o.status?.podIPs?.[0]?.ip ?? o.status?.podIP),
    'status.nominatedNodeName': (o) => str(o.status?.nominatedNodeName),
  },
  events: {
    'involvedObject.kind': (o) => str(o.involvedObject?.kind),
    'involvedObject.namespace': (o) => str(o.involvedObject?.namespace),
    'involvedObject.name': (o) => str(o.involvedObject?.name),
    'involvedObject.uid': (o) => str(o.involvedObject?.uid),
    'involvedObject.apiVersion': (o) => str(o.involvedObject?.apiVersion),
    'involvedObject.resourceVersion': (o) => str(o.involvedObject?.resourceVersion),
    'involvedObject.fieldPath': (o) => str(o.involvedObject?.fieldPath),
    reason: (o) => str(o.reason),
    reportingComponent: (o) => str(o.reportingComponent),
    source: (o) => str(o.source?.component),
    type: (o) => str(o.type),
  },
  secrets: { type: (o) => str(o.type) },
  namespaces: { 'status.phase': (o) => str(o.status?.phase) },
  nodes: { 'spec.unschedulable': (o) => String(o.spec?.unschedulable === true) },
  replicationcontrollers: { 'status.replicas': (o) => int(o.status?.replicas) },
  'replicasets.apps': { 'status.replicas': (o) => int(o.status?.replicas) },
  'jobs.batch': { 'status.successful': (o) => int(o.status?.succeeded) },
  'certificatesigningrequests.certificates.k8s.io': { 'spec.signerName': (o) => str(o.spec?.signerName) },
};

const META_FIELDS: Record<string, (o: Obj) => string> = {
  'metadata.name': (o) => str(o.metadata?.name),
  'metadata.namespace': (o) => str(o.metadata?.namespace),
};

/** The fields of a type a selector may name (beyond metadata.name and metadata.namespace). */
export function selectableFields(resourceId: string): string[] {
  return Object.keys(TYPE_FIELDS[resourceId] ?? {});
}

/** The values of the type's selectable fields of one object, extra fields only (name and namespace are kept apart). */
export function fieldValues(resourceId: string, object: Obj): Record<string, string> | undefined {
  const fields = TYPE_FIELDS[resourceId];
  if (!fields) return undefined;
  const values: Record<string, string> = {};
  for (const [field, get] of Object.entries(fields)) values[field] = get(object);
  return values;
}

/** The value of one selectable field of a stored object. */
export function fieldValue(
  field: string,
  entry: { name: string; namespace: string; fields?: Record<string, string> },
): string {
  if (field === 'metadata.name') return entry.name;
  if (field === 'metadata.namespace') return entry.namespace;
  return entry.fields?.[field] ?? '';
}

/** Parses a field selector as the apiserver does and checks its fields are selectable on this type (else a 400 as its). */
export function parseFieldSelector(text: string, resourceId: string): FieldTerm[] {
  const terms: FieldTerm[] = [];
  const supported = TYPE_FIELDS[resourceId] ?? {};
  for (const part of splitTerms(text).sort()) {
    if (part === '') continue;
    const split = splitTerm(part);
    if (!split) throw new FieldSelectorError(`invalid selector: '${text}'; can't understand '${part}'`);
    const [field, op, raw] = split;
    const value = unescapeValue(raw);
    if (!(field in META_FIELDS) && !(field in supported)) {
      throw new FieldSelectorError(`field label not supported: ${field}`);
    }
    terms.push({ field, value, negated: op === '!=' });
  }
  return terms;
}

export function matchesFields(
  terms: readonly FieldTerm[],
  entry: { name: string; namespace: string; fields?: Record<string, string> },
): boolean {
  for (const term of terms) {
    if ((fieldValue(term.field, entry) === term.value) === term.negated) return false;
  }
  return true;
}

/** Splits on commas not escaped by a backslash. */
function splitTerms(text: string): string[] {
  if (text === '') return [];
  const terms: string[] = [];
  let start = 0;
  let escaped = false;
  for (let i = 0; i < text.length; i++) {
    if (escaped) escaped = false;
    else if (text[i] === '\\') escaped = true;
    else if (text[i] === ',') {
      terms.push(text.slice(start, i));
      start = i + 1;
    }
  }
  terms.push(text.slice(start));
  return terms;
}

/** The first unescaped operator (`!=`, `==`, `=`) splits a term. */
function splitTerm(term: string): [string, string, string] | undefined {
  for (let i = 0; i < term.length; i++) {
    const rest = term.slice(i);
    if (rest.startsWith('\\')) {
      i++;
      continue;
    }
    for (const op of ['!=', '==', '=']) {
      if (rest.startsWith(op)) return [term.slice(0, i), op, term.slice(i + op.length)];
    }
  }
  return undefined;
}

function unescapeValue(value: string): string {
  if (!/[\\,=]/.test(value)) return value;
  let out = '';
  let slash = false;
  for (const c of value) {
    if (slash) {
      if (c !== '\\' && c !== ',' && c !== '=') {
        throw new FieldSelectorError(`invalid field selector: invalid escape sequence: \\${c}`);
      }
      out += c;
      slash = false;
    } else if (c === '\\') slash = true;
    else if (c === ',' || c === '=') {
      throw new FieldSelectorError(`invalid field selector: unescaped character in value: ${c}`);
    } else out += c;
  }
  if (slash) throw new FieldSelectorError('invalid field selector: invalid escape sequence: \\');
  return out;
}
