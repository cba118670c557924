import zlib from 'node:zlib';

/**
 * What the service reads of SPDY/3 (the framing kubectl ≤ 1.29 speaks after `Upgrade: SPDY/3.1`;
 * client-go's httpstream/spdy over moby/spdystream): frame boundaries, the `streamType` of each
 * stream the client opens (its SYN_STREAM header block, zlib-compressed with SPDY/3's dictionary
 * in one context per direction), DATA payloads, and one frame it writes itself: DATA on the error
 * stream (a Status when the service ends a session). Nothing else is interpreted; frames pass whole.
 */

/** SPDY/3's zlib dictionary for header blocks (the draft's §2.6.10.1). */
export const DICTIONARY = Buffer.from(
  'AAAAB29wdGlvbnMAAAAEaGVhZAAAAARwb3N0AAAAA3B1dAAAAAZkZWxldGUAAAAFdHJhY2UAAAAGYWNjZXB0AAAADmFjY2VwdC1j' +
    'aGFyc2V0AAAAD2FjY2VwdC1lbmNvZGluZwAAAA9hY2NlcHQtbGFuZ3VhZ2UAAAANYWNjZXB0LXJhbmdlcwAAAANhZ2UAAAAFYWxs' +
    'b3cAAAANYXV0aG9yaXphdGlvbgAAAA1jYWNoZS1jb250cm9sAAAACmNvbm5lY3Rpb24AAAAMY29udGVudC1iYXNlAAAAEGNvbnRl' +
    'bnQtZW5jb2RpbmcAAAAQY29udGVudC1sYW5ndWFnZQAAAA5jb250ZW50LWxlbmd0aAAAABBjb250ZW50LWxvY2F0aW9uAAAAC2Nv' +
    'bnRlbnQtbWQ1AAAADWNvbnRlbnQtcmFuZ2UAAAAMY29udGVudC10eXBlAAAABGRhdGUAAAAEZXRhZwAAAAZleHBlY3QAAAAHZXhw' +
    'aXJlcwAAAARmcm9tAAAABGhvc3QAAAAIaWYtbWF0Y2gAAAARaWYtbW9kaWZpZWQtc2luY2UAAAANaWYtbm9uZS1tYXRjaAAAAAhp' +
    'Zi1yYW5nZQAAABNpZi11bm1vZGlmaWVkLXNpbmNlAAAADWxhc3QtbW9kaWZpZWQAAAAIbG9jYXRpb24AAAAMbWF4LWZvcndhcmRz' +
    'AAAABnByYWdtYQAAABJwcm94eS1hdXRoZW50aWNhdGUAAAATcHJveHktYXV0aG9yaXphdGlvbgAAAAVyYW5nZQAAAAdyZWZlcmVy' +
    'AAAAC3JldHJ5LWFmdGVyAAAABnNlcnZlcgAAAAJ0ZQAAAAd0cmFpbGVyAAAAEXRyYW5zZmVyLWVuY29kaW5nAAAAB3VwZ3JhZGUA' +
    'AAAKdXNlci1hZ2VudAAAAAR2YXJ5AAAAA3ZpYQAAAAd3YXJuaW5nAAAAEHd3dy1hdXRoZW50aWNhdGUAAAAGbWV0aG9kAAAAA2dl' +
    'dAAAAAZzdGF0dXMAAAAGMjAwIE9LAAAAB3ZlcnNpb24AAAAISFRUUC8xLjEAAAADdXJsAAAABnB1YmxpYwAAAApzZXQtY29va2ll' +
    'AAAACmtlZXAtYWxpdmUAAAAGb3JpZ2luMTAwMTAxMjAxMjAyMjA1MjA2MzAwMzAyMzAzMzA0MzA1MzA2MzA3NDAyNDA1NDA2NDA3' +
    'NDA4NDA5NDEwNDExNDEyNDEzNDE0NDE1NDE2NDE3NTAyNTA0NTA1MjAzIE5vbi1BdXRob3JpdGF0aXZlIEluZm9ybWF0aW9uMjA0' +
    'IE5vIENvbnRlbnQzMDEgTW92ZWQgUGVybWFuZW50bHk0MDAgQmFkIFJlcXVlc3Q0MDEgVW5hdXRob3JpemVkNDAzIEZvcmJpZGRl' +
    'bjQwNCBOb3QgRm91bmQ1MDAgSW50ZXJuYWwgU2VydmVyIEVycm9yNTAxIE5vdCBJbXBsZW1lbnRlZDUwMyBTZXJ2aWNlIFVuYXZh' +
    'aWxhYmxlSmFuIEZlYiBNYXIgQXByIE1heSBKdW4gSnVsIEF1ZyBTZXB0IE9jdCBOb3YgRGVjIDAwOjAwOjAwIE1vbiwgVHVlLCBX' +
    'ZWQsIFRodSwgRnJpLCBTYXQsIFN1biwgR01UY2h1bmtlZCx0ZXh0L2h0bWwsaW1hZ2UvcG5nLGltYWdlL2pwZyxpbWFnZS9naWYs' +
    'YXBwbGljYXRpb24veG1sLGFwcGxpY2F0aW9uL3hodG1sK3htbCx0ZXh0L3BsYWluLHRleHQvamF2YXNjcmlwdCxwdWJsaWNwcml2' +
    'YXRlbWF4LWFnZT1nemlwLGRlZmxhdGUsc2RjaGNoYXJzZXQ9dXRmLThjaGFyc2V0PWlzby04ODU5LTEsdXRmLSwqLGVucT0wLg==',
  'base64',
);

export const SYN_STREAM = 1;
export const FLAG_FIN = 0x01;
/** The largest frame read (SPDY allows 16 MiB; client-go and the kubelet write at most 32 KiB of data per frame). */
const MAX_FRAME = 1024 * 1024;
const EMPTY = Buffer.alloc(0);
const KIB = 1024;

/** SPDY the service will not read: a frame or header block past a bound, or malformed. */
export class SpdyError extends Error {}

/**
 * What one direction's header blocks may cost (a session past one of them is not read further). client-go
 * writes a few dozen bytes per block (`streamType`, and `port` and `requestID` for a port-forward).
 */
export interface HeaderLimits {
  /** Inflated bytes of one header block. */
  blockBytes: number;
  /** Inflated bytes of all of them. */
  sessionBytes: number;
  /** Compressed bytes of all of them. */
  compressedBytes: number;
  /** SYN_STREAMs. */
  streams: number;
}

export const HEADER_LIMITS: Readonly<HeaderLimits> = {
  blockBytes: 16 * KIB,
  sessionBytes: 256 * KIB,
  compressedBytes: 64 * KIB,
  streams: 1024,
};

export interface SpdyFrame {
  /** The whole frame, header included, as it came. */
  bytes: Buffer;
  control: boolean;
  /** Control frames: the type; DATA: 0. */
  type: number;
  flags: number;
  /** DATA and stream control frames: the stream. */
  streamId: number;
  /** Past the 8-byte header. */
  body: Buffer;
}

/**
 * Splits a byte stream into whole frames. The bytes of an unfinished frame wait for the rest, joined
 * only once it is complete. A frame over MAX_FRAME is refused (throws): client-go and the kubelet
 * write at most 32 KiB per DATA frame, and this bounds what a session holds.
 */
export class SpdyFrameReader {
  private chunks: Buffer[] = [];
  private size = 0;
  /** Bytes needed before anything can be parsed: a frame header, then the whole frame. */
  private need = 8;

  /** The frames completed by `chunk`, in order, and their bytes as one buffer (empty: none completed). */
  push(chunk: Buffer): { frames: SpdyFrame[]; whole: Buffer } {
    this.chunks.push(chunk);
    this.size += chunk.length;
    if (this.size < this.need) return { frames: [], whole: EMPTY };
    const pending = this.chunks.length === 1 ? this.chunks[0] : Buffer.concat(this.chunks);
    const frames: SpdyFrame[] = [];
    let at = 0;
    this.need = 8;
    while (pending.length - at >= 8) {
      const length = pending.readUIntBE(at + 5, 3);
      if (length > MAX_FRAME) throw new SpdyError(`a SPDY frame of ${length} bytes (at most ${MAX_FRAME / KIB} KiB)`);
      if (pending.length - at < 8 + length) {
        this.need = 8 + length;
        break;
      }
      const bytes = pending.subarray(at, at + 8 + length);
      const control = (bytes[0] & 0x80) !== 0;
      const type = control ? bytes.readUInt16BE(2) : 0;
      // Control frames that name a stream carry it first; SETTINGS (4), PING (6) and GOAWAY (7) do not.
      const streamId = !control
        ? bytes.readUInt32BE(0) & 0x7fffffff
        : length >= 4 && type !== 4 && type !== 6 && type !== 7
          ? bytes.readUInt32BE(8) & 0x7fffffff
          : 0;
      frames.push({ bytes, control, type, flags: bytes[4], streamId, body: bytes.subarray(8) });
      at += 8 + length;
    }
    const rest = pending.subarray(at);
    this.chunks = rest.length > 0 ? [rest] : [];
    this.size = rest.length;
    return { frames, whole: pending.subarray(0, at) };
  }
}

interface PendingBlock {
  inflated: Buffer[];
  size: number;
  resolve(headers: Map<string, string>): void;
  reject(error: SpdyError): void;
}

/**
 * The header blocks of one direction, inflated in its one zlib stream as they come: each block costs
 * what it inflates to, never the history again. zlib runs off the event loop and its output is taken
 * (and counted) as it comes, so a block past a bound stops the inflation within a chunk of it. Past any
 * bound, or on anything malformed, that block, any given before it and not read yet, and every later one are
 * refused with a SpdyError naming it (the relay gives one block at a time).
 */
export class SpdyHeaderDecoder {
  private readonly inflate = zlib.createInflate({ dictionary: DICTIONARY, chunkSize: 16 * KIB });
  /** Blocks written to the inflater, oldest first; each is complete once the inflater has taken it whole. */
  private readonly pending: PendingBlock[] = [];
  private streams = 0;
  private compressed = 0;
  private inflated = 0;
  private failure?: SpdyError;

  constructor(private readonly limits: Readonly<HeaderLimits> = HEADER_LIMITS) {
    this.inflate.on('readable', () => this.take());
    this.inflate.on('error', (error) => this.fail(`SPDY header blocks zlib cannot inflate (${error.message})`));
  }

  /** The headers of a SYN_STREAM's body (names lowercase), in the order the blocks were given. */
  synStream(body: Buffer): Promise<Map<string, string>> {
    return new Promise((resolve, reject) => {
      const { compressedBytes, streams } = this.limits;
      if (this.failure) return reject(this.failure);
      const block = body.subarray(10);
      this.compressed += block.length;
      if (block.length === 0) this.fail('a SYN_STREAM without a header block');
      else if (++this.streams > streams) this.fail(`more than ${streams} SPDY streams opened in one session`);
      else if (this.compressed > compressedBytes) {
        this.fail(`SPDY header blocks past ${compressedBytes / KIB} KiB compressed in one session`);
      }
      if (this.failure) return reject(this.failure);
      this.pending.push({ inflated: [], size: 0, resolve, reject });
      // Called once the inflater has taken the whole block, after all it inflated to.
      this.inflate.write(block, () => {
        this.take();
        const done = this.pending[0];
        if (this.failure || !done) return;
        let headers: Map<string, string>;
        try {
          headers = headerBlock(Buffer.concat(done.inflated, done.size));
        } catch (error) {
          return this.fail((error as Error).message);
        }
        this.pending.shift();
        done.resolve(headers);
      });
    });
  }

  /** Frees the inflater (the session has ended); later blocks are refused. */
  close(): void {
    this.fail('the session has ended');
  }

  /** Takes what the inflater has produced, counted against the bounds. */
  private take(): void {
    const { blockBytes, sessionBytes } = this.limits;
    while (!this.failure) {
      const chunk = this.inflate.read() as Buffer | null;
      if (chunk === null) return;
      const block = this.pending[0];
      this.inflated += chunk.length;
      if (!block) return this.fail('SPDY header bytes outside a header block');
      block.size += chunk.length;
      if (block.size > blockBytes) return this.fail(`a SPDY header block inflates past ${blockBytes / KIB} KiB`);
      if (this.inflated > sessionBytes) {
        return this.fail(`SPDY header blocks inflate past ${sessionBytes / KIB} KiB in one session`);
      }
      block.inflated.push(chunk);
    }
  }

  private fail(message: string): void {
    if (this.failure) return;
    this.failure = new SpdyError(message);
    this.inflate.destroy();
    for (const block of this.pending.splice(0)) block.reject(this.failure);
  }
}

/** A header block (SPDY/3 §2.6.10): a count, then each name and value with its length; nothing else. */
function headerBlock(block: Buffer): Map<string, string> {
  const malformed = () => new SpdyError('a malformed SPDY header block');
  let at = 0;
  const field = (): string => {
    if (block.length - at < 4) throw malformed();
    const length = block.readUInt32BE(at);
    if (length > block.length - at - 4) throw malformed();
    at += 4 + length;
    return block.toString('utf8', at - length, at);
  };
  if (block.length < 4) throw malformed();
  const count = block.readUInt32BE(0);
  at = 4;
  // Each pair takes at least 8 bytes: a count past that cannot be honest.
  if (count > (block.length - 4) / 8) throw malformed();
  const headers = new Map<string, string>();
  for (let i = 0; i < count; i++) {
    const name = field();
    headers.set(name.toLowerCase(), field());
  }
  if (at !== block.length) throw malformed();
  return headers;
}

/** A DATA frame on a stream (FIN: the last). */
export function dataFrame(streamId: number, payload: Buffer, fin: boolean): Buffer {
  const head = Buffer.alloc(8);
  head.writeUInt32BE(streamId & 0x7fffffff, 0);
  head.writeUInt32BE(payload.length, 4);
  head[4] = fin ? FLAG_FIN : 0;
  return Buffer.concat([head, payload]);
}
