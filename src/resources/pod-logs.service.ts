import { BadRequestException, Injectable, Logger } from '@nestjs/common';
import { PassThrough } from 'node:stream';
import type { AccessRequest } from '../access/authorizer.js';
import type { Caller } from '../access/caller.js';
import type { ClusterConnection } from '../clusters/cluster-connection.js';
import type { ClusterResponse } from '../clusters/gateway/answer.js';
import { type OwnedStream, StreamOwner, type StreamTicket } from '../streams/stream-owner.js';
import type { PodLogQueryDto } from './dto/pod-log-query.dto.js';
import { type ResourceTarget, ResourcesService } from './resources.service.js';

/** A log answer: the cluster's own (errors, passed through) or the owned stream of the log's text. */
export type LogAnswer =
  { kind: 'cluster'; response: ClusterResponse } | { kind: 'stream'; contentType: string; body: PassThrough };

/**
 * One log stream, from the cluster to one caller. The text is piped with backpressure (a slow reader
 * slows the cluster's stream, never the service's memory); the upstream request is destroyed as soon
 * as the caller leaves; its owner ends it cleanly (SIGTERM, revoked access, a changed cluster).
 */
class LogStream implements OwnedStream {
  private static readonly logger = new Logger('LogStream');
  readonly kind = 'log';
  readonly body = new PassThrough();
  private ending = false;
  private done = false;

  constructor(
    private readonly upstream: ClusterResponse,
    readonly caller: Caller,
    readonly secret: string,
    readonly cluster: ClusterConnection,
    readonly access: readonly AccessRequest[],
    private readonly owner: StreamOwner,
  ) {}

  start(ticket: StreamTicket): void {
    this.upstream.on('error', (error) => {
      // The cluster broke the stream: the caller's connection is aborted, not ended as if the log were complete.
      if (!this.ending) this.body.destroy(error);
    });
    this.body.on('close', () => this.finish());
    this.upstream.pipe(this.body);
    this.owner.own(this, ticket);
  }

  /** Ends the caller's response cleanly (what it has received stays valid) and closes the upstream request. */
  end(_code: number, _reason: string, message: string): void {
    if (this.ending || this.done) return;
    this.ending = true;
    LogStream.logger.log(`log stream on '${this.cluster.clusterName}' ended: ${message}`);
    this.upstream.unpipe(this.body);
    this.upstream.destroy();
    this.body.end();
    this.finish();
  }

  private finish(): void {
    if (this.done) return;
    this.done = true;
    if (!this.ending) this.upstream.destroy(); // the caller left: nothing may keep reading from the cluster
    this.owner.release(this);
  }
}

/** Pod logs: validated, authorized (verb `log`), streamed from the cluster as the caller, owned while they run. */
@Injectable()
export class PodLogsService {
  constructor(
    private readonly resources: ResourcesService,
    private readonly owner: StreamOwner,
  ) {}

  async readLog(
    caller: Caller,
    secret: string | undefined,
    target: Omit<ResourceTarget, 'resource'>,
    q: PodLogQueryDto,
  ): Promise<LogAnswer> {
    if (q.sinceSeconds !== undefined && q.sinceTime !== undefined) {
      throw new BadRequestException(['sinceSeconds and sinceTime exclude each other: send at most one']);
    }
    // The slot is taken before anything is awaited: concurrent requests cannot all pass the limit.
    const ticket = this.owner.admit(caller, 'log');
    try {
      const r = await this.resources.resolve(caller, { ...target, resource: 'pods' }, 'log');
      const query = new URLSearchParams();
      for (const [key, value] of Object.entries(q)) if (value !== undefined) query.set(key, String(value));
      const response = await r.cluster.send({
        method: 'GET',
        path: `${r.path}/log`,
        query,
        // A followed log may be quiet for hours: only the wait for the answer's start is bounded.
        bodyTimeoutMs: q.follow === 'true' ? 0 : undefined,
      });
      if (response.statusCode !== 200) {
        ticket.release();
        return { kind: 'cluster', response };
      }
      const access: AccessRequest[] = [
        { verb: 'log', cluster: r.cluster.name, resource: 'pods', namespace: r.namespace },
      ];
      const stream = new LogStream(response, caller, secret ?? '', r.cluster.conn, access, this.owner);
      stream.start(ticket);
      return {
        kind: 'stream',
        contentType: String(response.headers['content-type'] ?? 'text/plain'),
        body: stream.body,
      };
    } catch (error) {
      ticket.release();
      throw error;
    }
  }
}
