import { ForbiddenException, Injectable } from '@nestjs/common';
import type { Caller } from './caller.js';
import {
  ANY,
  coversName,
  coversNamespace,
  coversResource,
  coversVerb,
  type GrantedRule,
  isNamedOnly,
  NAMED_ONLY_SUBRESOURCES,
  NAMED_ONLY_VERBS,
  type Verb,
} from './rules.js';
import { clusterGrants, type ClusterRulesIn, type NamespaceReach, type ServiceGrant, verbsHeld } from './namespaces.js';

export { VERBS, type Verb } from './rules.js';

/**
 * One question to the authorizer. `resource` is the canonical id the routes use after discovery:
 * `<plural>` for the core group (`configmaps`), `<plural>.<group>` otherwise (`deployments.apps`),
 * or a pseudo-resource of the service (`metrics`). `namespace` is null for cluster-scoped objects
 * and for lists across all namespaces (`_all`).
 */
export interface AccessRequest {
  verb: Verb;
  cluster: string;
  resource: string;
  namespace: string | null;
}

export interface Decision {
  allowed: boolean;
  /** Why, in words a person can act on (the 403 message when refused). */
  reason: string;
}

/** What a caller may do on one cluster: the rules of its roles that apply there. */
export interface Permissions {
  /** The admin role: everything, on every cluster, and the admin routes. */
  admin: boolean;
  rules: Array<{ role: string; namespaces: string[]; resources: string[]; verbs: string[] }>;
}

const allow = (reason: string): Decision => ({ allowed: true, reason });
const deny = (reason: string): Decision => ({ allowed: false, reason });
/** Rules reviews asked of a cluster at once when working out the namespaces a person reaches. */
const REVIEWS_AT_ONCE = 8;

/** Where a request acts, as a refusal says it. */
const placeOf = (namespace: string | null) =>
  namespace === null ? 'across all namespaces (or cluster-scoped)' : `in namespace '${namespace}'`;
const quoted = (values: Iterable<string>) => [...new Set(values)].map((v) => (v === ANY ? "'*'" : v)).join(', ');

/**
 * The only code that knows how roles combine into permissions. Every route that touches a
 * cluster asks it (resource routes, streams, logs, metrics), and `can-i` and the permissions route
 * answer from it, so what a frontend is told and what the routes do cannot drift. A rule grants;
 * nothing else does: deny by default.
 */
@Injectable()
export class Authorizer {
  can(caller: Caller, request: AccessRequest): Decision {
    if (caller.isAdmin) return allow('role admin');
    if (caller.roles.length === 0) return deny('the caller has no role');
    const rules = caller.rules ?? [];
    const granting = rules.find(
      (r) =>
        coversName(r.clusters, request.cluster) &&
        coversVerb(r.verbs, request.verb, request.resource) &&
        coversResource(r.resources, request.resource) &&
        coversNamespace(r.namespaces, request.namespace),
    );
    if (granting) return allow(`role ${granting.role}`);
    return deny(this.explain(rules, request));
  }

  /** Throws 403 with the reason unless the caller may do this. */
  require(caller: Caller, request: AccessRequest): void {
    const decision = this.can(caller, request);
    if (!decision.allowed) throw new ForbiddenException(decision.reason);
  }

  /**
   * A cheap check before any work on the cluster: could any of the caller's rules allow this verb
   * on this cluster at all? Refusing here keeps callers from probing clusters they cannot use.
   */
  mayAttempt(caller: Caller, verb: Verb, cluster: string, what?: Omit<AccessRequest, 'verb' | 'cluster'>): Decision {
    if (caller.isAdmin) return allow('role admin');
    if (caller.roles.length === 0) return deny('the caller has no role');
    const onCluster = (caller.rules ?? []).filter((r) => coversName(r.clusters, cluster));
    if (onCluster.length === 0) return deny(`your roles grant nothing on cluster '${cluster}'`);
    const granting = onCluster.find((r) => coversVerb(r.verbs, verb));
    if (granting) return allow(`role ${granting.role}`);
    // Worded as the full check words it, when the route knows what is asked: a refused write names the
    // resource and the namespace as a refused list does.
    if (what) return deny(this.explain(onCluster, { verb, cluster, ...what }));
    if (NAMED_ONLY_VERBS.has(verb) && onCluster.some((r) => r.verbs.includes(ANY))) {
      return deny(`${verb} needs a role that names the verb '${verb}' (a '*' does not cover it)`);
    }
    return deny(`your roles do not allow ${verb} on cluster '${cluster}'`);
  }

  /** Whether any rule of the caller applies on this cluster (an admin's: every cluster). */
  grantsAnythingOn(caller: Caller, cluster: string): boolean {
    return caller.isAdmin || (caller.rules ?? []).some((r) => coversName(r.clusters, cluster));
  }

  /** The caller's effective rules on one cluster (what `GET /auth/me/permissions` shows). */
  permissions(caller: Caller, cluster: string): Permissions {
    return {
      admin: caller.isAdmin,
      rules: (caller.rules ?? [])
        .filter((r) => coversName(r.clusters, cluster))
        .map((r) => ({ role: r.role, namespaces: r.namespaces, resources: r.resources, verbs: r.verbs })),
    };
  }

  /**
   * The namespaces in which the caller's rules grant `verb` on `resource` (null: every namespace, a
   * rule covering `*`). Named namespaces need not exist on the cluster.
   */
  grantedNamespaces(caller: Caller, request: Omit<AccessRequest, 'namespace'>): Set<string> | null {
    if (this.can(caller, { ...request, namespace: null }).allowed) return null;
    const { verb, cluster, resource } = request;
    return new Set(
      (caller.rules ?? [])
        .filter((r) => coversName(r.clusters, cluster) && coversVerb(r.verbs, verb) && coversResource(r.resources, resource))
        .flatMap((r) => r.namespaces)
        .filter((ns) => ns !== ANY),
    );
  }

  /**
   * The namespaces of `namespaces` (the cluster's) the caller can reach, with the verbs it holds in each:
   * its rules against each namespace, and where the cluster has a say (`clusterRulesIn`, an impersonating
   * cluster's rules for the person) only what the cluster grants too, on a type both cover. Sorted by name.
   */
  async namespacesFor(
    caller: Caller,
    cluster: string,
    namespaces: readonly string[],
    clusterRulesIn?: ClusterRulesIn,
  ): Promise<NamespaceReach[]> {
    const candidates = namespaces
      .map((name) => ({ name, grants: this.grantsIn(caller, cluster, name) }))
      .filter((c) => c.grants.length > 0);
    const reach: NamespaceReach[] = [];
    let next = 0;
    const worker = async () => {
      while (next < candidates.length) {
        const { name, grants } = candidates[next++];
        const theirs = clusterRulesIn && (await clusterRulesIn(name));
        const verbs = verbsHeld(grants, coversVerb, theirs && clusterGrants(theirs));
        if (verbs.length) reach.push({ name, verbs });
      }
    };
    await Promise.all(Array.from({ length: Math.min(REVIEWS_AT_ONCE, candidates.length) }, worker));
    return reach.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  }

  /** What the caller's rules grant in one namespace of a cluster (the pseudo-resource `metrics` is no namespace's). */
  private grantsIn(caller: Caller, cluster: string, namespace: string): ServiceGrant[] {
    if (caller.isAdmin) return [{ all: true, resources: [ANY], verbs: [ANY] }];
    return (caller.rules ?? [])
      .filter((r) => coversName(r.clusters, cluster) && coversNamespace(r.namespaces, namespace))
      .map((r) => ({ all: false, resources: r.resources.filter((id) => id !== 'metrics'), verbs: r.verbs }))
      .filter((g) => g.resources.length > 0);
  }

  /** The closest miss, so that a 403 says what is lacking. */
  private explain(rules: GrantedRule[], request: AccessRequest): string {
    const { verb, cluster, resource, namespace } = request;
    const onCluster = rules.filter((r) => coversName(r.clusters, cluster));
    if (onCluster.length === 0) return `your roles grant nothing on cluster '${cluster}'`;
    const forAction = onCluster.filter(
      (r) => coversVerb(r.verbs, verb, resource) && coversResource(r.resources, resource),
    );
    if (forAction.length === 0) {
      if (NAMED_ONLY_SUBRESOURCES.has(resource)) {
        return `${verb} on ${resource} needs a role that names both '${resource}' and the verb '${verb}' (a '*' covers neither)`;
      }
      const byWildcard = onCluster.some((r) => coversVerb(r.verbs, verb) && r.resources.includes(ANY));
      if (byWildcard && isNamedOnly(resource)) {
        return `${verb} on ${resource} needs a role that names '${resource}' (a '*' does not cover it)`;
      }
      if (NAMED_ONLY_VERBS.has(verb) && onCluster.some((r) => r.verbs.includes(ANY))) {
        return `${verb} on ${resource} needs a role that names the verb '${verb}' (a '*' does not cover it)`;
      }
      return `your roles do not allow ${verb} on ${resource} ${placeOf(namespace)} on cluster '${cluster}'; they allow it in no namespace`;
    }
    const namespaces = quoted(forAction.flatMap((r) => r.namespaces));
    if (namespace === null) {
      return `${verb} on ${resource} across all namespaces (or cluster-scoped) needs a role covering every namespace ('*'); your roles allow ${verb} on ${resource} only in namespaces: ${namespaces}`;
    }
    return `your roles do not allow ${verb} on ${resource} in namespace '${namespace}' on cluster '${cluster}'; they allow it in namespaces: ${namespaces}`;
  }
}
