import {
  BadRequestException,
  HttpException,
  HttpStatus,
  Inject,
  Injectable,
  Logger,
  type OnModuleDestroy,
} from '@nestjs/common';
import { PassThrough } from 'node:stream';
import type { ClusterResponse } from '../clusters/cluster-request.js';
import { Authorizer } from '../access/authorizer.js';
import type { Caller } from '../auth/caller.js';
import { CredentialsService } from '../auth/credentials.service.js';
import {
  CLUSTER_CONNECTIONS,
  type ClusterConnection,
  type ClusterConnections,
} from '../clusters/cluster-connection.js';
import type { PodLogQueryDto } from './dto/pod-log-query.dto.js';
import { type Resolved, type ResourceTarget, ResourcesService } from './resources.service.js';
import { UpstreamClient } from './upstream.js';

/** How often a running log stream asks again whether its caller may still read it. */
export const LOG_RECHECK_INTERVAL_MS = 5_000;
/** Concurrent log streams one caller (user or API key) may hold, and the whole process. */
export const LOG_STREAMS_PER_CALLER = 20;
export const LOG_STREAMS_TOTAL = 1_000;

/** A log answer: the cluster's own (errors, passed through) or the owned stream of the log's text. */
export type LogAnswer =
  { kind: 'cluster'; response: ClusterResponse } | { kind: 'stream'; contentType: string; body: PassThrough };

/** What a stream needs to re-authorize its caller. */
interface StreamOwner {
  callerKey: string;
  secret: string | undefined;
  conn: ClusterConnection;
  namespace: string;
}

/**
 * One log stream, from the cluster to one caller: the only owner of both ends. The text is piped
 * with backpressure (a slow reader slows the cluster's stream, never the service's memory); the
 * upstream request is destroyed as soon as the caller leaves; the caller is re-authorized every
 * LOG_RECHECK_INTERVAL_MS; `end()` finishes the response cleanly (SIGTERM, revoked access).
 */
class LogStream {
  readonly body = new PassThrough();
  private timer?: NodeJS.Timeout;
  private checking = false;
  private ending = false;
  private done = false;

  constructor(
    private readonly upstream: ClusterResponse,
    readonly owner: StreamOwner,
    private readonly recheck: (owner: StreamOwner) => Promise<string | null>,
    private readonly onDone: (stream: LogStream, reason: string) => void,
  ) {}

  start(): void {
    this.upstream.on('error', (error) => {
      // The cluster broke the stream: the caller's connection is aborted, not ended as if the log were complete.
      if (!this.ending) this.body.destroy(error);
    });
    this.body.on('close', () => this.finish('closed'));
    this.upstream.pipe(this.body);
    this.timer = setInterval(() => void this.check(), LOG_RECHECK_INTERVAL_MS);
    this.timer.unref();
  }

  /** Ends the caller's response cleanly (what it has received stays valid) and closes the upstream request. */
  end(reason: string): void {
    if (this.ending || this.done) return;
    this.ending = true;
    this.upstream.unpipe(this.body);
    this.upstream.destroy();
    this.body.end();
    this.finish(reason);
  }

  private async check(): Promise<void> {
    if (this.checking || this.ending || this.done) return;
    this.checking = true;
    try {
      const refused = await this.recheck(this.owner);
      if (refused) this.end(refused);
    } finally {
      this.checking = false;
    }
  }

  private finish(reason: string): void {
    if (this.done) return;
    this.done = true;
    clearInterval(this.timer);
    if (!this.ending) this.upstream.destroy(); // the caller left: nothing may keep reading from the cluster
    this.onDone(this, reason);
  }
}

/** Pod logs: validated, authorized (verb `log`), streamed from the cluster, re-authorized while they run. */
@Injectable()
export class PodLogsService implements OnModuleDestroy {
  private readonly logger = new Logger(PodLogsService.name);
  private readonly streams = new Set<LogStream>();
  private readonly perCaller = new Map<string, number>();

  constructor(
    private readonly resources: ResourcesService,
    private readonly upstream: UpstreamClient,
    private readonly authorizer: Authorizer,
    private readonly credentials: CredentialsService,
    @Inject(CLUSTER_CONNECTIONS) private readonly clusters: ClusterConnections,
  ) {}

  /** Log streams running now. */
  get active(): number {
    return this.streams.size;
  }

  async readLog(
    caller: Caller,
    secret: string | undefined,
    target: Omit<ResourceTarget, 'resource'>,
    q: PodLogQueryDto,
  ): Promise<LogAnswer> {
    if (q.sinceSeconds !== undefined && q.sinceTime !== undefined) {
      throw new BadRequestException(['sinceSeconds and sinceTime exclude each other: send at most one']);
    }
    const r: Resolved = await this.resources.resolve(caller, { ...target, resource: 'pods' }, 'log');
    const callerKey = `${caller.kind}:${caller.id ?? caller.name}`;
    if ((this.perCaller.get(callerKey) ?? 0) >= LOG_STREAMS_PER_CALLER) {
      throw new HttpException(
        {
          message: `at most ${LOG_STREAMS_PER_CALLER} log streams per caller at a time: close one first`,
          retryAfter: 5,
        },
        HttpStatus.TOO_MANY_REQUESTS,
      );
    }
    if (this.streams.size >= LOG_STREAMS_TOTAL) {
      throw new HttpException(
        { message: 'too many log streams on this replica; try again later', retryAfter: 5 },
        HttpStatus.TOO_MANY_REQUESTS,
      );
    }

    const query = new URLSearchParams();
    for (const [key, value] of Object.entries(q)) if (value !== undefined) query.set(key, String(value));
    const response = await this.upstream.send(r.conn, {
      impersonate: r.impersonate,
      method: 'GET',
      path: `${r.path}/log`,
      query,
      // A followed log may be quiet for hours: only the wait for the answer's start is bounded.
      bodyTimeoutMs: q.follow === 'true' ? 0 : undefined,
    });
    if (response.statusCode !== 200) return { kind: 'cluster', response };

    const stream = new LogStream(
      response,
      { callerKey, secret, conn: r.conn, namespace: r.namespace! },
      (owner) => this.recheck(owner),
      (s, reason) => this.forget(s, reason),
    );
    this.streams.add(stream);
    this.perCaller.set(callerKey, (this.perCaller.get(callerKey) ?? 0) + 1);
    stream.start();
    return { kind: 'stream', contentType: String(response.headers['content-type'] ?? 'text/plain'), body: stream.body };
  }

  /** Ends every stream cleanly so its clients reconnect (to another replica): SIGTERM and shutdown. */
  closeAll(reason = 'the service is shutting down'): void {
    for (const stream of [...this.streams]) stream.end(reason);
  }

  onModuleDestroy(): void {
    this.closeAll();
  }

  /**
   * Asks again, as on a new request: do the credentials still resolve (session not revoked or
   * expired, user enabled, key not deleted), may this caller still read this pod's log, and is the
   * cluster still the same, enabled one? Returns why not, or null.
   */
  private async recheck(owner: StreamOwner): Promise<string | null> {
    try {
      if (!owner.secret) return 'no credentials to re-check';
      const caller = await this.credentials.resolve(owner.secret);
      if (caller.roles.length === 0) return 'the caller has no role';
      const decision = this.authorizer.can(caller, {
        verb: 'log',
        cluster: owner.conn.clusterName,
        resource: 'pods',
        namespace: owner.namespace,
      });
      if (!decision.allowed) return decision.reason;
      const conn = await this.clusters.forName(owner.conn.clusterName);
      if (conn.clusterId !== owner.conn.clusterId || conn.generation !== owner.conn.generation) {
        return `cluster '${owner.conn.clusterName}' changed`;
      }
      return null;
    } catch (error) {
      // Fail closed: whatever stops a new request from being allowed also ends a running stream.
      return error instanceof HttpException ? error.message : `re-check failed: ${(error as Error).message}`;
    }
  }

  private forget(stream: LogStream, reason: string): void {
    if (!this.streams.delete(stream)) return;
    const left = (this.perCaller.get(stream.owner.callerKey) ?? 1) - 1;
    if (left > 0) this.perCaller.set(stream.owner.callerKey, left);
    else this.perCaller.delete(stream.owner.callerKey);
    if (reason !== 'closed') this.logger.log(`log stream on '${stream.owner.conn.clusterName}' ended: ${reason}`);
  }
}
