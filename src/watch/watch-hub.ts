import {
  BadGatewayException,
  GatewayTimeoutException,
  HttpException,
  Inject,
  Injectable,
  type OnModuleDestroy,
} from '@nestjs/common';
import { classifyFailure } from '../clusters/cluster-request.js';
import { APP_CONFIG, type AppConfig } from '../config/config.js';
import { SharedWatch, type WatchRefusal, type WatchSource, type WatchSubscriber } from './shared-watch.js';

export const WATCH_USER_AGENT = 'cluster-admin-service/1';
/** Bytes of recent events each shared watch keeps, whatever their number. */
const WINDOW_BYTES = 16 * 1024 * 1024;

/**
 * The shared upstream watches of this process: one per (cluster and its connection settings,
 * collection path, label selector, field selector), however many clients watch it.
 */
@Injectable()
export class WatchHub implements OnModuleDestroy {
  private readonly watches = new Map<string, SharedWatch>();

  constructor(@Inject(APP_CONFIG) private readonly config: AppConfig) {}

  /**
   * Adds `sub` to the shared watch of `source` from `fromResourceVersion`, starting that watch on
   * the cluster if none runs. Resolves to the shared watch (to leave it later), or to the cluster's
   * refusal when it would not start the watch; 502/504 when the cluster cannot be reached.
   */
  async subscribe(
    source: WatchSource,
    fromResourceVersion: string,
    sub: WatchSubscriber,
  ): Promise<{ watch: SharedWatch } | { refusal: WatchRefusal }> {
    const key = JSON.stringify([
      source.conn.clusterId,
      source.conn.generation,
      source.path,
      source.labelSelector ?? '',
      source.fieldSelector ?? '',
    ]);
    let watch = this.watches.get(key);
    if (!watch || watch.ended) {
      watch = new SharedWatch(
        key,
        source,
        fromResourceVersion,
        {
          userAgent: WATCH_USER_AGENT,
          requestTimeoutMs: this.config.clusterRequestTimeoutSeconds * 1000,
          windowEvents: this.config.watch.windowEvents,
          windowBytes: WINDOW_BYTES,
          lingerMs: this.config.watch.lingerMs,
          upstreamTimeoutSeconds: this.config.watch.upstreamTimeoutSeconds,
        },
        (ended) => {
          if (this.watches.get(ended.key) === ended) this.watches.delete(ended.key);
        },
      );
      this.watches.set(key, watch);
    }
    let refusal: WatchRefusal | null;
    try {
      refusal = await watch.ready;
    } catch (error) {
      throw clusterUnreachable(source.conn.clusterName, this.config.clusterRequestTimeoutSeconds, error);
    }
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

/** The 502 or 504 of a cluster that did not answer, as the resource routes give it. */
export function clusterUnreachable(name: string, timeoutSeconds: number, error: unknown): Error {
  if (error instanceof HttpException) return error;
  if (classifyFailure(error) === 'timeout') {
    return new GatewayTimeoutException(`cluster '${name}' did not answer within ${timeoutSeconds} s`);
  }
  const code = (error as NodeJS.ErrnoException).code;
  return new BadGatewayException(`cluster '${name}' could not be reached: ${code ?? (error as Error).message}`);
}
