import type { Authorizer, Decision } from '../access/authorizer.js';
import { ANY, coversNamespace, STATUS_SUFFIX } from '../access/rules.js';
import type { Caller } from '../auth/caller.js';
import { decideKubeAccess, kubeAccessOf } from './kube-access.js';
import { nonResourceInfo, type RequestInfo } from '../k8s/request-info.js';

const REVIEW_GROUP = 'authorization.k8s.io';
export const SELF_REVIEWS = new Set(['selfsubjectaccessreviews', 'selfsubjectrulesreviews']);
/** The verbs a request on this path can carry (what RequestInfo gives); any other verb only an admin holds. */
const REQUEST_VERBS = new Set(['get', 'list', 'watch', 'create', 'update', 'patch', 'delete', 'deletecollection']);
/** What any caller with a rule on the cluster may read: discovery and schemas (see kube-access.ts). */
const DISCOVERY_URLS = [
  '/version',
  '/api',
  '/api/*',
  '/apis',
  '/apis/*',
  '/openapi/v2',
  '/openapi/v3',
  '/openapi/v3/*',
];

/** A review the service answers itself: `create` of a self review in authorization.k8s.io (any version). */
export function isSelfReview(info: RequestInfo): boolean {
  return (
    info.isResourceRequest &&
    info.apiGroup === REVIEW_GROUP &&
    info.verb === 'create' &&
    info.subresource === '' &&
    SELF_REVIEWS.has(info.resource)
  );
}

/** A review's body could not be read: a 400 naming what is wrong. */
export class ReviewInputError extends Error {}

type Attributes = Record<string, unknown>;

function str(value: unknown, field: string): string {
  if (value === undefined || value === null) return '';
  if (typeof value !== 'string' || value.length > 253) throw new ReviewInputError(`${field} must be a string`);
  return value;
}

/**
 * The answer to a SelfSubjectAccessReview from the service's rules: the same mapping and the same
 * authorizer as a request on the Kubernetes path, so `kubectl auth can-i` tells what the path will do.
 */
export function accessReviewDecision(authorizer: Authorizer, caller: Caller, cluster: string, spec: unknown): Decision {
  if (spec === null || typeof spec !== 'object') throw new ReviewInputError('spec must be an object');
  const { resourceAttributes: ra, nonResourceAttributes: nra } = spec as Record<string, Attributes | undefined>;
  if ((ra === undefined) === (nra === undefined)) {
    throw new ReviewInputError('spec must have exactly one of resourceAttributes and nonResourceAttributes');
  }
  let info: RequestInfo;
  if (ra) {
    const verb = str(ra.verb, 'spec.resourceAttributes.verb');
    const resource = str(ra.resource, 'spec.resourceAttributes.resource');
    info = {
      isResourceRequest: true,
      path: '',
      verb,
      apiPrefix: 'apis',
      apiGroup: str(ra.group, 'spec.resourceAttributes.group'),
      apiVersion: str(ra.version, 'spec.resourceAttributes.version'),
      namespace: str(ra.namespace, 'spec.resourceAttributes.namespace'),
      resource,
      subresource: str(ra.subresource, 'spec.resourceAttributes.subresource'),
      name: str(ra.name, 'spec.resourceAttributes.name'),
      parts: [],
    };
    if (!REQUEST_VERBS.has(verb) || resource === ANY || info.apiGroup === ANY) {
      return caller.isAdmin
        ? { allowed: true, reason: 'role admin' }
        : { allowed: false, reason: `only the admin role may ${verb} ${resource} on cluster '${cluster}'` };
    }
  } else {
    const path = str(nra!.path, 'spec.nonResourceAttributes.path');
    info = nonResourceInfo(str(nra!.verb, 'spec.nonResourceAttributes.verb'), path);
  }
  return decideKubeAccess(authorizer, caller, kubeAccessOf(info, cluster), cluster);
}

interface ResourceRule {
  verbs: string[];
  apiGroups: string[];
  resources: string[];
}

/** `<plural>.<group>` → its group and plural; `*` → every group. */
function splitId(id: string): { group: string; plural: string } {
  if (id === ANY) return { group: ANY, plural: ANY };
  const dot = id.indexOf('.');
  return dot < 0 ? { group: '', plural: id } : { group: id.slice(dot + 1), plural: id.slice(0, dot) };
}

/**
 * The caller's rules on the cluster that apply in `namespace`, in RBAC's shape (what `kubectl auth
 * can-i --list` prints): `log` becomes `get` on `pods/log`, `scale` carries the parent's get, update
 * and patch and `status` the parent's get, as the routes map them; writing `status` comes only from a
 * rule naming `<resource>/status`.
 */
export function rulesReviewStatus(authorizer: Authorizer, caller: Caller, cluster: string, namespace: string) {
  if (caller.isAdmin) {
    return {
      resourceRules: [{ verbs: [ANY], apiGroups: [ANY], resources: [ANY] }],
      nonResourceRules: [{ verbs: [ANY], nonResourceURLs: [ANY] }],
      incomplete: false,
    };
  }
  const rules = authorizer.permissions(caller, cluster).rules;
  const resourceRules: ResourceRule[] = [];
  for (const rule of rules) {
    if (!coversNamespace(rule.namespaces, namespace === '' ? null : namespace)) continue;
    const verbs = rule.verbs.includes(ANY) ? [ANY] : rule.verbs.filter((v) => v !== 'log');
    if (verbs.includes('delete')) verbs.push('deletecollection');
    for (const id of rule.resources) {
      if (id.endsWith(STATUS_SUFFIX)) {
        const { group, plural } = splitId(id.slice(0, -STATUS_SUFFIX.length));
        const writes = verbs.includes(ANY) ? ['update', 'patch'] : verbs.filter((v) => v === 'update' || v === 'patch');
        if (writes.length) resourceRules.push({ verbs: writes, apiGroups: [group], resources: [`${plural}/status`] });
        continue;
      }
      const { group, plural } = splitId(id);
      if (verbs.length) resourceRules.push({ verbs, apiGroups: [group], resources: [plural] });
      const parentVerbs = verbs.includes(ANY)
        ? ['get', 'update', 'patch']
        : verbs.filter((v) => ['get', 'update', 'patch'].includes(v));
      if (parentVerbs.length) {
        resourceRules.push({ verbs: parentVerbs, apiGroups: [group], resources: [`${plural}/scale`] });
      }
      if (verbs.includes(ANY) || verbs.includes('get')) {
        resourceRules.push({ verbs: ['get'], apiGroups: [group], resources: [`${plural}/status`] });
      }
      const logs = rule.verbs.includes(ANY) || rule.verbs.includes('log');
      if (logs && (id === 'pods' || id === ANY))
        resourceRules.push({ verbs: ['get'], apiGroups: [''], resources: ['pods/log'] });
    }
  }
  return {
    resourceRules,
    nonResourceRules: rules.length ? [{ verbs: ['get'], nonResourceURLs: DISCOVERY_URLS }] : [],
    incomplete: false,
  };
}
