/**
 * The apiserver's field selectors on lists: the syntax (field-selector-syntax.ts) and the fields
 * each built-in type can be selected by (the registries' `GetAttrs`/`ToSelectableFields`), as strings.
 * Every type has `metadata.name` and `metadata.namespace`.
 */

import { FieldSelectorError, type FieldTerm, parseFieldTerms } from './field-selector-syntax.js';

export { FieldSelectorError, type FieldTerm };

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
  const terms = parseFieldTerms(text);
  const supported = TYPE_FIELDS[resourceId] ?? {};
  for (const { field } of terms) {
    if (!(field in META_FIELDS) && !(field in supported)) {
      throw new FieldSelectorError(`field label not supported: ${field}`);
    }
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
