import { ANY, isNamedOnly, STATUS_SUFFIX, type Verb, VERBS } from './rules.js';

/** One rule of a cluster's RBAC as a SelfSubjectRulesReview answers it. */
export interface ClusterResourceRule {
  verbs: string[];
  apiGroups: string[];
  resources: string[];
  resourceNames?: string[];
}

/** A namespace the caller can reach, and the verbs it holds there (on at least one type). */
export interface NamespaceReach {
  name: string;
  verbs: Verb[];
}

/**
 * The cluster's own rules for the person in a namespace (an impersonating cluster's
 * SelfSubjectRulesReview); undefined: the cluster has no say of its own (no impersonation).
 */
export type ClusterRulesIn = (namespace: string) => Promise<ClusterResourceRule[] | undefined>;

/** What the service's rules grant in one namespace: resources and verbs of each covering rule (`all`: the admin role). */
export interface ServiceGrant {
  all: boolean;
  resources: readonly string[];
  verbs: readonly string[];
}

/** The request verbs a `*` of a cluster rule's verbs stands for. */
const REQUEST_VERBS: readonly Verb[] = ['get', 'list', 'watch', 'create', 'update', 'patch', 'delete'];
/** A pod's subresources that are the service's own verbs, and the request verbs that reach them. */
const POD_VERBS: Record<string, { verb: Verb; via: string[] }> = {
  log: { verb: 'log', via: ['get'] },
  exec: { verb: 'exec', via: ['get', 'create'] },
  attach: { verb: 'attach', via: ['get', 'create'] },
  portforward: { verb: 'portforward', via: ['get', 'create'] },
};
/** Reviews every authenticated person may make (system:basic-user): they say nothing about a namespace. */
const REVIEW_GROUP = 'authorization.k8s.io';

/** One (verb, group, resource) the cluster grants; `*` for any group or resource. */
interface ClusterGrant {
  verb: Verb;
  group: string;
  resource: string;
}

/** A cluster's rules as the service's verbs: `pods/log` is `log`, `<resource>/status` stays a resource of its own. */
export function clusterGrants(rules: readonly ClusterResourceRule[]): ClusterGrant[] {
  const grants: ClusterGrant[] = [];
  for (const rule of rules) {
    const verbs = rule.verbs.includes(ANY) ? REQUEST_VERBS : REQUEST_VERBS.filter((v) => rule.verbs.includes(v));
    for (const group of rule.apiGroups) {
      if (group === REVIEW_GROUP) continue;
      for (const resource of rule.resources) {
        const slash = resource.indexOf('/');
        const pod = slash > 0 ? POD_VERBS[resource.slice(slash + 1)] : undefined;
        if (pod && ['pods', ANY].includes(resource.slice(0, slash)) && ['', ANY].includes(group)) {
          if (rule.verbs.includes(ANY) || pod.via.some((v) => rule.verbs.includes(v))) {
            grants.push({ verb: pod.verb, group: '', resource: 'pods' });
          }
          continue;
        }
        for (const verb of verbs) grants.push({ verb, group, resource });
      }
    }
  }
  return grants;
}

/** `<plural>[.<group>][/status]` → the group and the resource as RBAC names it (`deployments/status`). */
function rbacNameOf(id: string): { group: string; resource: string } {
  const status = id.endsWith(STATUS_SUFFIX);
  const base = status ? id.slice(0, -STATUS_SUFFIX.length) : id;
  const dot = base.indexOf('.');
  const plural = dot < 0 ? base : base.slice(0, dot);
  return { group: dot < 0 ? '' : base.slice(dot + 1), resource: status ? `${plural}${STATUS_SUFFIX}` : plural };
}

/** Whether the service's grant and the cluster's grants share a type for `verb`. */
function bothGrant(grant: ServiceGrant, theirs: readonly ClusterGrant[], verb: Verb): boolean {
  return theirs.some((c) => {
    if (c.verb !== verb) return false;
    if (grant.all) return true;
    if (grant.resources.includes(ANY)) {
      // A `*` of the service's never covers Secrets: the cluster must grant something else.
      return c.resource === ANY || !isNamedOnly(c.group === '' ? c.resource : `${c.resource}.${c.group}`);
    }
    return grant.resources.some((id) => {
      const { group, resource } = rbacNameOf(id);
      return (c.group === ANY || c.group === group) && (c.resource === ANY || c.resource === resource);
    });
  });
}

/**
 * The verbs held in one namespace: those the service's grants there allow (a verb a grant's `*` does
 * not cover never counts), and, when the cluster has a say, that it grants on a type the service's
 * grant covers too.
 */
export function verbsHeld(
  grants: readonly ServiceGrant[],
  covers: (verbs: readonly string[], verb: string) => boolean,
  theirs?: readonly ClusterGrant[],
): Verb[] {
  return VERBS.filter((verb) =>
    grants.some((g) => (g.all || covers(g.verbs, verb)) && (theirs === undefined || bothGrant(g, theirs, verb))),
  );
}
