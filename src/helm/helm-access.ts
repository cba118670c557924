import { ForbiddenException, Injectable } from '@nestjs/common';
import { Authorizer, type Verb } from '../access/authorizer.js';
import { ANY, coversName, coversResource, coversVerb, HELM_RELEASES } from '../access/rules.js';
import type { Caller } from '../access/caller.js';
import { ClusterAccessReview } from '../clusters/gateway/access-review.js';
import type { ClusterClient } from '../clusters/gateway/cluster-client.js';

/**
 * Who may do what to Helm releases. A release holds its rendered Secrets and its values, so reading one is
 * reading Secrets: the service's rules must name `helmreleases` (a `*` does not cover it), and on an
 * impersonating cluster the cluster's own answer for the person to `get secrets` in the namespace decides too.
 */
@Injectable()
export class HelmAccess {
  constructor(
    private readonly authorizer: Authorizer,
    private readonly review: ClusterAccessReview,
  ) {}

  /** 403 unless the caller may do `verb` to the releases of `namespace`. */
  async require(caller: Caller, cluster: ClusterClient, verb: Verb, namespace: string): Promise<void> {
    this.authorizer.require(caller, { verb, cluster: cluster.name, resource: HELM_RELEASES, namespace });
    const refused = await this.review.check(cluster, { verb: 'get', group: '', resource: 'secrets', namespace });
    if (refused) throw new ForbiddenException(refused);
  }

  /**
   * The namespaces whose releases the caller may list across all namespaces (null: every one), or a 403 when
   * its rules allow it in none. Asked before any release is read.
   */
  ruleScope(caller: Caller, cluster: string): Set<string> | null {
    const request = { verb: 'list' as const, cluster, resource: HELM_RELEASES, namespace: null };
    if (this.authorizer.can(caller, request).allowed) return null;
    const scope = new Set(
      (caller.rules ?? [])
        .filter(
          (r) =>
            coversName(r.clusters, cluster) &&
            coversVerb(r.verbs, 'list') &&
            coversResource(r.resources, HELM_RELEASES),
        )
        .flatMap((r) => r.namespaces)
        .filter((ns) => ns !== ANY),
    );
    if (scope.size === 0) this.authorizer.require(caller, request);
    return scope;
  }

  /**
   * What `ruleScope` allows, narrowed on an impersonating cluster to the namespaces where the cluster lets the
   * person `get secrets` (`present`: the namespaces that hold releases, when the rules allow every one).
   */
  async listScope(
    caller: Caller,
    cluster: ClusterClient,
    present: () => Iterable<string>,
    byRules = this.ruleScope(caller, cluster.name),
  ): Promise<Set<string> | null> {
    if (!cluster.identity) return byRules;
    const question = (namespace?: string) => ({ verb: 'get', group: '', resource: 'secrets', namespace });
    if (byRules === null && !(await this.review.check(cluster, question()))) return null;
    const allowed = new Set<string>();
    await Promise.all(
      [...(byRules ?? present())].map(async (ns) => {
        if (!(await this.review.check(cluster, question(ns)))) allowed.add(ns);
      }),
    );
    return allowed;
  }
}
