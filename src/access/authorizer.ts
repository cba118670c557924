import { ForbiddenException, Injectable } from '@nestjs/common';
import type { Caller } from '../auth/caller.js';
import { ROLE_ADMIN, ROLE_VIEWER } from '../users/role.entity.js';

/** What a caller may do to a resource: the Kubernetes verbs the routes use, and `log` for pod logs. */
export const VERBS = ['get', 'list', 'watch', 'create', 'update', 'patch', 'delete', 'log'] as const;
export type Verb = (typeof VERBS)[number];
const READ_VERBS: ReadonlySet<Verb> = new Set(['get', 'list', 'watch', 'log']);

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

/**
 * The only code that knows how roles combine into permissions. Every route that touches a
 * cluster asks it (resource routes, streams, logs, metrics), and `can-i` answers from the same
 * function, so what a frontend is told and what the routes do cannot drift. Deny by default.
 */
@Injectable()
export class Authorizer {
  can(caller: Caller, request: AccessRequest): Decision {
    if (caller.isAdmin || caller.roles.includes(ROLE_ADMIN)) return { allowed: true, reason: 'role admin' };
    if (caller.roles.includes(ROLE_VIEWER) && READ_VERBS.has(request.verb)) {
      if (request.resource === 'secrets') return { allowed: false, reason: 'reading secrets needs the admin role' };
      if (request.resource === 'metrics') return { allowed: false, reason: 'metrics queries need the admin role' };
      return { allowed: true, reason: 'role viewer' };
    }
    if (caller.roles.length === 0) return { allowed: false, reason: 'the caller has no role' };
    return { allowed: false, reason: `${request.verb} on ${request.resource} needs the admin role` };
  }

  /** Throws 403 with the reason unless the caller may do this. */
  require(caller: Caller, request: AccessRequest): void {
    const decision = this.can(caller, request);
    if (!decision.allowed) throw new ForbiddenException(decision.reason);
  }

  /**
   * A cheap check before any work on the cluster: could any of the caller's roles allow this verb
   * on this cluster at all? Refusing here keeps callers from probing clusters they cannot use.
   */
  mayAttempt(caller: Caller, verb: Verb, _cluster: string): Decision {
    if (caller.isAdmin || caller.roles.includes(ROLE_ADMIN)) return { allowed: true, reason: 'role admin' };
    if (caller.roles.includes(ROLE_VIEWER) && READ_VERBS.has(verb)) return { allowed: true, reason: 'role viewer' };
    if (caller.roles.length === 0) return { allowed: false, reason: 'the caller has no role' };
    return { allowed: false, reason: 'changing cluster resources needs the admin role' };
  }
}
