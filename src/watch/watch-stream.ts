import { Logger } from '@nestjs/common';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { Readable } from 'node:stream';
import type { AccessRequest } from '../access/authorizer.js';
import type { Caller } from '../access/caller.js';
import type { LabelSelector } from '../k8s/label-selector.js';
import type { ClusterClient } from '../clusters/gateway/cluster-client.js';
import type { OwnedStream, StreamOwner } from '../streams/stream-owner.js';
import type { SharedWatch, WatchSource, WatchSubscriber } from './shared-watch.js';
import { statusObject, WatchEvent } from '../k8s/watch-events.js';

/**
 * How events are written: `json` (newline-delimited JSON as `application/json`, like the
 * apiserver, for kubectl and client-go), `ndjson` (the same as `application/x-ndjson`), or `sse`
 * (Server-Sent Events).
 */
export type WatchFormat = 'json' | 'ndjson' | 'sse';

/** Everything one watch stream needs, from the route that opened it. */
export interface WatchRequest {
  caller: Caller;
  /** The credential the caller presented: kept in memory only, to check it again while the stream runs. */
  secret: string;
  request: FastifyRequest;
  reply: FastifyReply;
  source: WatchSource;
  /** The cluster as the caller (impersonated on an impersonating cluster): the initial list is read with it. */
  asCaller: ClusterClient;
  /** On an impersonating cluster: the cluster's own answer for the person, asked at the start and on every re-check. */
  clusterCheck?: (caller: Caller) => Promise<string | null>;
  /** Filled into the objects of initial ADDED events where the cluster's list leaves them out. */
  apiVersion: string;
  kind: string;
  /** Asked again on every re-check; all must stay allowed. */
  access: AccessRequest[];
  /** Start after this version; absent or '0': first the current objects as ADDED events. */
  resourceVersion?: string;
  bookmarks: boolean;
  /** End the stream after this many seconds (the client then resumes, as with the apiserver). */
  timeoutSeconds?: number;
  format: WatchFormat;
}

const CONTENT_TYPES: Record<WatchFormat, string> = {
  json: 'application/json',
  ndjson: 'application/x-ndjson',
  sse: 'text/event-stream; charset=utf-8',
};
const HEARTBEAT = Buffer.from(': heartbeat\n\n');
const HIGH_WATER_MARK = 64 * 1024;

/**
 * One client's watch stream, from the first byte to the last: it receives events from a shared
 * watch, writes them in the client's format with backpressure, cuts the client off when it falls
 * more than `bufferBytes` behind (the others are never slowed), ends after the client's
 * `timeoutSeconds`, and is closed by its registry when the caller loses access or on shutdown.
 */
export class WatchStream implements WatchSubscriber, OwnedStream {
  private static readonly logger = new Logger(WatchStream.name);
  readonly kind = 'watch';
  cursor: bigint | null = null;
  readonly bookmarks: boolean;
  readonly callerKey: string;
  readonly selector?: LabelSelector;
  readonly caller: Caller;
  readonly secret: string;
  readonly access: readonly AccessRequest[];
  readonly clusterCheck?: (caller: Caller) => Promise<string | null>;
  private readonly body: Readable;
  private begun = false;
  private closedFlag = false;
  private watch?: SharedWatch;
  private timeoutTimer?: NodeJS.Timeout;
  private waiters: Array<() => void> = [];

  constructor(
    readonly req: WatchRequest,
    private readonly owner: StreamOwner,
    private readonly bufferBytes: number,
    selector?: LabelSelector,
  ) {
    this.bookmarks = req.bookmarks;
    this.selector = selector;
    this.callerKey = `${req.caller.kind}:${req.caller.id}`;
    this.caller = req.caller;
    this.secret = req.secret;
    this.access = req.access;
    this.clusterCheck = req.clusterCheck;
    this.body = new Readable({
      highWaterMark: HIGH_WATER_MARK,
      // Node asks for more (`_read`) as the reader takes what would leave less than the high-water mark
      // queued, before it is taken out of the queue: that is the moment to queue the next.
      read: () => {
        for (const wake of this.waiters.splice(0)) wake();
      },
    });
  }

  get cluster() {
    return this.req.source.cluster.conn;
  }

  get closed(): boolean {
    return this.closedFlag;
  }

  /** Whether the headers went out: from then on a failure can only be told as an ERROR event. */
  get started(): boolean {
    return this.begun;
  }

  get isSse(): boolean {
    return this.req.format === 'sse';
  }

  /** Sends the headers and starts streaming (events delivered before are already queued). */
  begin(): void {
    if (this.begun) return;
    this.begun = true;
    const { reply, request } = this.req;
    // A stream is long-lived by design: no idle time-out on its socket (request time-outs apply to receiving requests).
    const socket = request.raw.socket as { setTimeout?: (ms: number) => void } | undefined;
    if (typeof socket?.setTimeout === 'function') socket.setTimeout(0); // (no real socket under inject())
    reply.raw.once('close', () => this.clientLeft());
    reply
      .status(200)
      .header('content-type', CONTENT_TYPES[this.req.format])
      .header('cache-control', 'no-cache, no-store')
      .header('x-accel-buffering', 'no');
    if (this.req.timeoutSeconds !== undefined) {
      this.timeoutTimer = setTimeout(() => this.close(), this.req.timeoutSeconds * 1000);
      this.timeoutTimer.unref();
    }
    // Fastify sets the headers and then pipes: send them at once, so the client knows the watch runs before any event.
    reply.raw.once('pipe', () => {
      if (typeof reply.raw.flushHeaders === 'function') reply.raw.flushHeaders();
    });
    void reply.send(this.body);
  }

  /** Remembers the shared watch this stream receives from, to leave it at the end. */
  joined(watch: SharedWatch): void {
    if (this.closedFlag) watch.detach(this);
    else this.watch = watch;
  }

  deliver(event: WatchEvent): void {
    if (event.type === 'BOOKMARK' && !this.bookmarks) return;
    this.write(this.isSse ? event.sse() : event.line);
  }

  /**
   * One of the current objects a stream without a resourceVersion starts with (SSE: without an id). The
   * list is paced by the client (the caller waits for `drained()`), so it is never cut off as slow.
   */
  deliverInitial(event: WatchEvent): void {
    if (!this.closedFlag) this.body.push(this.isSse ? event.sse(false) : event.line);
  }

  /** Whether the client has a full buffer to read before more is queued. */
  get backlogged(): boolean {
    return this.body.readableLength >= HIGH_WATER_MARK;
  }

  /** SSE: after the initial objects, the position a reconnection (`Last-Event-ID`) resumes from. */
  position(resourceVersion: string): void {
    if (this.isSse && resourceVersion) this.write(Buffer.from(`id: ${resourceVersion}\n\n`));
  }

  heartbeat(): void {
    if (this.isSse && this.begun && !this.closedFlag && this.body.readableLength === 0) this.body.push(HEARTBEAT);
  }

  /** Resolves when the client has taken what is queued (for paced initial lists), or the stream closed. */
  drained(): Promise<void> {
    if (this.closedFlag || this.body.readableLength < HIGH_WATER_MARK) return Promise.resolve();
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  /** Ends the stream cleanly, after `final` (an ERROR event) if given. */
  close(final?: WatchEvent): void {
    if (this.closedFlag) return;
    if (final) this.body.push(this.isSse ? final.sse() : final.line);
    this.closedFlag = true;
    this.body.push(null);
    this.cleanup();
  }

  /** Ends the stream with an ERROR event carrying a Status built here (401 or 403 on a failed re-check). */
  refuse(code: number, reason: string, message: string): void {
    this.close(WatchEvent.of('ERROR', statusObject(code, reason, message)));
  }

  end(code: number, reason: string, message: string): void {
    this.refuse(code, reason, message);
  }

  /** Drops a stream that was never started (the cluster refused, or the stream could not begin). */
  abandon(): void {
    if (this.closedFlag) return;
    this.closedFlag = true;
    this.body.destroy();
    this.cleanup();
  }

  private write(chunk: Buffer): void {
    if (this.closedFlag) return;
    const queued = this.body.readableLength;
    if (queued > 0 && queued + chunk.length > this.bufferBytes) {
      this.cutOff();
      return;
    }
    this.body.push(chunk);
  }

  /** The client does not keep up: drop it at once rather than buffer without bound or slow the others. */
  private cutOff(): void {
    WatchStream.logger.warn(
      `watch stream of ${this.callerKey} on ${this.req.source.path} cut off: more than ${this.bufferBytes} bytes unread`,
    );
    this.closedFlag = true;
    if (this.begun) this.req.reply.raw.destroy();
    this.body.destroy();
    this.cleanup();
  }

  private clientLeft(): void {
    if (this.closedFlag) return;
    this.closedFlag = true;
    this.body.destroy();
    this.cleanup();
  }

  private cleanup(): void {
    clearTimeout(this.timeoutTimer);
    for (const wake of this.waiters.splice(0)) wake();
    this.watch?.detach(this);
    this.watch = undefined;
    this.owner.release(this);
  }
}
