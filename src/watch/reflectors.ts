import { Inject, Injectable, type OnModuleDestroy } from '@nestjs/common';
import type { ClusterConnection } from '../clusters/cluster-connection.js';
import { ClusterGateway } from '../clusters/gateway/cluster-gateway.js';
import { APP_CONFIG, type AppConfig } from '../config/config.js';
import { Reflector, type WindowBudget } from './reflector.js';

/**
 * The list-and-watch loops of this replica: one per (cluster connection, collection path, field selector), whatever
 * hangs off it — the shared watch of client streams, a list cache, or both. A loop ends when its last consumer leaves;
 * a cluster reconfigured (a new generation) gets new loops.
 */
@Injectable()
export class Reflectors implements OnModuleDestroy {
  private readonly loops = new Map<string, Reflector>();
  /** The loops' windows of recent events share one byte budget (CAS_WATCH_MEMORY_BYTES). */
  readonly budget: WindowBudget;

  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly gateway: ClusterGateway,
  ) {
    this.budget = { used: 0, limit: config.watch.memoryBytes };
  }

  /** The loop of this collection on this connection, made if none runs (it starts with its first consumer). */
  loopFor(conn: ClusterConnection, path: string, fieldSelector?: string): Reflector {
    const key = JSON.stringify([conn.clusterId, conn.generation, path, fieldSelector ?? '']);
    const found = this.loops.get(key);
    if (found && !found.ended) return found;
    const loop = new Reflector(key, {
      // Read as the service: every consumer authorizes what it serves for each caller.
      cluster: this.gateway.asService(conn, undefined, 'watch'),
      path,
      fieldSelector,
      upstreamTimeoutSeconds: this.config.watch.upstreamTimeoutSeconds,
      windowEvents: this.config.watch.windowEvents,
      budget: this.budget,
      onEnd: (ended) => {
        if (this.loops.get(ended.key) === ended) this.loops.delete(ended.key);
      },
    });
    this.loops.set(key, loop);
    return loop;
  }

  /** Loops running now (each is one watch request on a cluster). */
  get size(): number {
    return this.loops.size;
  }

  onModuleDestroy(): void {
    for (const loop of [...this.loops.values()]) loop.end();
  }
}
