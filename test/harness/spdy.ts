// SPDY/3 framing (https://www.chromium.org/spdy/spdy-protocol/spdy-protocol-draft3-1/), the server side
// of what kubectl 1.20 speaks after an `Upgrade: SPDY/3.1` (client-go's httpstream/spdy over
// moby/spdystream, which frames version 3 and does no flow control). Only what a kubelet's streaming
// server needs: streams opened by the client (SYN_STREAM → SYN_REPLY), data both ways with FIN,
// RST_STREAM, PING answered, GOAWAY; SETTINGS, HEADERS and WINDOW_UPDATE are read and ignored, as
// spdystream ignores them. Why by hand: the one npm SPDY library (spdy-transport, last released 2018)
// enforces SPDY/3.1 send windows that spdystream never opens, so a stream would stall after 64 KiB.
import type { Duplex } from 'node:stream';
import zlib from 'node:zlib';
// The framing the service reads with (frames, header blocks, DATA), shared rather than copied: what differs
// here is the server's side — replies, stream state, PINGs.
import {
  dataFrame,
  DICTIONARY,
  FLAG_FIN,
  type SpdyFrame,
  SpdyFrameReader,
  SpdyHeaderDecoder,
  SYN_STREAM,
} from '../../src/terminal/spdy-frames.js';

const VERSION = 3;
const SYN_REPLY = 2;
const RST_STREAM = 3;
const PING = 6;
const GOAWAY = 7;
/** RST_STREAM status: CANCEL. */
export const CANCEL = 5;

/** One stream the client opened, with its headers (names lowercase, as SPDY/3 requires). */
export interface SpdyStream {
  id: number;
  headers: Map<string, string>;
  /** The client half-closed it (FIN): no more data will come. */
  remoteEnded: boolean;
  onData(handler: (data: Buffer) => void): void;
  onEnd(handler: () => void): void;
  onReset(handler: () => void): void;
}

interface StreamState extends SpdyStream {
  dataHandlers: Array<(data: Buffer) => void>;
  early: Buffer[];
  endHandlers: Array<() => void>;
  resetHandlers: Array<() => void>;
  localEnded: boolean;
}

/**
 * A SPDY/3 server connection over an upgraded socket. `onStream` sees each SYN_STREAM (after its
 * reply is queued); writes are queued in order so a reply always precedes the stream's data.
 */
export class SpdyServerConnection {
  private readonly reader = new SpdyFrameReader();
  private readonly streams = new Map<number, StreamState>();
  /** Header blocks received: SPDY/3 keeps one zlib context per direction. */
  private readonly headersIn = new SpdyHeaderDecoder();
  private readonly deflate = zlib.createDeflate({ dictionary: DICTIONARY });
  private deflated: Buffer[] = [];
  private writes: Promise<void> = Promise.resolve();
  /** The frames received, handled in order. */
  private received: Promise<void> = Promise.resolve();
  private closed = false;
  private readonly closeHandlers: Array<() => void> = [];

  constructor(
    readonly socket: Duplex,
    private readonly onStream: (stream: SpdyStream) => void,
    /** Bytes that came with the upgrade, before the socket was handed over. */
    head: Buffer = Buffer.alloc(0),
  ) {
    this.deflate.on('data', (chunk: Buffer) => this.deflated.push(chunk));
    socket.on('data', (chunk: Buffer) => this.receive(chunk));
    if (head.length > 0) queueMicrotask(() => this.receive(head));
    socket.on('close', () => this.shutdown());
    socket.on('error', () => socket.destroy());
  }

  get open(): boolean {
    return !this.closed;
  }

  onClose(handler: () => void): void {
    if (this.closed) handler();
    else this.closeHandlers.push(handler);
  }

  /** DATA on a stream (split at 64 KiB); resolves once the socket has taken it. */
  send(id: number, data: Buffer, fin = false): Promise<void> {
    const stream = this.streams.get(id);
    if (!stream || stream.localEnded) return Promise.resolve();
    if (fin) stream.localEnded = true;
    const frames: Buffer[] = [];
    for (let at = 0; at < data.length || (frames.length === 0 && fin); at += 64 * 1024) {
      const part = data.subarray(at, at + 64 * 1024);
      const last = at + 64 * 1024 >= data.length;
      frames.push(dataFrame(id, part, fin && last));
      if (last) break;
    }
    if (frames.length === 0) return Promise.resolve();
    return this.write(() => Promise.resolve(Buffer.concat(frames)));
  }

  /** Half-closes a stream from this side (an empty DATA frame with FIN). */
  end(id: number): Promise<void> {
    return this.send(id, Buffer.alloc(0), true);
  }

  reset(id: number, status = CANCEL): Promise<void> {
    const body = Buffer.alloc(8);
    body.writeUInt32BE(id & 0x7fffffff, 0);
    body.writeUInt32BE(status, 4);
    return this.write(() => Promise.resolve(controlFrame(RST_STREAM, 0, body)));
  }

  /** Ends every stream this side still has open, then the connection. */
  async close(): Promise<void> {
    for (const stream of this.streams.values()) if (!stream.localEnded) void this.end(stream.id);
    await this.writes;
    this.socket.end();
  }

  private write(frame: () => Promise<Buffer>): Promise<void> {
    const next = this.writes.then(async () => {
      const bytes = await frame();
      if (this.closed || this.socket.destroyed) return;
      await new Promise<void>((resolve) => this.socket.write(bytes, () => resolve()));
    });
    this.writes = next.catch(() => undefined);
    return this.writes;
  }

  /** A header block compressed in this direction's one zlib context (flushed, as spdystream does). */
  private compress(headers: Array<[string, string]>): Promise<Buffer> {
    const parts: Buffer[] = [u32(headers.length)];
    for (const [name, value] of headers) {
      const n = Buffer.from(name.toLowerCase());
      const v = Buffer.from(value);
      parts.push(u32(n.length), n, u32(v.length), v);
    }
    return new Promise((resolve) => {
      this.deflate.write(Buffer.concat(parts));
      this.deflate.flush(zlib.constants.Z_SYNC_FLUSH, () => resolve(Buffer.concat(this.deflated.splice(0))));
    });
  }

  private receive(chunk: Buffer): void {
    // A frame this server cannot read (over the reader's bound, a header block past the decoder's): the
    // connection is broken, as spdystream would treat it.
    const broken = () => void this.socket.destroy();
    let frames: SpdyFrame[];
    try {
      frames = this.reader.push(chunk).frames;
    } catch {
      return broken();
    }
    // One after another: a SYN_STREAM's header block is inflated off the event loop, and the frames after
    // it (its data) need the stream it opens.
    for (const frame of frames) this.received = this.received.then(() => this.frame(frame)).catch(broken);
  }

  private async frame({ bytes, control, type, flags, streamId, body }: SpdyFrame): Promise<void> {
    if (!control) {
      const stream = this.streams.get(streamId);
      if (!stream) return;
      if (body.length > 0) {
        if (stream.dataHandlers.length === 0) stream.early.push(Buffer.from(body));
        for (const handler of stream.dataHandlers) handler(Buffer.from(body));
      }
      if (flags & FLAG_FIN) {
        stream.remoteEnded = true;
        for (const handler of stream.endHandlers) handler();
      }
      return;
    }
    const version = bytes.readUInt16BE(0) & 0x7fff;
    if (version !== VERSION) throw new Error(`SPDY version ${version}`);
    switch (type) {
      case SYN_STREAM: {
        const id = streamId;
        const stream = this.stream(id, await this.headersIn.synStream(body), (flags & FLAG_FIN) !== 0);
        // The reply first: client-go waits for it before it writes anything on the stream.
        void this.write(async () => {
          const block = await this.compress([]);
          return controlFrame(SYN_REPLY, 0, Buffer.concat([u32(id), block]));
        });
        this.onStream(stream);
        return;
      }
      case RST_STREAM: {
        const stream = this.streams.get(streamId);
        if (!stream) return;
        stream.localEnded = stream.remoteEnded = true;
        for (const handler of stream.resetHandlers) handler();
        return;
      }
      case PING:
        void this.write(() => Promise.resolve(controlFrame(PING, 0, Buffer.from(body))));
        return;
      case GOAWAY:
        this.socket.end();
        return;
      default:
      // SETTINGS, HEADERS, WINDOW_UPDATE: nothing this server acts on (spdystream ignores them too).
    }
  }

  private stream(id: number, headers: Map<string, string>, fin: boolean): StreamState {
    const state: StreamState = {
      id,
      headers,
      remoteEnded: fin,
      localEnded: false,
      dataHandlers: [],
      early: [],
      endHandlers: [],
      resetHandlers: [],
      onData(handler) {
        state.dataHandlers.push(handler);
        for (const data of state.early.splice(0)) handler(data);
      },
      onEnd(handler) {
        if (state.remoteEnded) handler();
        else state.endHandlers.push(handler);
      },
      onReset(handler) {
        state.resetHandlers.push(handler);
      },
    };
    this.streams.set(id, state);
    return state;
  }

  private shutdown(): void {
    if (this.closed) return;
    this.closed = true;
    this.deflate.close();
    this.headersIn.close();
    for (const handler of this.closeHandlers.splice(0)) handler();
  }
}

function u32(n: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(n >>> 0);
  return b;
}

function controlFrame(type: number, flags: number, body: Buffer): Buffer {
  const head = Buffer.alloc(8);
  head.writeUInt16BE(0x8000 | VERSION, 0);
  head.writeUInt16BE(type, 2);
  head.writeUInt32BE(body.length, 4);
  head[4] = flags;
  return Buffer.concat([head, body]);
}
