import { HttpException, Injectable, Logger } from '@nestjs/common';
import { Authorizer } from '../access/authorizer.js';
import type { Caller } from '../access/caller.js';
import { ClustersService } from '../clusters/clusters.service.js';
import { ALL_NAMESPACES, apiVersionOf, resourceIdOf } from '../k8s/resource-path.js';
import { ResourcesService } from './resources.service.js';
import type { SearchItemDto, SearchQueryDto, SearchResultDto } from './dto/search.dto.js';
import { ListCaches } from '../lists/list-caches.js';
import { ListsService } from '../lists/lists.service.js';

export const DEFAULT_SEARCH_TYPES = [
  'namespaces',
  'nodes',
  'pods',
  'deployments.apps',
  'statefulsets.apps',
  'daemonsets.apps',
  'services',
  'configmaps',
  'ingresses',
  'jobs',
  'cronjobs',
];

const byText = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

/**
 * `GET /api/v1/search`: names matching a substring across clusters and resource types, from the list
 * caches (started on first use), each (cluster, type) resolved and partitioned exactly as a paged `_all`
 * list of it; the types and clusters the caller may not list are left out, never a 403.
 */
@Injectable()
export class SearchService {
  private readonly logger = new Logger(SearchService.name);

  constructor(
    private readonly resources: ResourcesService,
    private readonly lists: ListsService,
    private readonly caches: ListCaches,
    private readonly clusters: ClustersService,
    private readonly authorizer: Authorizer,
  ) {}

  async search(caller: Caller, q: SearchQueryDto): Promise<SearchResultDto> {
    const needle = q.q.toLowerCase();
    const size = q.size ?? 50;
    const clusterNames = q.clusters
      ? [...new Set(q.clusters.split(','))]
      : (await this.clusters.listAvailableClusters((c) => this.authorizer.grantsAnythingOn(caller, c))).map(
          (c) => c.name,
        );
    const types = q.resources ? [...new Set(q.resources.split(','))] : DEFAULT_SEARCH_TYPES;
    const found: SearchItemDto[] = [];
    await Promise.all(
      clusterNames.flatMap((cluster) =>
        types.map(async (resource) => {
          try {
            const r = await this.resources.resolve(
              caller,
              { cluster, resource, namespace: ALL_NAMESPACES },
              'list',
              true,
            );
            const target = { cluster: r.cluster, type: r.type, namespace: null };
            // The service's rules first: a type the caller may not list starts no cache.
            const scope = this.lists.ruleScope(caller, target);
            const cache = this.caches.cacheFor(r.cluster.conn, r.type);
            await cache.fresh();
            const allowed = await this.lists.allowedNamespaces(caller, target, cache, scope);
            const id = resourceIdOf(r.type);
            const apiVersion = apiVersionOf(r.type);
            // Names matching, kept by the cache until it changes (many callers search the same words).
            const named = cache.memo(`search\0${needle}`, () => {
              const hits = [];
              for (const entry of cache.all()) {
                const at = entry.haystack.indexOf(needle);
                if (at !== -1 && at + needle.length <= entry.name.length) hits.push(entry);
              }
              return hits;
            });
            for (const entry of named) {
              if (allowed !== null && !allowed.has(entry.namespace)) continue;
              found.push({
                cluster,
                resource: id,
                namespace: entry.namespace,
                name: entry.name,
                kind: r.type.kind,
                apiVersion,
              });
            }
          } catch (error) {
            // What the caller may not list, or a type the cluster does not serve, is simply not searched.
            if (!(error instanceof HttpException)) throw error;
            this.logger.debug(`search: ${resource} on ${cluster} left out: ${error.message}`);
          }
        }),
      ),
    );
    found.sort(
      (a, b) =>
        byText(a.name, b.name) ||
        byText(a.cluster, b.cluster) ||
        byText(a.resource, b.resource) ||
        byText(a.namespace, b.namespace),
    );
    return { items: found.slice(0, size), total: found.length };
  }
}
