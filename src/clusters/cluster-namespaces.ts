import { BadGatewayException, ForbiddenException, Injectable } from '@nestjs/common';
import { Authorizer } from '../access/authorizer.js';
import type { Caller } from '../access/caller.js';
import { clusterNameOf } from './cluster-name.js';
import type { ClusterNamespacesDto } from './dto/cluster.dto.js';
import { ClusterAccessReview } from './gateway/access-review.js';
import type { ClusterClient } from './gateway/cluster-client.js';
import { ClusterGateway } from './gateway/cluster-gateway.js';

/** Namespaces read per page, and at most in all (a cluster with more is answered with the first ones by name). */
const PAGE = 500;
const MAX_NAMESPACES = 10_000;

/**
 * The namespaces a caller can reach on a cluster, for a console's namespace picker: the cluster's
 * namespaces (read as the service: a person who may not list namespaces still has some), each with the
 * verbs the caller holds there, from the authorizer, which asks an impersonating cluster for its own
 * rules for the person.
 */
@Injectable()
export class ClusterNamespaces {
  constructor(
    private readonly gateway: ClusterGateway,
    private readonly authorizer: Authorizer,
    private readonly reviews: ClusterAccessReview,
  ) {}

  async list(caller: Caller, name: string): Promise<ClusterNamespacesDto> {
    const cluster = clusterNameOf(name);
    // As can-i: a cluster the caller has no rule on is refused before it is looked up.
    if (!this.authorizer.grantsAnythingOn(caller, cluster)) {
      throw new ForbiddenException(`your roles grant nothing on cluster '${cluster}'`);
    }
    const client = await this.gateway.clientFor(caller, cluster);
    const names = await this.namesOf(this.gateway.asService(client.conn));
    const clusterRulesIn = client.identity ? (ns: string) => this.reviews.rulesIn(client, ns) : undefined;
    return { cluster, namespaces: await this.authorizer.namespacesFor(caller, cluster, names, clusterRulesIn) };
  }

  private async namesOf(service: ClusterClient): Promise<string[]> {
    const names: string[] = [];
    let next = '';
    do {
      const query = new URLSearchParams({ limit: String(PAGE) });
      if (next) query.set('continue', next);
      const res = await service.send({ method: 'GET', path: '/api/v1/namespaces', query });
      const body = await service.read(res);
      if (res.statusCode !== 200) {
        throw new BadGatewayException(`${service.target} answered ${res.statusCode} to the list of its namespaces`);
      }
      const list = service.parse(body, 'the list of its namespaces') as {
        items?: Array<{ metadata?: { name?: unknown } }>;
        metadata?: { continue?: unknown };
      };
      for (const item of list.items ?? []) {
        if (typeof item.metadata?.name === 'string') names.push(item.metadata.name);
      }
      next = typeof list.metadata?.continue === 'string' ? list.metadata.continue : '';
    } while (next && names.length < MAX_NAMESPACES);
    return names.slice(0, MAX_NAMESPACES);
  }
}
