import { BadRequestException } from '@nestjs/common';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { Readable } from 'node:stream';
import type { AccessRequest } from '../access/authorizer.js';
import type { Caller } from '../access/caller.js';
import type { ClusterConnection } from '../clusters/cluster-connection.js';
import type { OwnedStream, StreamOwner, StreamTicket } from '../streams/stream-owner.js';
import { revision, statusObject } from '../k8s/watch-events.js';
import type { WatchFormat } from '../watch/watch-stream.js';

/** Who a paged watch streams to, and for how long (`timeoutSeconds`; absent: until the client leaves). */
export interface NoticeClient {
  request: FastifyRequest;
  reply: FastifyReply;
  format: WatchFormat;
  secret: string;
  timeoutSeconds?: number;
  /** The `metadata.resourceVersion` of the page the watch follows: a change after it is told at once. */
  resourceVersion?: string;
}

/**
 * The version a paged watch follows from: SSE's `Last-Event-ID` (a reconnecting `EventSource`), else
 * `resourceVersion` (the page's); undefined: from now. Anything but a cluster's version is a 400 naming it.
 */
export function noticesSince(client: NoticeClient): bigint | undefined {
  const lastEventId = client.format === 'sse' ? client.request.headers['last-event-id'] : undefined;
  if (lastEventId !== undefined && lastEventId !== '') {
    const since = typeof lastEventId === 'string' ? revision(lastEventId) : null;
    if (since === null) {
      throw new BadRequestException(['Last-Event-ID must be an event id this service sent (a resourceVersion)']);
    }
    return since;
  }
  if (client.resourceVersion === undefined) return undefined;
  const since = revision(client.resourceVersion);
  if (since === null) {
    throw new BadRequestException(["resourceVersion must be a page's metadata.resourceVersion (digits)"]);
  }
  return since;
}

const CONTENT_TYPES: Record<WatchFormat, string> = {
  json: 'application/json',
  ndjson: 'application/x-ndjson',
  sse: 'text/event-stream; charset=utf-8',
};

/**
 * The stream of `CHANGED` notices of one paged watch, owned (limits, re-checks, heartbeats, drain) by the
 * StreamOwner. In SSE every frame carries `id: <resourceVersion>`: the version the client was last told
 * about, which `EventSource` sends back as `Last-Event-ID` when it reconnects.
 */
export class NoticeStream implements OwnedStream {
  readonly kind = 'watch';
  readonly secret: string;
  private readonly body = new Readable({ read: () => undefined });
  private closedFlag = false;
  private readonly closers: Array<() => void> = [];
  private lastId: string;

  constructor(
    private readonly client: NoticeClient,
    private readonly ticket: StreamTicket,
    private readonly owner: StreamOwner,
    readonly caller: Caller,
    readonly cluster: ClusterConnection,
    readonly access: readonly AccessRequest[],
    readonly clusterCheck: (caller: Caller) => Promise<string | null>,
    /** The version the stream starts from (the page's, or the cache's when none was given). */
    startId: string,
  ) {
    this.secret = client.secret;
    this.lastId = startId;
  }

  get closed(): boolean {
    return this.closedFlag;
  }

  begin(): void {
    const { reply, request } = this.client;
    const socket = request.raw.socket as { setTimeout?: (ms: number) => void } | undefined;
    if (typeof socket?.setTimeout === 'function') socket.setTimeout(0);
    reply.raw.once('close', () => this.finish());
    reply
      .status(200)
      .header('content-type', CONTENT_TYPES[this.client.format])
      .header('cache-control', 'no-cache, no-store')
      .header('x-accel-buffering', 'no');
    reply.raw.once('pipe', () => {
      if (typeof reply.raw.flushHeaders === 'function') reply.raw.flushHeaders();
    });
    void reply.send(this.body);
    if (this.client.timeoutSeconds !== undefined) {
      const timer = setTimeout(() => this.close(), this.client.timeoutSeconds * 1000);
      timer.unref();
      this.closers.push(() => clearTimeout(timer));
    }
  }

  /** Ends the stream cleanly (its time-out). */
  close(): void {
    if (this.closedFlag) return;
    this.body.push(null);
    this.finish();
  }

  onClose(fn: () => void): void {
    this.closers.push(fn);
  }

  /** `{type: "CHANGED", total, resourceVersion}`: the result may differ from the page at that version. */
  changed(total: number, resourceVersion: string): void {
    this.lastId = resourceVersion;
    this.send({ type: 'CHANGED', total, resourceVersion });
  }

  heartbeat(): void {
    if (this.client.format === 'sse' && !this.closedFlag) this.body.push(': heartbeat\n\n');
  }

  end(code: number, reason: string, message: string): void {
    if (this.closedFlag) return;
    this.send({ type: 'ERROR', object: statusObject(code, reason, message) });
    this.body.push(null);
    this.finish();
  }

  private send(event: Record<string, unknown>): void {
    if (this.closedFlag) return;
    const json = JSON.stringify(event);
    this.body.push(
      this.client.format === 'sse'
        ? `event: ${String(event.type)}\nid: ${this.lastId}\ndata: ${json}\n\n`
        : `${json}\n`,
    );
  }

  private finish(): void {
    if (this.closedFlag) return;
    this.closedFlag = true;
    for (const fn of this.closers.splice(0)) fn();
    this.owner.release(this);
    this.ticket.release();
  }
}
