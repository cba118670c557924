import {
  HttpException,
  Inject,
  Injectable,
  Logger,
  type OnModuleDestroy,
  ServiceUnavailableException,
} from '@nestjs/common';
import type { ClusterConnection } from '../clusters/cluster-connection.js';
import { ClusterGateway } from '../clusters/gateway/cluster-gateway.js';
import { APP_CONFIG, type AppConfig } from '../config/config.js';
import { Reflectors } from '../watch/reflectors.js';
import { apiVersionOf, resourceIdOf, resourcePath, type ResourceType } from '../k8s/resource-path.js';
import { type CacheOptions, ListCache } from './list-cache.js';

/** A cache of part of a collection, kept in a form of its own (see `ListCaches.cacheFor`). */
export interface CacheView {
  /** Tells the cache apart from the type's whole cache. */
  name: string;
  fieldSelector: string;
  toEntry: NonNullable<CacheOptions['toEntry']>;
}

/** How often idle caches are dropped and the clusters of the others are looked up again. */
const SWEEP_MS = 5_000;

/**
 * Every list cache of this replica, one per (cluster, resource type): started by the first paged query,
 * dropped when unused for `CAS_LIST_CACHE_IDLE_SECONDS`, and together bounded by
 * `CAS_LIST_CACHE_MAX_OBJECTS` and `CAS_LIST_CACHE_MAX_BYTES` (the objects' JSON): past either the least
 * recently used caches are dropped; a cache that alone needs more ends, and its queries get a 503 naming
 * the bound. A cluster removed, disabled or reconfigured ends its caches (queries waiting on them: 502
 * naming it).
 */
@Injectable()
export class ListCaches implements OnModuleDestroy {
  private readonly logger = new Logger(ListCaches.name);
  private readonly caches = new Map<string, ListCache>();
  private readonly conns = new Map<ListCache, ClusterConnection>();
  private objects = 0;
  private bytes = 0;
  private timer?: NodeJS.Timeout;

  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly gateway: ClusterGateway,
    private readonly reflectors: Reflectors,
  ) {}

  /** Objects held by all caches together. */
  get size(): number {
    return this.objects;
  }

  /** UTF-8 bytes of the JSON of the objects all caches hold together. */
  get heldBytes(): number {
    return this.bytes;
  }

  /**
   * The cache of this type on this cluster (its connection as it is now), started if need be. A `view` is a cache
   * of part of the collection (as the cluster selects it with `fieldSelector`) kept in its own form (`toEntry`),
   * under the same bounds: the Helm releases' storage Secrets.
   */
  cacheFor(conn: ClusterConnection, type: ResourceType, view?: CacheView): ListCache {
    const id = resourceIdOf(type);
    const k = `${conn.clusterId}:${conn.generation}:${id}${view ? `:${view.name}` : ''}`;
    const found = this.caches.get(k);
    if (found && !found.ended) {
      found.usedAt = Date.now();
      return found;
    }
    const cache = new ListCache({
      reflector: this.reflectors.loopFor(conn, resourcePath(type, null, null), view?.fieldSelector),
      toEntry: view?.toEntry,
      resourceId: id,
      apiVersion: apiVersionOf(type),
      kind: type.kind,
      onSize: (c, objects, bytes) => this.resized(c, objects, bytes),
      tooLarge: (c, objects, bytes) => this.tooLarge(c, objects, bytes),
      onEnd: (c) => {
        if (this.caches.get(k) === c) this.caches.delete(k);
        this.conns.delete(c);
      },
    });
    this.caches.set(k, cache);
    this.conns.set(cache, conn);
    this.timer ??= setInterval(() => void this.sweep(), SWEEP_MS).unref();
    return cache;
  }

  /** The live caches of one cluster (for search). */
  cachesOf(clusterName: string): ListCache[] {
    return [...this.caches.values()].filter((c) => c.clusterName === clusterName && !c.ended);
  }

  onModuleDestroy(): void {
    clearInterval(this.timer);
    for (const cache of [...this.caches.values()]) cache.end();
  }

  /** Why a cache holding this much (with the others, or alone) is over the bounds, or null. */
  private tooLarge(cache: ListCache, objects: number, bytes: number): ServiceUnavailableException | null {
    const { maxObjects, maxBytes } = this.config.listCache;
    const [max, what, name] =
      objects > maxObjects
        ? [maxObjects, 'objects', 'CAS_LIST_CACHE_MAX_OBJECTS']
        : bytes > maxBytes
          ? [maxBytes, 'bytes of JSON', 'CAS_LIST_CACHE_MAX_BYTES']
          : [];
    if (max === undefined) return null;
    return new ServiceUnavailableException(
      `the list of ${cache.options.resourceId} on cluster '${cache.clusterName}' needs more than the ${max} ${what} ` +
        `the list caches of this replica may hold (${name})`,
    );
  }

  private resized(cache: ListCache, objects: number, bytes: number): void {
    this.objects += objects;
    this.bytes += bytes;
    if (cache.ended || !this.tooLarge(cache, this.objects, this.bytes)) return;
    const others = [...this.caches.values()].filter((c) => c !== cache).sort((a, b) => a.usedAt - b.usedAt);
    // A cache too large on its own ends, and only it: dropping the others would not make room for it.
    const alone = this.tooLarge(cache, cache.size, cache.bytes);
    if (alone) {
      cache.end(alone);
      return;
    }
    // Otherwise the least recently used others go first, until it fits.
    for (const other of others) {
      if (!this.tooLarge(cache, this.objects, this.bytes)) return;
      this.logger.log(
        `dropping the list cache of ${other.options.resourceId} on ${other.clusterName} ` +
          `to make room for ${cache.options.resourceId} on ${cache.clusterName}`,
      );
      other.end();
    }
  }

  /** Drops idle caches; ends those whose cluster is gone, disabled or changed. */
  private async sweep(): Promise<void> {
    const idleMs = this.config.listCache.idleSeconds * 1000;
    const now = Date.now();
    const byCluster = new Map<string, Promise<ClusterConnection | string>>();
    for (const [cache, conn] of [...this.conns]) {
      if (now - cache.usedAt > idleMs) {
        cache.end();
        continue;
      }
      let current = byCluster.get(conn.clusterName);
      if (!current) {
        current = this.gateway
          .connection(conn.clusterName)
          .catch((error: unknown) => (error instanceof HttpException ? error.message : 'the cluster cannot be used'));
        byCluster.set(conn.clusterName, current);
      }
      const now2 = await current;
      if (typeof now2 === 'string') {
        cache.end(new HttpException(`cluster '${conn.clusterName}' can no longer be used: ${now2}`, 502));
      } else if (now2.clusterId !== conn.clusterId || now2.generation !== conn.generation) {
        cache.end(new HttpException(`cluster '${conn.clusterName}' was replaced or reconfigured; try again`, 502));
      }
    }
    if (this.caches.size === 0) {
      clearInterval(this.timer);
      this.timer = undefined;
    }
  }
}
