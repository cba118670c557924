import type { Authorizer, Decision } from '../access/authorizer.js';
import {
  ANY,
  coversNamespace,
  coversResource,
  coversVerb,
  EPHEMERAL_CONTAINERS,
  NAMED_ONLY_VERBS,
  NODE_SHELL,
  STATUS_SUFFIX,
} from '../access/rules.js';
import type { Caller } from '../access/caller.js';
import { impersonationFor } from '../access/impersonation.js';
import { resourceIdOf, type ResourceType } from '../k8s/resource-path.js';
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

const IDENTITY_GROUP = 'authentication.k8s.io';
/** The versions of authentication.k8s.io that have a SelfSubjectReview (`kubectl auth whoami` tries them in this order). */
export const SUBJECT_REVIEW_VERSIONS = new Set(['v1', 'v1beta1', 'v1alpha1']);

/**
 * A review the service answers itself: `create` of a self review in authorization.k8s.io (any
 * version), or of a SelfSubjectReview in authentication.k8s.io (`kubectl auth whoami`), which the
 * service answers for every cluster, old ones too, since it alone knows who the caller is.
 */
export function isSelfReview(info: RequestInfo): boolean {
  if (!info.isResourceRequest || info.verb !== 'create' || info.subresource !== '') return false;
  if (info.apiGroup === REVIEW_GROUP) return SELF_REVIEWS.has(info.resource);
  return (
    info.apiGroup === IDENTITY_GROUP &&
    info.resource === 'selfsubjectreviews' &&
    SUBJECT_REVIEW_VERSIONS.has(info.apiVersion)
  );
}

/**
 * What `kubectl auth whoami` is told: the identity the service acts as toward an impersonating cluster
 * (`cas:<username>`, a group `cas:role:<role>` per role, an API key's id as extra `cas-key`), with
 * `system:authenticated`, which the apiserver adds to every impersonated user.
 */
export function subjectReviewStatus(caller: Caller) {
  const identity = impersonationFor(caller);
  return {
    userInfo: {
      username: identity.user,
      groups: [...identity.groups, 'system:authenticated'],
      ...(identity.extra ? { extra: identity.extra } : {}),
    },
  };
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

/** What a rules review needs to know of a type the cluster serves (from its discovery). */
type ServedType = Pick<ResourceType, 'group' | 'plural'> & Partial<Pick<ResourceType, 'namespaced' | 'subresources'>>;

/** The verbs a `*` in a rule's verbs stands for on this path (never the terminal's, see NAMED_ONLY_VERBS). */
const ANY_VERB = ['get', 'list', 'watch', 'create', 'update', 'patch', 'delete', 'deletecollection'];
const PARENT_VERBS = ['get', 'update', 'patch'];
/** A terminal verb is a request on the pod's subresource of that name: GET (WebSocket) or POST (SPDY). */
const TERMINAL_VERBS = [...NAMED_ONLY_VERBS];

/** `<plural>.<group>` → its group and plural. */
function splitId(id: string): { group: string; plural: string } {
  const dot = id.indexOf('.');
  return dot < 0 ? { group: '', plural: id } : { group: id.slice(dot + 1), plural: id.slice(0, dot) };
}

/** Rules with the same verbs and group in one rule, in the order first seen. */
function merged(rules: ResourceRule[]): ResourceRule[] {
  const byKey = new Map<string, ResourceRule>();
  for (const rule of rules) {
    const key = JSON.stringify([rule.verbs, rule.apiGroups]);
    const same = byKey.get(key);
    if (!same) byKey.set(key, { ...rule, resources: [...rule.resources] });
    else for (const resource of rule.resources) if (!same.resources.includes(resource)) same.resources.push(resource);
  }
  return [...byKey.values()];
}

/**
 * The caller's rules on the cluster that apply in `namespace`, in RBAC's shape (what `kubectl auth
 * can-i --list` prints, as given), saying exactly what the service enforces: a `*` of resources is
 * the types the cluster serves (`types`, its discovery) except those only a rule naming them grants
 * (Secrets), and without a rule covering every namespace, not the cluster-scoped ones; a `*` of verbs
 * is the request verbs, never the terminal's. `log` becomes `get` on `pods/log`, a terminal verb `get`
 * and `create` on the pod's subresource of that name; `scale` carries the parent's get, update and
 * patch and `status` the parent's get, as the routes map them (where the type has them); writing
 * `status` comes only from a rule naming `<resource>/status`.
 */
export function rulesReviewStatus(
  authorizer: Authorizer,
  caller: Caller,
  cluster: string,
  namespace: string,
  types: readonly ServedType[],
) {
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
    const everywhere = coversNamespace(rule.namespaces, null);
    const verbs = rule.verbs.includes(ANY) ? [...ANY_VERB] : rule.verbs.filter((v) => ANY_VERB.includes(v));
    if (verbs.includes('delete') && !verbs.includes('deletecollection')) verbs.push('deletecollection');
    const holds = (verb: string) => coversVerb(rule.verbs, verb);
    const add = (group: string, resource: string, granted: string[]) => {
      if (granted.length) resourceRules.push({ verbs: granted, apiGroups: [group], resources: [resource] });
    };
    for (const id of rule.resources) {
      if (id === EPHEMERAL_CONTAINERS) {
        // Named grants only: `update` (kubectl debug patches the subresource, which the update grant allows).
        if (rule.verbs.includes('update')) add('', 'pods/ephemeralcontainers', ['update', 'patch']);
        continue;
      }
      if (id === NODE_SHELL) continue; // the service's own grant: nothing of the cluster's
      if (id.endsWith(STATUS_SUFFIX)) {
        const { group, plural } = splitId(id.slice(0, -STATUS_SUFFIX.length));
        add(
          group,
          `${plural}/status`,
          verbs.filter((v) => v === 'update' || v === 'patch'),
        );
        continue;
      }
      const covered: ServedType[] =
        id === ANY
          ? types.filter((t) => coversResource(rule.resources, resourceIdOf(t)))
          : [types.find((t) => resourceIdOf(t) === id) ?? splitId(id)];
      for (const type of covered) {
        // A cluster-scoped object is asked about with no namespace: only a rule covering every namespace grants it.
        if (type.namespaced === false && !everywhere) continue;
        const { group, plural } = type;
        const has = (sub: string) => type.subresources === undefined || type.subresources.includes(sub);
        add(group, plural, verbs);
        if (has('scale'))
          add(
            group,
            `${plural}/scale`,
            PARENT_VERBS.filter((v) => verbs.includes(v)),
          );
        if (has('status')) add(group, `${plural}/status`, verbs.includes('get') ? ['get'] : []);
        if (group !== '' || plural !== 'pods') continue;
        add('', 'pods/log', holds('log') ? ['get'] : []);
        for (const verb of TERMINAL_VERBS) add('', `pods/${verb}`, holds(verb) ? ['get', 'create'] : []);
      }
    }
  }
  return {
    resourceRules: merged(resourceRules),
    nonResourceRules: rules.length ? [{ verbs: ['get'], nonResourceURLs: DISCOVERY_URLS }] : [],
    incomplete: false,
  };
}
