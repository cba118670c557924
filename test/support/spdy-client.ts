// The client's side of SPDY/3 as tests write it: SYN_STREAMs whose header blocks are compressed in one
// zlib context with the protocol's dictionary and a sync flush per block, as client-go's framer writes
// them, and DATA frames. What the service reads them with is src/terminal/spdy-frames.ts.
import net from 'node:net';
import zlib from 'node:zlib';
import { DICTIONARY, SYN_STREAM } from '../../src/terminal/spdy-frames.js';

export type Headers = Array<[string, string]>;

export function u32(n: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(n >>> 0);
  return b;
}

/** A header block before compression: the count, then each name and value with its length. */
export function headerBlock(headers: Headers): Buffer {
  const parts: Buffer[] = [u32(headers.length)];
  for (const [name, value] of headers) {
    const n = Buffer.from(name);
    const v = Buffer.from(value);
    parts.push(u32(n.length), n, u32(v.length), v);
  }
  return Buffer.concat(parts);
}

/** A SYN_STREAM (SPDY/3) opening `streamId` with this compressed header block. */
export function synStreamFrame(streamId: number, compressed: Buffer): Buffer {
  const head = Buffer.alloc(18);
  head.writeUInt16BE(0x8003, 0);
  head.writeUInt16BE(SYN_STREAM, 2);
  head.writeUInt32BE(10 + compressed.length, 4);
  head.writeUInt32BE(streamId, 8);
  return Buffer.concat([head, compressed]);
}

/** One direction's header compression: each call's bytes compressed in the same context, then flushed. */
export class HeaderCompressor {
  private readonly deflate = zlib.createDeflate({ dictionary: DICTIONARY });
  private readonly out: Buffer[] = [];

  constructor() {
    this.deflate.on('data', (chunk: Buffer) => this.out.push(chunk));
  }

  /** `block`: headers, or the bytes of a header block as they are to be inflated (a malformed one too). */
  compress(block: Headers | Buffer): Promise<Buffer> {
    return new Promise((resolve) => {
      this.deflate.write(Buffer.isBuffer(block) ? block : headerBlock(block));
      this.deflate.flush(zlib.constants.Z_SYNC_FLUSH, () => resolve(Buffer.concat(this.out.splice(0))));
    });
  }

  /** SYN_STREAM frames opening streams 1, 3, 5… (from `firstId`) with these header blocks. */
  async synStreams(blocks: Array<Headers | Buffer>, firstId = 1): Promise<Buffer[]> {
    const frames: Buffer[] = [];
    for (const [i, block] of blocks.entries()) frames.push(synStreamFrame(firstId + 2 * i, await this.compress(block)));
    return frames;
  }

  close(): void {
    this.deflate.close();
  }
}

/** SYN_STREAM frames for these header blocks, compressed in a context of their own. */
export async function synStreams(blocks: Array<Headers | Buffer>): Promise<Buffer[]> {
  const compressor = new HeaderCompressor();
  try {
    return await compressor.synStreams(blocks);
  } finally {
    compressor.close();
  }
}

/** What a SPDY/3.1 upgrade got: the status line and headers, and (on a 101) the connection and what followed. */
export interface SpdyUpgrade {
  status: number;
  head: string;
  socket: net.Socket;
  /** Bytes that came after the answer's head. */
  rest: Buffer;
}

/** Asks `url` (http) for `Upgrade: SPDY/3.1` as kubectl does (a POST, the stream protocol offered). */
export function spdyUpgrade(url: URL, headers: Record<string, string>): Promise<SpdyUpgrade> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(url.port), url.hostname, () =>
      socket.write(
        [
          `POST ${url.pathname}${url.search} HTTP/1.1`,
          `Host: ${url.host}`,
          'Connection: Upgrade',
          'Upgrade: SPDY/3.1',
          'Content-Length: 0',
          ...Object.entries(headers).map(([name, value]) => `${name}: ${value}`),
          '',
          '',
        ].join('\r\n'),
      ),
    );
    let bytes = Buffer.alloc(0);
    const onData = (chunk: Buffer) => {
      bytes = Buffer.concat([bytes, chunk]);
      const end = bytes.indexOf('\r\n\r\n');
      if (end < 0) return;
      socket.removeListener('data', onData);
      socket.pause();
      const head = bytes.subarray(0, end).toString('latin1');
      resolve({
        status: Number(/^HTTP\/1\.1 (\d{3})/.exec(head)?.[1] ?? 0),
        head,
        socket,
        rest: bytes.subarray(end + 4),
      });
    };
    socket.on('data', onData);
    socket.once('error', reject);
  });
}
