import { Inject, Injectable, type OnModuleDestroy } from '@nestjs/common';
import { APP_CONFIG, type AppConfig } from '../config/config.js';
import type { WindowBudget } from './reflector.js';
import { Reflectors } from './reflectors.js';
import { SharedWatch, type WatchRefusal, type WatchSource, type WatchSubscriber } from './shared-watch.js';

/**
 * The shared watches of this process: one per (cluster and its connection settings, collection path, field selector),
 * however many clients watch it with whatever label selectors, each on the collection's one list-and-watch loop (which
 * a list cache of the same collection shares).
 */
@Injectable()
export class WatchHub implements OnModuleDestroy {
  private readonly watches = new Map<string, SharedWatch>();
  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly reflectors: Reflectors,
  ) {}

  /** The loops' windows of recent events, and their bound (CAS_WATCH_MEMORY_BYTES). */
  get budget(): WindowBudget {
    return this.reflectors.budget;
  }

  /**
   * Adds `sub` to the shared watch of `source` from `fromResourceVersion`, starting that watch on
   * the cluster if none runs. Resolves to the shared watch (to leave it later), or to the cluster's
   * refusal when it would not start the watch; 502/504 naming the cluster when it cannot be reached.
   */
  async subscribe(
    source: WatchSource,
    fromResourceVersion: string,
    sub: WatchSubscriber,
  ): Promise<{ watch: SharedWatch } | { refusal: WatchRefusal }> {
    const { conn } = source.cluster;
    const key = JSON.stringify([conn.clusterId, conn.generation, source.path, source.fieldSelector ?? '']);
    let watch = this.watches.get(key);
    if (!watch || watch.ended) {
      watch = new SharedWatch(
        key,
        this.reflectors.loopFor(conn, source.path, source.fieldSelector),
        fromResourceVersion,
        this.config.watch.lingerMs,
        (ended) => {
          if (this.watches.get(ended.key) === ended) this.watches.delete(ended.key);
        },
      );
      this.watches.set(key, watch);
    }
    const refusal = await watch.ready;
    if (refusal) return { refusal };
    watch.attach(sub, fromResourceVersion);
    return { watch };
  }

  /** How many shared watches are open (each is one watch request on a cluster). */
  get size(): number {
    return this.watches.size;
  }

  onModuleDestroy(): void {
    for (const watch of [...this.watches.values()]) watch.end();
  }
}
