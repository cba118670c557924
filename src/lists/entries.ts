import { fieldValues } from '../k8s/field-selector.js';

/** One stored object: its JSON (what a page sends) and the few facts queries filter and sort on. */
export interface Entry {
  readonly namespace: string;
  readonly name: string;
  readonly labels?: Record<string, string>;
  /** The type's selectable fields (field selectors), when it has any beyond name and namespace. */
  readonly fields?: Record<string, string>;
  /** Lower-cased name, namespace and label values, NUL-separated: what `search` looks in. */
  readonly haystack: string;
  /** The object as JSON without `metadata.managedFields`: what a page sends unless asked for them. */
  readonly json: string;
  /** `metadata.managedFields` as JSON, when the object has them. */
  readonly managedFields?: string;
  /** The index of the `}` that closes the metadata in `json`: where `managedFields` go back in. */
  readonly metadataEnd: number;
  /** UTF-8 bytes of `json` and `managedFields`: what the caches' byte bound counts. */
  readonly bytes: number;
  readonly resourceVersion: string;
  /** `metadata.creationTimestamp`: the most common sort key of a console, kept to sort without parsing. */
  readonly created: string | null;
}

/** What an entry is made with: the type's names, and one string per namespace name (`intern`). */
export interface EntryType {
  resourceId: string;
  apiVersion: string;
  kind: string;
  intern: (namespace: string) => string;
}

/**
 * A string of its own. JSON.parse hands out strings of 13 characters or more as slices of the text it
 * parsed: keeping one (a name, a timestamp, a label value) would keep that whole page of the list alive,
 * and searching a string built of slices is several times slower.
 */
export function own(value: string): string {
  return value.length < 13 ? value : Buffer.from(value, 'utf8').toString('utf8');
}

function ownValues(values: Record<string, string> | undefined): Record<string, string> | undefined {
  if (values) for (const k of Object.keys(values)) values[k] = own(values[k]);
  return values;
}

const isObject = (value: unknown): value is Record<string, any> =>
  value !== null && typeof value === 'object' && !Array.isArray(value);

/**
 * The entry of an object as the cluster sent it (a list item lacks apiVersion and kind: the type's are
 * put in, as the cluster's watch sends them). The JSON is written apiVersion, kind, metadata first, and
 * `metadata.managedFields` kept apart (most of a small object's bytes, and of use to few pages).
 */
export function toEntry(object: Record<string, any>, type: EntryType): Entry {
  const { apiVersion, kind, metadata: raw, ...rest } = object;
  const metadata = isObject(raw) ? raw : {};
  const { managedFields, ...shown } = metadata;
  const namespace = type.intern(typeof metadata.namespace === 'string' ? metadata.namespace : '');
  const name = own(String(metadata.name ?? ''));
  let labels: Record<string, string> | undefined;
  let haystack = `${name.toLowerCase()}\0${namespace.toLowerCase()}`;
  if (isObject(metadata.labels)) {
    labels = {};
    for (const [k, value] of Object.entries(metadata.labels)) {
      labels[k] = own(String(value));
      haystack += `\0${labels[k].toLowerCase()}`;
    }
  }
  const head = JSON.stringify({ apiVersion: apiVersion ?? type.apiVersion, kind: kind ?? type.kind });
  const metadataJson = JSON.stringify(shown);
  const restJson = JSON.stringify(rest);
  const before = `${head.slice(0, -1)},"metadata":`;
  const json = `${before}${metadataJson}${restJson === '{}' ? '}' : `,${restJson.slice(1)}`}`;
  const managed = managedFields === undefined ? undefined : JSON.stringify(managedFields);
  return {
    namespace,
    name,
    labels,
    fields: ownValues(fieldValues(type.resourceId, object)),
    haystack: own(haystack),
    json,
    managedFields: managed,
    metadataEnd: before.length + metadataJson.length - 1,
    bytes: Buffer.byteLength(json) + (managed === undefined ? 0 : Buffer.byteLength(managed)),
    resourceVersion: own(String(metadata.resourceVersion ?? '')),
    created: typeof metadata.creationTimestamp === 'string' ? own(metadata.creationTimestamp) : null,
  };
}

/** The entry's JSON as a page sends it: with `metadata.managedFields` only when asked for. */
export function itemJson(entry: Entry, managedFields: boolean): string {
  if (!managedFields || entry.managedFields === undefined) return entry.json;
  const at = entry.metadataEnd;
  const comma = entry.json[at - 1] === '{' ? '' : ',';
  return `${entry.json.slice(0, at)}${comma}"managedFields":${entry.managedFields}${entry.json.slice(at)}`;
}
