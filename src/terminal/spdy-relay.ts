import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type { StringDecoder } from 'node:string_decoder';
import type { AccessRequest } from '../access/authorizer.js';
import type { Caller } from '../access/caller.js';
import type { ClusterConnection } from '../clusters/cluster-connection.js';
import type { OwnedStream } from '../streams/stream-owner.js';
import type { AsciicastRecording } from './recording.js';
import {
  dataFrame,
  FLAG_FIN,
  HEADER_LIMITS,
  SpdyFrameReader,
  type SpdyFrame,
  SpdyHeaderDecoder,
  SYN_STREAM,
} from './spdy-frames.js';
import { endStatus, exitCodeOf, STDERR, STDOUT, textDecoders, type TerminalKind } from './terminal-protocol.js';
import { type SessionEnd, sessionTimeout } from './terminal-session.js';

/** The most of the error stream kept to read the exit code from (a Status is a few hundred bytes). */
const ERROR_LIMIT = 64 * 1024;
/** Streams an exec or attach session may open (client-go opens at most five: error, stdin, stdout, stderr, resize). */
const EXEC_STREAMS = 16;

export interface SpdyRelayOptions {
  kind: TerminalKind;
  caller: Caller;
  secret: string;
  cluster: ClusterConnection;
  access: AccessRequest[];
  /** The client's upgraded connection (kubectl), after the service's 101. */
  client: Duplex;
  /** Bytes the client sent with its upgrade request (before the 101): relayed first. */
  clientHead: Buffer;
  /** The cluster's upgraded connection, paused until the relay listens. */
  upstream: Duplex;
  /** Bytes the cluster sent after its 101: relayed first. */
  upstreamHead: Buffer;
  /** The stream protocol the cluster agreed to (`v4.channel.k8s.io`: the error stream carries a Status). */
  protocol: string;
  /** TCP keep-alive probes (SPDY pings are the client's and the kubelet's own). */
  pingMs: number;
  idleMs: number;
  maxMs: number;
  recording?: AsciicastRecording;
  onEnd(end: SessionEnd & { ports?: number[]; portsTruncated?: boolean }): void;
}

/**
 * A SPDY/3.1 session (kubectl ≤ 1.29's exec, attach, port-forward). The bytes pass untouched; the
 * relay reads the frames as they pass (spdy-frames.ts) to know each stream's type from the client's
 * SYN_STREAM, so that it can record stdout and stderr and resizes (never stdin), take the exit code
 * from the error stream, list the ports forwarded, and end a session as the WebSocket one ends: a
 * Status on the error stream, which kubectl prints and exits non-zero on. Only whole frames are written
 * either way: toward the client so that Status never lands inside one of the cluster's frames, toward the
 * cluster so that a SYN_STREAM goes on only once its header block has been read within the bounds (the
 * client's later frames wait for it, the client unread meanwhile), and so that the cluster never answers on
 * a stream whose type is not known yet. Each side is paused while the other's socket has too much queued.
 */
export class SpdyRelay implements OwnedStream {
  readonly kind = 'exec' as const;
  readonly caller: Caller;
  readonly secret: string;
  readonly cluster: ClusterConnection;
  readonly access: readonly AccessRequest[];
  private readonly startedAt = Date.now();
  private lastTraffic = Date.now();
  private bytesIn = 0;
  private bytesOut = 0;
  private exitCode?: number;
  private ended = false;
  private readonly fromClient = new SpdyFrameReader();
  private readonly fromCluster = new SpdyFrameReader();
  private readonly clientHeaders: SpdyHeaderDecoder;
  /** The client's frames that came after a SYN_STREAM whose header block is being inflated, in order. */
  private readonly waiting: Array<() => void> = [];
  private inflating = false;
  /** The cluster's socket has too much queued: the client is not read until it drains. */
  private clusterFull = false;
  /** Each stream the client opened: its `streamType` (error, stdin, stdout, stderr, resize, data). */
  private readonly streamTypes = new Map<number, string>();
  private readonly ports = new Set<number>();
  /** A port-forward past the header bound: later streams' ports are not read (the end row says so). */
  private portsTruncated = false;
  private errorStream?: number;
  private errorBytes: Buffer[] = [];
  private readonly decoders: Map<number, StringDecoder> = textDecoders();

  constructor(private readonly o: SpdyRelayOptions) {
    this.caller = o.caller;
    this.secret = o.secret;
    this.cluster = o.cluster;
    this.access = o.access;
    for (const socket of [o.client, o.upstream]) {
      const tcp = socket as Partial<Socket>;
      tcp.setNoDelay?.(true);
      tcp.setKeepAlive?.(true, o.pingMs);
    }
    // Exec and attach open a handful of streams; a port-forward two per connection, read up to the bounds.
    this.clientHeaders = new SpdyHeaderDecoder(
      o.kind === 'portforward' ? HEADER_LIMITS : { ...HEADER_LIMITS, streams: EXEC_STREAMS },
    );
    o.client.on('data', (chunk: Buffer) => this.fromClientBytes(chunk));
    o.client.on('end', () => this.inOrder(() => o.upstream.end()));
    o.upstream.on('data', (chunk: Buffer) => this.fromClusterBytes(chunk));
    o.client.on('close', () => {
      this.finish('the client closed the session');
      o.upstream.destroy();
    });
    // The cluster's end: what it sent is still delivered, then the client's connection closes.
    o.upstream.on('close', () => {
      this.finish(this.exitCode === undefined ? 'the cluster ended the session' : 'the command ended');
      this.closeClient();
    });
    o.client.on('error', () => o.client.destroy());
    o.upstream.on('error', () => o.upstream.destroy());
    // What came with the upgrades is read and relayed like everything after it.
    if (o.upstreamHead.length > 0) this.fromClusterBytes(o.upstreamHead);
    if (o.clientHead.length > 0) this.fromClientBytes(o.clientHead);
  }

  /** Ends the session for a reason of the service's: a Status on the error stream (exec, attach), then both connections. */
  end(code: number, reason: string, message: string): void {
    if (this.ended) return;
    if (this.errorStream !== undefined && this.o.kind !== 'portforward' && this.o.client.writable) {
      this.o.client.write(dataFrame(this.errorStream, endStatus(this.o.protocol, code, reason, message), true));
    }
    this.finish(message);
    this.o.upstream.destroy();
    this.closeClient();
  }

  tick(now: number): void {
    const timeout = sessionTimeout(now, this.startedAt, this.lastTraffic, this.o);
    if (timeout) this.end(408, 'Timeout', timeout);
  }

  /** Bytes from the client: whole frames go on to the cluster, each read for stream types and resizes first. */
  private fromClientBytes(chunk: Buffer): void {
    this.bytesIn += chunk.length;
    this.lastTraffic = Date.now();
    let frames: SpdyFrame[];
    try {
      frames = this.fromClient.push(chunk).frames;
    } catch {
      return this.end(400, 'BadRequest', 'the client sent SPDY the service cannot read: the session has ended');
    }
    this.o.upstream.cork();
    for (const frame of frames) this.inOrder(() => this.fromClientFrame(frame));
    this.o.upstream.uncork();
    this.flow();
  }

  /** Runs now, or (a header block being inflated) after it and what waits before, in the order the client sent. */
  private inOrder(work: () => void): void {
    if (this.inflating) this.waiting.push(work);
    else work();
  }

  /** The client is read while no header block is being inflated and the cluster's socket takes more. */
  private flow(): void {
    if (this.ended) return;
    if (this.inflating || this.clusterFull) this.o.client.pause();
    else this.o.client.resume();
  }

  private toCluster(bytes: Buffer): void {
    const { upstream } = this.o;
    if (!upstream.write(bytes) && !this.clusterFull) {
      this.clusterFull = true;
      upstream.once('drain', () => {
        this.clusterFull = false;
        this.flow();
      });
    }
  }

  /** Bytes from the cluster: whole frames go on to the client, each side paused while the client has too much queued. */
  private fromClusterBytes(chunk: Buffer): void {
    const { client, upstream } = this.o;
    this.bytesOut += chunk.length;
    this.lastTraffic = Date.now();
    let read: ReturnType<SpdyFrameReader['push']>;
    try {
      read = this.fromCluster.push(chunk);
    } catch {
      return this.end(502, 'BadGateway', 'the cluster sent SPDY the service cannot read: the session has ended');
    }
    for (const frame of read.frames) this.fromClusterFrame(frame);
    if (read.whole.length > 0 && !client.write(read.whole)) {
      upstream.pause();
      client.once('drain', () => upstream.resume());
    }
  }

  private fromClientFrame(frame: SpdyFrame): void {
    if (this.ended) return;
    if (frame.control && frame.type === SYN_STREAM && !this.portsTruncated) return this.synStream(frame);
    if (!frame.control && this.o.recording && this.streamTypes.get(frame.streamId) === 'resize') {
      this.resize(frame.body);
    }
    this.toCluster(frame.bytes);
  }

  /**
   * A SYN_STREAM goes on once its header block is read. Past a bound (or malformed), an exec or attach
   * ends with a Status naming it; a port-forward, whose headers only name ports for the audit row, goes
   * on with its later streams unread (it opens two per connection for as long as it runs).
   */
  private synStream(frame: SpdyFrame): void {
    this.inflating = true;
    this.clientHeaders.synStream(frame.body).then(
      (headers) => {
        if (this.ended) return;
        this.opened(frame.streamId, headers);
        this.toCluster(frame.bytes);
        this.inflated();
      },
      (error: Error) => {
        if (this.ended) return;
        if (this.o.kind !== 'portforward') {
          return this.end(400, 'BadRequest', `${error.message}: the session has ended`);
        }
        this.portsTruncated = true;
        this.toCluster(frame.bytes);
        this.inflated();
      },
    );
  }

  /** The header block is read: the frames that waited for it go on (until one is a SYN_STREAM again). */
  private inflated(): void {
    this.inflating = false;
    this.o.upstream.cork();
    while (!this.inflating && !this.ended && this.waiting.length > 0) this.waiting.shift()!();
    this.o.upstream.uncork();
    this.flow();
  }

  private opened(streamId: number, headers: Map<string, string>): void {
    const type = headers.get('streamtype') ?? '';
    if (this.o.kind === 'portforward') {
      const port = Number(headers.get('port'));
      if (Number.isInteger(port) && port > 0 && port < 65536) this.ports.add(port);
      return;
    }
    this.streamTypes.set(streamId, type);
    if (type === 'error' && this.errorStream === undefined) this.errorStream = streamId;
  }

  /** client-go writes each size as a JSON document and a newline. */
  private resize(body: Buffer): void {
    for (const line of body.toString('utf8').split('\n')) {
      try {
        const size = JSON.parse(line) as { Width?: unknown; Height?: unknown };
        if (Number.isInteger(size.Width) && Number.isInteger(size.Height)) {
          this.o.recording?.resize(size.Width as number, size.Height as number);
        }
      } catch {
        // not a size: the kubelet ignores it too
      }
    }
  }

  private fromClusterFrame(frame: SpdyFrame): void {
    if (frame.control || this.o.kind === 'portforward') return;
    const type = this.streamTypes.get(frame.streamId);
    if (type === 'error') {
      if (this.errorBytes.reduce((n, b) => n + b.length, 0) < ERROR_LIMIT) this.errorBytes.push(frame.body);
      if (frame.flags & FLAG_FIN) this.exitCode = exitCodeOf(Buffer.concat(this.errorBytes)) ?? this.exitCode;
    } else if (this.o.recording && (type === 'stdout' || type === 'stderr')) {
      this.o.recording.output(this.decoders.get(type === 'stdout' ? STDOUT : STDERR)!.write(frame.body));
    }
  }

  private closeClient(): void {
    this.o.client.end();
    setTimeout(() => this.o.client.destroy(), 5000).unref();
  }

  private finish(reason: string): void {
    if (this.ended) return;
    this.ended = true;
    this.waiting.length = 0;
    this.clientHeaders.close();
    if (this.exitCode === undefined && this.errorBytes.length > 0) {
      this.exitCode = exitCodeOf(Buffer.concat(this.errorBytes));
    }
    this.o.onEnd({
      durationMs: Date.now() - this.startedAt,
      exitCode: this.exitCode,
      bytesIn: this.bytesIn,
      bytesOut: this.bytesOut,
      reason,
      recording: this.o.recording?.toString(),
      ...(this.o.kind === 'portforward'
        ? { ports: [...this.ports], ...(this.portsTruncated ? { portsTruncated: true } : {}) }
        : {}),
    });
  }
}
