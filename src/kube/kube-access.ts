import { resourceIdOf as typeIdOf } from '../k8s/resource-path.js';
import type { AccessRequest, Authorizer, Decision, Verb } from '../access/authorizer.js';
import type { Caller } from '../access/caller.js';
import { EPHEMERAL_CONTAINERS, STATUS_SUFFIX } from '../access/rules.js';
import type { RequestInfo } from '../k8s/request-info.js';

/** `<plural>` or `<plural>.<group>`, as the resource routes name resources. */
const RESOURCE_ID = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

/** Discovery and schemas: what every client reads first. Any caller with a rule on the cluster may. */
const DISCOVERY = [
  /^\/version\/?$/,
  /^\/api\/?$/,
  /^\/api\/[^/]+\/?$/,
  /^\/apis\/?$/,
  /^\/apis\/[^/]+\/?$/,
  /^\/apis\/[^/]+\/[^/]+\/?$/,
  /^\/openapi\/v2\/?$/,
  /^\/openapi\/v3(\/.*)?$/,
];

/** Subresources that are the object seen another way: the parent's verb on the parent (the subresource routes' rule). */
const PARENT_VERB_SUBRESOURCES = new Set(['status', 'scale']);
const PARENT_VERBS = new Set(['get', 'update', 'patch']);
/** Pods' subresources that are the terminal's verbs of the same name (docs/TERMINAL.md). */
const TERMINAL_SUBRESOURCES = new Set(['exec', 'attach', 'portforward']);
const TERMINAL_METHOD_VERBS = new Set(['get', 'create']);
/** The verbs RequestInfo gives a resource request (besides `proxy`). */
const RESOURCE_VERBS = new Set(['get', 'list', 'watch', 'create', 'update', 'patch', 'delete', 'deletecollection']);

/**
 * What the service's rules must allow before a request on the Kubernetes path is sent:
 * - `resource`: one authorizer question (`request`);
 * - `discovery`: any rule on the cluster;
 * - `admin`: something the rules cannot express (exec, proxies, other subresources, the apiserver's
 *   own endpoints), so only the admin role, which is everything;
 * - `invalid`: nothing can allow it (a method the API has no verb for, a resource name that is none).
 */
export type KubeAccess =
  | { kind: 'resource'; request: AccessRequest }
  | { kind: 'discovery' }
  | { kind: 'admin'; what: string }
  | { kind: 'invalid'; statusCode: number; reason: string };

/** The resource's id as the resource routes name it: `pods`, `deployments.apps`. */
export function resourceIdOf(info: Pick<RequestInfo, 'apiGroup' | 'resource'>): string {
  return typeIdOf({ plural: info.resource, group: info.apiGroup });
}

/**
 * The namespace the authorizer is asked about: the request's, except for a Namespace itself, which
 * is cluster-scoped (the resource routes ask for `namespaces` with no namespace, i.e. a `*` rule).
 */
function namespaceOf(info: RequestInfo): string | null {
  if (info.apiGroup === '' && info.resource === 'namespaces') return null;
  return info.namespace === '' ? null : info.namespace;
}

/** Maps a parsed request to the question the service's rules answer. */
export function kubeAccessOf(info: RequestInfo, cluster: string): KubeAccess {
  const method = info.verb;
  if (!info.isResourceRequest) {
    if ((method === 'get' || method === 'head') && DISCOVERY.some((p) => p.test(info.path))) {
      return { kind: 'discovery' };
    }
    return { kind: 'admin', what: `${method.toUpperCase()} ${info.path}` };
  }
  if (info.verb === '') {
    return { kind: 'invalid', statusCode: 405, reason: 'the Kubernetes API has no verb for this method' };
  }
  const id = resourceIdOf(info);
  if (!RESOURCE_ID.test(id) || id.length > 253) {
    return { kind: 'invalid', statusCode: 404, reason: `'${id.slice(0, 253)}' is not a resource name` };
  }
  const namespace = namespaceOf(info);
  if (!RESOURCE_VERBS.has(info.verb)) return { kind: 'admin', what: `${info.verb} of ${id}` };
  let verb: Verb;
  if (info.subresource === '') {
    // One rule that lets a caller delete every object of a type in a namespace covers deleting them at once.
    verb = (info.verb === 'deletecollection' ? 'delete' : info.verb) as Verb;
  } else if (info.subresource === 'log' && id === 'pods' && info.verb === 'get') {
    verb = 'log';
  } else if (info.subresource === 'status' && info.verb !== 'get' && PARENT_VERBS.has(info.verb)) {
    // Writing status needs a rule naming `<resource>/status`, as on the subresource routes (RBAC keeps it apart).
    return {
      kind: 'resource',
      request: { verb: info.verb as Verb, cluster, resource: `${id}${STATUS_SUFFIX}`, namespace },
    };
  } else if (info.subresource === 'ephemeralcontainers' && id === 'pods' && PARENT_VERBS.has(info.verb)) {
    // Reading is reading the pod; adding a debug container (kubectl debug patches, others update) needs
    // the named grant `update` on pods/ephemeralcontainers (docs/TERMINAL.md, debugging).
    if (info.verb === 'get') {
      verb = 'get';
    } else {
      return { kind: 'resource', request: { verb: 'update', cluster, resource: EPHEMERAL_CONTAINERS, namespace } };
    }
  } else if (TERMINAL_SUBRESOURCES.has(info.subresource) && id === 'pods' && TERMINAL_METHOD_VERBS.has(info.verb)) {
    // The apiserver authorizes a WebSocket GET as `get` and a SPDY POST as `create`: both are the terminal verb.
    verb = info.subresource as Verb;
  } else if (PARENT_VERB_SUBRESOURCES.has(info.subresource) && PARENT_VERBS.has(info.verb)) {
    verb = info.verb as Verb;
  } else {
    return { kind: 'admin', what: `${info.verb} on ${id}/${info.subresource}` };
  }
  return { kind: 'resource', request: { verb, cluster, resource: id, namespace } };
}

/** The authorizer's decision on a mapped request. */
export function decideKubeAccess(
  authorizer: Authorizer,
  caller: Caller,
  access: KubeAccess,
  cluster: string,
): Decision {
  switch (access.kind) {
    case 'resource':
      return authorizer.can(caller, access.request);
    case 'discovery': {
      if (caller.isAdmin) return { allowed: true, reason: 'role admin' };
      const rules = authorizer.permissions(caller, cluster).rules;
      return rules.length > 0
        ? { allowed: true, reason: `role ${rules[0].role}` }
        : { allowed: false, reason: `your roles grant nothing on cluster '${cluster}'` };
    }
    case 'admin':
      return caller.isAdmin
        ? { allowed: true, reason: 'role admin' }
        : {
            allowed: false,
            reason: `${access.what} is not covered by the service's roles: only the admin role may do it on cluster '${cluster}'`,
          };
    case 'invalid':
      return { allowed: false, reason: access.reason };
  }
}
