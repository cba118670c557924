import { HttpException, HttpStatus, Inject, Injectable, Logger, type OnModuleDestroy } from '@nestjs/common';
import { type AccessRequest, Authorizer } from '../access/authorizer.js';
import type { Caller } from '../access/caller.js';
import { CredentialsService } from '../auth/credentials.service.js';
import type { ClusterConnection } from '../clusters/cluster-connection.js';
import { ClusterGateway } from '../clusters/gateway/cluster-gateway.js';
import { APP_CONFIG, type AppConfig } from '../config/config.js';
import { streamOpened } from '../observability/service-metrics.js';

/** `exec`: every terminal session (exec, attach, port-forward), which share their limits. */
export type StreamKind = 'watch' | 'log' | 'exec';

/** A long-lived response as its owner sees it. Sources (a shared watch, a pod's log) feed it; the owner decides whether it may keep flowing. */
export interface OwnedStream {
  readonly kind: StreamKind;
  /** The caller that opened it. */
  readonly caller: Caller;
  /** The credential the caller presented: kept in memory only, to resolve it again on every re-check. */
  readonly secret: string;
  /** The cluster it reads from as it was when it opened: disabling, deleting or reconfiguring it ends the stream. */
  readonly cluster: ClusterConnection;
  /** Asked again on every re-check; all must stay allowed. */
  readonly access: readonly AccessRequest[];
  /**
   * What else must still hold, asked with the caller as resolved again (null: still allowed, else why
   * not): on an impersonating cluster the cluster's own answer for the person; on the Kubernetes path
   * the request decided again.
   */
  readonly clusterCheck?: (caller: Caller) => Promise<string | null>;
  /** Ends the stream, telling the client why in the stream's own way (a watch's ERROR event, the end of a log). */
  end(code: number, reason: string, message: string): void;
  /** Keeps an idle stream alive through proxies (an SSE comment); optional. */
  heartbeat?(): void;
  /** Called every second: a stream's own clocks (a terminal's pings, idle and maximum time); optional. */
  tick?(now: number): void;
}

/** A slot taken for a stream before anything else happens: released once, when the stream ends or never starts. */
export interface StreamTicket {
  release(): void;
}

/** How often streams' own clocks are asked. */
const TICK_MS = 1000;
/** Credentials resolved at the same time during one re-check. */
const RECHECK_CONCURRENCY = 8;

/**
 * The one owner of every long-lived response of this process (watches, logs, terminal sessions): admission within the per-user and per-replica limits of the configuration (429 beyond), the
 * slot reserved before any await; re-authorization of every stream on one timer (the credential
 * resolved again, the service's rules, the cluster unchanged and enabled, and on an impersonating
 * cluster the cluster's own answer for the person); heartbeats; and one shutdown path.
 */
@Injectable()
export class StreamOwner implements OnModuleDestroy {
  private readonly logger = new Logger(StreamOwner.name);
  private readonly streams = new Set<OwnedStream>();
  private readonly tickets = new Map<OwnedStream, StreamTicket>();
  private readonly open = { watch: 0, log: 0, exec: 0 };
  private readonly perUser = new Map<string, number>();
  private recheckTimer?: NodeJS.Timeout;
  private heartbeatTimer?: NodeJS.Timeout;
  private tickTimer?: NodeJS.Timeout;
  private rechecking = false;
  private stopping = false;

  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly credentials: CredentialsService,
    private readonly authorizer: Authorizer,
    private readonly gateway: ClusterGateway,
  ) {}

  get size(): number {
    return this.streams.size;
  }

  /**
   * Takes a slot for a new stream of this caller, synchronously (no await between the count and the
   * check): 429 with Retry-After beyond the limits, 503 while the service shuts down.
   */
  admit(caller: Caller, kind: StreamKind): StreamTicket {
    if (this.stopping) {
      throw new HttpException('the service is shutting down; try again', HttpStatus.SERVICE_UNAVAILABLE);
    }
    const { watch, exec } = this.config;
    const [total, perUser, what] =
      kind === 'watch'
        ? [watch.maxStreams, watch.maxStreamsPerCaller, 'watch streams']
        : kind === 'log'
          ? [watch.maxLogStreams, watch.maxLogStreamsPerUser, 'log streams']
          : [exec.maxSessions, exec.maxSessionsPerCaller, 'terminal sessions'];
    if (this.open[kind] >= total) {
      throw tooMany(`too many ${what} on this replica (at most ${total}); try again later`);
    }
    const key = `${kind}:${userKey(caller)}`;
    const held = this.perUser.get(key) ?? 0;
    if (held >= perUser) {
      throw tooMany(`too many ${what} of this user, API keys included (at most ${perUser}); close one first`);
    }
    this.open[kind]++;
    this.perUser.set(key, held + 1);
    const closeGauge = streamOpened(kind);
    let released = false;
    return {
      release: () => {
        if (released) return;
        released = true;
        closeGauge();
        this.open[kind]--;
        const left = (this.perUser.get(key) ?? 1) - 1;
        if (left > 0) this.perUser.set(key, left);
        else this.perUser.delete(key);
      },
    };
  }

  /** Takes a running stream under the owner's care, with the ticket it was admitted with. */
  own(stream: OwnedStream, ticket: StreamTicket): void {
    if (this.stopping) {
      ticket.release();
      stream.end(503, 'ServiceUnavailable', 'the service is shutting down');
      return;
    }
    this.streams.add(stream);
    this.tickets.set(stream, ticket);
    this.schedule();
  }

  /** A stream that ended (for whatever reason) gives its slot back. */
  release(stream: OwnedStream): void {
    this.tickets.get(stream)?.release();
    this.tickets.delete(stream);
    if (this.streams.delete(stream) && this.streams.size === 0) this.unschedule();
  }

  /** Ends every stream (the service drains or stops): their clients reconnect, to another replica. */
  closeAll(message = 'the service is shutting down'): void {
    this.stopping = true;
    if (this.streams.size > 0) this.logger.log(`${message}: ending ${this.streams.size} streams`);
    for (const stream of [...this.streams]) stream.end(503, 'ServiceUnavailable', message);
    this.unschedule();
  }

  onModuleDestroy(): void {
    this.closeAll('the service is stopping');
  }

  /**
   * One round: every distinct credential resolved once, every cluster looked up once, and each
   * stream asked about again; a stream that fails any of it ends, saying why.
   */
  async recheck(): Promise<void> {
    if (this.rechecking) return;
    this.rechecking = true;
    try {
      const clusters = new Map<string, Promise<string | null>>();
      const clusterProblem = (conn: ClusterConnection) => {
        let found = clusters.get(conn.clusterName);
        if (!found) {
          found = this.gateway.connection(conn.clusterName).then(
            (now) =>
              now.clusterId === conn.clusterId && now.generation === conn.generation
                ? null
                : `cluster '${conn.clusterName}' was replaced or reconfigured`,
            (error: unknown) => (error instanceof HttpException ? error.message : 'the cluster cannot be used'),
          );
          clusters.set(conn.clusterName, found);
        }
        return found;
      };
      const bySecret = new Map<string, OwnedStream[]>();
      for (const stream of this.streams) {
        const list = bySecret.get(stream.secret);
        if (list) list.push(stream);
        else bySecret.set(stream.secret, [stream]);
      }
      const entries = [...bySecret];
      // A few credentials at a time: many distinct callers must not make one round outlast the interval.
      for (let at = 0; at < entries.length; at += RECHECK_CONCURRENCY) {
        await Promise.all(
          entries
            .slice(at, at + RECHECK_CONCURRENCY)
            .map(([secret, streams]) => this.recheckCredential(secret, streams, clusterProblem)),
        );
      }
    } finally {
      this.rechecking = false;
    }
  }

  private async recheckCredential(
    secret: string,
    streams: OwnedStream[],
    clusterProblem: (conn: ClusterConnection) => Promise<string | null>,
  ): Promise<void> {
    let caller: Caller;
    try {
      caller = await this.credentials.resolve(secret);
    } catch (error) {
      if (!(error instanceof HttpException)) {
        // The database is unreachable: keep the streams until the next round rather than end them all.
        this.logger.warn(`re-checking streams failed: ${(error as Error).message}`);
        return;
      }
      for (const stream of streams) stream.end(401, 'Unauthorized', `${error.message}; the stream has ended`);
      return;
    }
    await Promise.all(streams.map((stream) => this.recheckStream(stream, caller, clusterProblem)));
  }

  private async recheckStream(
    stream: OwnedStream,
    caller: Caller,
    clusterProblem: (conn: ClusterConnection) => Promise<string | null>,
  ): Promise<void> {
    if (caller.roles.length === 0) {
      return stream.end(403, 'Forbidden', 'the caller has no role any more; the stream has ended');
    }
    for (const access of stream.access) {
      const decision = this.authorizer.can(caller, access);
      if (!decision.allowed) return stream.end(403, 'Forbidden', `${decision.reason}; the stream has ended`);
    }
    const changed = await clusterProblem(stream.cluster);
    if (changed) return stream.end(410, 'Gone', `${changed}; the stream has ended`);
    const refused = await stream.clusterCheck?.(caller).catch(() => null);
    if (refused) stream.end(403, 'Forbidden', `${refused}; the stream has ended`);
  }

  private schedule(): void {
    if (this.recheckTimer) return;
    this.recheckTimer = setInterval(() => void this.recheck(), this.config.watch.reauthMs).unref();
    this.heartbeatTimer = setInterval(() => {
      for (const stream of this.streams) stream.heartbeat?.();
    }, this.config.watch.heartbeatMs).unref();
    this.tickTimer = setInterval(() => {
      const now = Date.now();
      for (const stream of this.streams) stream.tick?.(now);
    }, TICK_MS).unref();
  }

  private unschedule(): void {
    clearInterval(this.recheckTimer);
    clearInterval(this.heartbeatTimer);
    clearInterval(this.tickTimer);
    this.recheckTimer = undefined;
    this.heartbeatTimer = undefined;
    this.tickTimer = undefined;
  }
}

/** Limits count per user: a user's sessions and every API key it owns share them. */
function userKey(caller: Caller): string {
  return caller.userId !== null ? `user:${caller.userId}` : `${caller.kind}:${caller.name}`;
}

function tooMany(message: string): HttpException {
  return new HttpException({ message, retryAfter: 5 }, HttpStatus.TOO_MANY_REQUESTS);
}
