import {
  HttpException,
  HttpStatus,
  Inject,
  Injectable,
  type OnApplicationBootstrap,
  type OnModuleDestroy,
} from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import { PassThrough, type Readable } from 'node:stream';
import type { Caller } from '../auth/caller.js';
import { drainOf } from '../common/drain.js';
import { APP_CONFIG, type AppConfig } from '../config/config.js';

/** Why a stream may no longer flow (a revoked key, a role that no longer allows it), or null while it may. */
export type Recheck = () => Promise<string | null>;

interface Open {
  caller: string;
  end(): void;
}

const callerKey = (caller: Caller) => `${caller.kind}:${caller.id ?? caller.name}`;

/**
 * The long-lived answers of the Kubernetes path (watches, followed logs): admitted within the watch
 * limits (429 beyond), checked again every CAS_WATCH_REAUTH_SECONDS (the credential resolved anew and
 * the request decided anew: a revoked key or a changed role ends the stream), and ended cleanly when
 * the service drains, so kubectl and client-go reconnect elsewhere. The stream owner of the data-plane
 * gateway takes this over.
 */
@Injectable()
export class KubeStreams implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly open = new Set<Open>();
  private readonly perCaller = new Map<string, number>();

  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly adapterHost: HttpAdapterHost,
  ) {}

  onApplicationBootstrap(): void {
    const fastify = this.adapterHost.httpAdapter?.getInstance?.();
    try {
      if (fastify) drainOf(fastify).onDrain(() => this.closeAll());
    } catch {
      // an app not built by createApp() (no drain): streams still end on shutdown
    }
  }

  onModuleDestroy(): void {
    this.closeAll();
  }

  /** Throws 429 when this caller (or this replica) has as many streams open as it may. */
  admit(caller: Caller): void {
    const { maxStreams, maxStreamsPerCaller } = this.config.watch;
    if (this.open.size >= maxStreams || (this.perCaller.get(callerKey(caller)) ?? 0) >= maxStreamsPerCaller) {
      throw new HttpException(
        {
          message: `too many watches and followed logs open (at most ${maxStreamsPerCaller} per caller, ${maxStreams} per replica)`,
          retryAfter: 5,
        },
        HttpStatus.TOO_MANY_REQUESTS,
      );
    }
  }

  /** The answer to hand to the caller: the cluster's bytes, until the caller leaves, a re-check fails or the service drains. */
  own(caller: Caller, upstream: Readable, recheck: Recheck): Readable {
    const key = callerKey(caller);
    const out = new PassThrough();
    let ending = false;
    const entry: Open = {
      caller: key,
      end: () => {
        // The caller's answer ends cleanly (kubectl and client-go then watch again); the cluster's is dropped.
        ending = true;
        upstream.unpipe(out);
        out.end();
        upstream.destroy();
      },
    };
    this.open.add(entry);
    this.perCaller.set(key, (this.perCaller.get(key) ?? 0) + 1);
    let checking = false;
    const timer = setInterval(() => {
      if (checking) return;
      checking = true;
      recheck()
        .then((why) => why !== null && entry.end(), entry.end)
        .finally(() => (checking = false));
    }, this.config.watch.reauthMs);
    timer.unref();
    upstream.on('error', (error) => {
      if (!ending) out.destroy(error);
    });
    out.once('close', () => {
      clearInterval(timer);
      upstream.destroy();
      if (!this.open.delete(entry)) return;
      const left = (this.perCaller.get(key) ?? 1) - 1;
      if (left > 0) this.perCaller.set(key, left);
      else this.perCaller.delete(key);
    });
    upstream.pipe(out);
    return out;
  }

  private closeAll(): void {
    for (const entry of [...this.open]) entry.end();
  }
}
