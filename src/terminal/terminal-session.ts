import type { StringDecoder } from 'node:string_decoder';
import { WebSocket, type RawData } from 'ws';
import type { AccessRequest } from '../access/authorizer.js';
import type { Caller } from '../access/caller.js';
import type { ClusterConnection } from '../clusters/cluster-connection.js';
import { MAX_WEBSOCKET_MESSAGE } from '../clusters/gateway/upgrade.js';
import type { OwnedStream } from '../streams/stream-owner.js';
import type { AsciicastRecording } from './recording.js';
import {
  channelMessage,
  channelOf,
  endStatus,
  ERROR,
  exitCodeOf,
  isBase64,
  RESIZE,
  STDERR,
  STDOUT,
  textDecoders,
  type TerminalKind,
} from './terminal-protocol.js';

/** `ws`'s errors for a message past maxPayload, or with a length no message may have. */
const TOO_BIG = new Set(['WS_ERR_UNSUPPORTED_MESSAGE_LENGTH', 'WS_ERR_UNSUPPORTED_DATA_PAYLOAD_LENGTH']);
/** Bytes a side may have queued toward the other before the other is paused (backpressure). */
const HIGH_WATER = 256 * 1024;
const LOW_WATER = 64 * 1024;
/**
 * Bytes a side relays before it waits for the next turn of the event loop. A session streaming output
 * as fast as the cluster sends it would otherwise relay every message its socket has buffered in one go,
 * and every other session of the replica (someone typing) would wait behind that batch.
 */
const TURN_BYTES = 64 * 1024;

/** The reason a session ends with when the cluster closes it normally (the command ended). */
export const COMMAND_ENDED = 'the command ended';

/**
 * What a resumable session adds (resumable-sessions.ts): it sees the cluster's messages before they are
 * relayed, and decides whether a client that dropped (not a normal close) ends the session.
 */
export interface SessionKeeper {
  fromCluster(data: Buffer): void;
  /** True: the session stays open, without a client, until `attach` gives it another or the keeper ends it. */
  clientDropped(): boolean;
}

/** How a session ended, for its audit row. */
export interface SessionEnd {
  durationMs: number;
  exitCode?: number;
  bytesIn: number;
  bytesOut: number;
  reason: string;
  recording?: string;
}

export interface SessionOptions {
  kind: TerminalKind;
  caller: Caller;
  secret: string;
  cluster: ClusterConnection;
  access: AccessRequest[];
  client: WebSocket;
  upstream: WebSocket;
  /** The subprotocol agreed with the client (the cluster's may differ: `portforward.k8s.io`). */
  protocol: string;
  pingMs: number;
  idleMs: number;
  maxMs: number;
  recording?: AsciicastRecording;
  keeper?: SessionKeeper;
  onEnd(end: SessionEnd): void;
}

/** A message to the client, in the session's framing. */
export interface ClientFrame {
  data: Buffer | string;
  binary: boolean;
}

/**
 * One terminal session: two WebSockets relayed message for message (byte for byte, the channel
 * framing untouched), each side paused while the other has too much queued, and after every TURN_BYTES
 * until the next turn of the event loop. The owner (StreamOwner) re-authorizes it, ticks its clocks
 * (pings, idle and maximum time) and ends it on shutdown. It reads the channels only to count bytes, take
 * the exit code, and record output (never input).
 */
export class TerminalSession implements OwnedStream {
  readonly kind = 'exec' as const;
  /** The caller and credential of the client attached last (a resumed session is re-checked with the new one). */
  caller: Caller;
  secret: string;
  readonly cluster: ClusterConnection;
  readonly access: readonly AccessRequest[];
  private readonly startedAt = Date.now();
  private lastTraffic = Date.now();
  private lastPing = Date.now();
  private bytesIn = 0;
  private bytesOut = 0;
  private exitCode?: number;
  private ended = false;
  private readonly base64: boolean;
  private readonly decoders: Map<number, StringDecoder> = textDecoders();
  /** The client's socket; none while a resumable session waits for its client to come back. */
  private client: WebSocket | undefined;
  private readonly toClient: Relay;

  constructor(private readonly o: SessionOptions) {
    this.caller = o.caller;
    this.secret = o.secret;
    this.cluster = o.cluster;
    this.access = o.access;
    this.base64 = isBase64(o.protocol);
    this.client = o.client;
    this.toClient = this.relay(
      o.upstream,
      () => this.client,
      (data) => this.fromCluster(data),
    );
    this.wire(o.client);
    o.upstream.on('close', (code, reason) => this.closed('cluster', code, reason.toString()));
    o.upstream.on('error', (error) => this.failed('cluster', error));
    // The cluster may have gone while the client's upgrade completed.
    if (o.upstream.readyState !== WebSocket.OPEN) this.closed('cluster', 1006, 'the cluster connection failed');
  }

  /** Ends the session for a reason of the service's: a Status on the error channel, then a close frame. */
  end(code: number, reason: string, message: string): void {
    if (this.ended) return;
    const { client } = this;
    if (this.o.kind !== 'portforward' && client?.readyState === WebSocket.OPEN) {
      const frame = channelMessage(ERROR, endStatus(this.o.protocol, code, reason, message), this.base64);
      client.send(frame.data, { binary: frame.binary });
    }
    this.finish(message);
    // 1001 (going away) when the service stops, so clients reconnect; otherwise 4000 + the HTTP status.
    if (client) closeSocket(client, code === 503 ? 1001 : 4000 + code, message);
    closeSocket(this.o.upstream, 1000, 'the session has ended');
  }

  /**
   * A resumable session's new client (resumable-sessions.ts decided it may have the session): `replay`
   * (the output it missed) goes first, then the relay goes on. A client still attached (its connection
   * silently dead) is cut off.
   */
  attach(client: WebSocket, replay: ClientFrame[], caller: Caller, secret: string): void {
    this.detach();
    this.caller = caller;
    this.secret = secret;
    this.client = client;
    this.lastTraffic = Date.now();
    for (const frame of replay) this.toClient.send(frame.data, frame.binary);
    this.wire(client);
  }

  tick(now: number): void {
    const timeout = sessionTimeout(now, this.startedAt, this.lastTraffic, this.o);
    if (timeout) {
      this.end(408, 'Timeout', timeout);
    } else if (now - this.lastPing >= this.o.pingMs) {
      this.lastPing = now;
      for (const ws of [this.client, this.o.upstream]) if (ws?.readyState === WebSocket.OPEN) ws.ping();
    }
  }

  private wire(client: WebSocket): void {
    this.relay(
      client,
      () => this.o.upstream,
      (data) => this.fromClient(data),
    );
    // A socket replaced by a resumed client says nothing more about the session.
    client.on('close', (code, reason) => {
      if (client === this.client) this.closed('client', code, reason.toString());
    });
    client.on('error', (error) => {
      if (client === this.client) this.failed('client', error);
    });
  }

  /** The client is gone (or replaced): nothing more is read from it, and what was queued for it is forgotten. */
  private detach(): void {
    const old = this.client;
    this.client = undefined;
    if (!old) return;
    old.removeAllListeners('message');
    old.terminate();
    this.toClient.reset();
  }

  private relay(from: WebSocket, target: () => WebSocket | undefined, observe: (data: Buffer) => void): Relay {
    let queued = 0;
    let blocked = false; // the other side has more than HIGH_WATER queued
    let yielding = false; // waiting for the next turn of the event loop
    let sinceYield = 0;
    let generation = 0; // a new client: the old one's pending sends no longer count
    const resume = () => {
      if (!blocked && !yielding) from.resume();
    };
    const send = (data: Buffer | string, binary: boolean) => {
      const to = target();
      if (to?.readyState !== WebSocket.OPEN) return;
      const { length } = data;
      const sentIn = generation;
      queued += length;
      to.send(data, { binary }, () => {
        if (sentIn !== generation) return;
        queued -= length;
        if (blocked && queued <= LOW_WATER) {
          blocked = false;
          resume();
        }
      });
      if (!blocked && queued > HIGH_WATER) {
        blocked = true;
        from.pause();
      }
    };
    from.on('message', (raw: RawData, isBinary: boolean) => {
      const data = Buffer.isBuffer(raw) ? raw : Buffer.concat(Array.isArray(raw) ? raw : [Buffer.from(raw)]);
      this.lastTraffic = Date.now();
      observe(data);
      send(data, isBinary);
      sinceYield += data.length;
      if (sinceYield >= TURN_BYTES && !yielding) {
        sinceYield = 0;
        yielding = true;
        from.pause();
        setImmediate(() => {
          yielding = false;
          resume();
        });
      }
    });
    return {
      send,
      reset: () => {
        generation++;
        queued = 0;
        blocked = false;
        resume();
      },
    };
  }

  private fromClient(data: Buffer): void {
    this.bytesIn += Math.max(0, data.length - 1);
    const recording = this.o.recording;
    if (!recording) return;
    const message = channelOf(data, this.base64);
    if (message?.channel !== RESIZE) return;
    try {
      const size = JSON.parse(message.payload.toString('utf8')) as { Width?: unknown; Height?: unknown };
      if (Number.isInteger(size.Width) && Number.isInteger(size.Height)) {
        recording.resize(size.Width as number, size.Height as number);
      }
    } catch {
      // not a size: the cluster ignores it too
    }
  }

  private fromCluster(data: Buffer): void {
    this.bytesOut += Math.max(0, data.length - 1);
    this.o.keeper?.fromCluster(data);
    if (this.o.kind === 'portforward') return;
    const recording = this.o.recording;
    const needsChannel =
      recording !== undefined || (data.length > 1 && (this.base64 ? data[0] === 0x33 : data[0] === ERROR));
    if (!needsChannel) return;
    const message = channelOf(data, this.base64);
    if (!message) return;
    if (message.channel === ERROR) {
      const code = exitCodeOf(message.payload);
      if (code !== undefined) this.exitCode = code;
    } else if (recording && (message.channel === STDOUT || message.channel === STDERR)) {
      recording.output(this.decoders.get(message.channel)!.write(message.payload));
    }
  }

  /**
   * A socket's error: a message past MAX_WEBSOCKET_MESSAGE (`ws` has closed that side with 1009, message too
   * big, before relaying any of it), or any other failure of the connection or of the protocol.
   */
  private failed(side: 'client' | 'cluster', error: Error & { code?: string }): void {
    if (!TOO_BIG.has(error.code ?? '')) return this.closed(side, 1006, `the ${side} connection failed`);
    const bound = `${MAX_WEBSOCKET_MESSAGE / (1024 * 1024)} MiB`;
    if (side === 'cluster')
      return this.end(502, 'BadGateway', `the cluster sent a message over ${bound}; the session has ended`);
    if (this.ended) return;
    this.client = undefined;
    this.finish(`the client sent a message over ${bound}: closed with 1009 (message too big)`);
    closeSocket(this.o.upstream, 1000, 'the session has ended');
  }

  private closed(side: 'client' | 'cluster', code: number, reason: string): void {
    if (this.ended) return;
    const normal = code === 1000 || code === 1005;
    if (side === 'cluster') {
      // The command ended (a normal close), or the cluster broke the connection.
      this.finish(normal ? COMMAND_ENDED : `the cluster closed the session (${code} ${reason})`.trim());
      const { client } = this;
      if (client) closeSocket(client, normal ? 1000 : 1011, normal ? reason : 'the cluster broke the connection');
    } else if (!normal && this.o.keeper?.clientDropped()) {
      // A resumable session outlives a dropped connection (not a close the client meant).
      this.detach();
    } else {
      this.client = undefined;
      this.finish('the client closed the session');
      closeSocket(this.o.upstream, 1000, 'the client closed the session');
    }
  }

  private finish(reason: string): void {
    if (this.ended) return;
    this.ended = true;
    this.o.onEnd({
      durationMs: Date.now() - this.startedAt,
      exitCode: this.exitCode,
      bytesIn: this.bytesIn,
      bytesOut: this.bytesOut,
      reason,
      recording: this.o.recording?.toString(),
    });
  }
}

interface Relay {
  /** Sends to the other side, counted toward its backpressure. */
  send(data: Buffer | string, binary: boolean): void;
  /** The other side is a new socket: nothing is queued toward it. */
  reset(): void;
}

/** Why a session's clock ends it now (its maximum duration, or no traffic for the idle limit), if it does. */
export function sessionTimeout(
  now: number,
  startedAt: number,
  lastTraffic: number,
  limits: { maxMs: number; idleMs: number },
): string | undefined {
  if (now - startedAt >= limits.maxMs) {
    return `the session reached its maximum duration (${limits.maxMs / 1000} s) and has ended`;
  }
  if (now - lastTraffic >= limits.idleMs) return `no traffic for ${limits.idleMs / 1000} s: the idle session has ended`;
  return undefined;
}

/** A close frame when the socket is open (a reason is at most 123 bytes), else nothing more to do. */
function closeSocket(ws: WebSocket, code: number, reason: string): void {
  if (ws.readyState === WebSocket.OPEN) {
    let text = reason;
    while (Buffer.byteLength(text) > 123) text = text.slice(0, -1);
    ws.close(code, text);
    // A peer that never answers the close frame is cut off.
    setTimeout(() => ws.terminate(), 5000).unref();
  } else if (ws.readyState === WebSocket.CONNECTING) {
    ws.terminate();
  }
}
