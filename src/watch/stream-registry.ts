import {
  HttpException,
  HttpStatus,
  Inject,
  Injectable,
  Logger,
  type OnApplicationBootstrap,
  type OnModuleDestroy,
} from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import { Authorizer } from '../access/authorizer.js';
import type { Caller } from '../auth/caller.js';
import { CredentialsService } from '../auth/credentials.service.js';
import { drainOf } from '../common/drain.js';
import { APP_CONFIG, type AppConfig } from '../config/config.js';
import type { StreamOwner, WatchStream } from './watch-stream.js';

/**
 * Every open watch stream of this process: it admits streams within the global and per-caller
 * limits (429 beyond), checks each stream's credential and permissions again every few seconds
 * (a revoked session, a disabled user, a deleted key or a changed role ends the stream, on every
 * replica, because the credential is resolved from the database), sends SSE heartbeats, and
 * closes every stream when the service drains or stops.
 */
/** Credentials resolved at the same time during one re-check. */
const RECHECK_CONCURRENCY = 8;

@Injectable()
export class StreamRegistry implements StreamOwner, OnApplicationBootstrap, OnModuleDestroy {
  private readonly logger = new Logger(StreamRegistry.name);
  private readonly streams = new Set<WatchStream>();
  private readonly perCaller = new Map<string, number>();
  private reauthTimer?: NodeJS.Timeout;
  private heartbeatTimer?: NodeJS.Timeout;
  private rechecking = false;
  private stopping = false;

  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly credentials: CredentialsService,
    private readonly authorizer: Authorizer,
    private readonly adapterHost: HttpAdapterHost,
  ) {}

  onApplicationBootstrap(): void {
    const fastify = this.adapterHost.httpAdapter?.getInstance?.();
    try {
      if (fastify) drainOf(fastify).onDrain(() => this.closeAll('the service is shutting down'));
    } catch {
      // an app not built by createApp() (no drain): streams still close on shutdown
    }
  }

  onModuleDestroy(): void {
    this.closeAll('the service is stopping');
  }

  get size(): number {
    return this.streams.size;
  }

  /** Checks the limits for a new stream of this caller (429 with Retry-After beyond them). */
  admit(caller: Caller): void {
    if (this.stopping) {
      throw new HttpException('the service is shutting down; try again', HttpStatus.SERVICE_UNAVAILABLE);
    }
    const { maxStreams, maxStreamsPerCaller } = this.config.watch;
    if (this.streams.size >= maxStreams) {
      throw new HttpException(
        { message: `too many watch streams on this replica (at most ${maxStreams}); try again later`, retryAfter: 5 },
        HttpStatus.TOO_MANY_REQUESTS,
      );
    }
    if ((this.perCaller.get(callerKey(caller)) ?? 0) >= maxStreamsPerCaller) {
      throw new HttpException(
        {
          message: `too many watch streams of this caller (at most ${maxStreamsPerCaller}); close one first`,
          retryAfter: 5,
        },
        HttpStatus.TOO_MANY_REQUESTS,
      );
    }
  }

  /** Counts a stream admitted just before (same tick: no await between admit() and add()). */
  add(stream: WatchStream): void {
    this.streams.add(stream);
    this.perCaller.set(stream.callerKey, (this.perCaller.get(stream.callerKey) ?? 0) + 1);
    this.schedule();
  }

  release(stream: WatchStream): void {
    if (!this.streams.delete(stream)) return;
    const left = (this.perCaller.get(stream.callerKey) ?? 1) - 1;
    if (left > 0) this.perCaller.set(stream.callerKey, left);
    else this.perCaller.delete(stream.callerKey);
    if (this.streams.size === 0) this.unschedule();
  }

  /**
   * Resolves every distinct credential once (one query each, however many streams share it) and
   * asks the authorizer again for each stream; a stream whose caller fails ends with an ERROR event.
   */
  async recheck(): Promise<void> {
    if (this.rechecking) return;
    this.rechecking = true;
    try {
      const bySecret = new Map<string, WatchStream[]>();
      for (const stream of this.streams) {
        const list = bySecret.get(stream.req.secret);
        if (list) list.push(stream);
        else bySecret.set(stream.req.secret, [stream]);
      }
      const entries = [...bySecret];
      // A few credentials at a time: many distinct callers must not make one check outlast the interval.
      for (let at = 0; at < entries.length; at += RECHECK_CONCURRENCY) {
        await Promise.all(
          entries
            .slice(at, at + RECHECK_CONCURRENCY)
            .map(([secret, streams]) => this.recheckCredential(secret, streams)),
        );
      }
    } finally {
      this.rechecking = false;
    }
  }

  private async recheckCredential(secret: string, streams: WatchStream[]): Promise<void> {
    let caller: Caller;
    try {
      caller = await this.credentials.resolve(secret);
    } catch (error) {
      if (!(error instanceof HttpException)) {
        // The database is unreachable: keep the streams until the next check rather than end them all.
        this.logger.warn(`re-checking watch streams failed: ${(error as Error).message}`);
        return;
      }
      for (const stream of streams) stream.refuse(401, 'Unauthorized', `${error.message}; the stream has ended`);
      return;
    }
    for (const stream of streams) {
      if (caller.roles.length === 0) {
        stream.refuse(403, 'Forbidden', 'the caller has no role any more; the stream has ended');
        continue;
      }
      for (const access of stream.req.access) {
        const decision = this.authorizer.can(caller, access);
        if (!decision.allowed) {
          stream.refuse(403, 'Forbidden', `${decision.reason}; the stream has ended`);
          break;
        }
      }
    }
  }

  private closeAll(reason: string): void {
    this.stopping = true;
    if (this.streams.size > 0) this.logger.log(`${reason}: closing ${this.streams.size} watch streams`);
    for (const stream of [...this.streams]) stream.close();
    this.unschedule();
  }

  private schedule(): void {
    if (this.reauthTimer) return;
    this.reauthTimer = setInterval(() => void this.recheck(), this.config.watch.reauthMs);
    this.heartbeatTimer = setInterval(() => {
      for (const stream of this.streams) stream.heartbeat();
    }, this.config.watch.heartbeatMs);
    this.reauthTimer.unref();
    this.heartbeatTimer.unref();
  }

  private unschedule(): void {
    clearInterval(this.reauthTimer);
    clearInterval(this.heartbeatTimer);
    this.reauthTimer = undefined;
    this.heartbeatTimer = undefined;
  }
}

function callerKey(caller: Caller): string {
  return `${caller.kind}:${caller.id}`;
}
