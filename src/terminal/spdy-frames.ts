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
/** Compressed header bytes decoded per session; a client opening streams past it is cut off. */
const MAX_HEADER_HISTORY = 64 * 1024;

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
      if (length > MAX_FRAME) throw new Error(`a SPDY frame of ${length} bytes`);
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

/** The header blocks of one direction, decoded in their shared zlib context. */
export class SpdyHeaderDecoder {
  private history: Buffer = Buffer.alloc(0);
  private inflated = 0;

  /**
   * The headers of a SYN_STREAM's body (names lowercase). The context spans blocks, so the history is
   * inflated again each time: exec opens at most five streams; past MAX_HEADER_HISTORY this throws.
   */
  synStream(body: Buffer): Map<string, string> {
    this.history = Buffer.concat([this.history, body.subarray(10)]);
    if (this.history.length > MAX_HEADER_HISTORY) throw new Error('too many SPDY header bytes');
    const all = zlib.inflateSync(this.history, {
      dictionary: DICTIONARY,
      finishFlush: zlib.constants.Z_SYNC_FLUSH,
    });
    const block = all.subarray(this.inflated);
    this.inflated = all.length;
    const headers = new Map<string, string>();
    let at = 4;
    for (let i = 0, n = block.readUInt32BE(0); i < n; i++) {
      const nameLength = block.readUInt32BE(at);
      const name = block.toString('utf8', at + 4, at + 4 + nameLength);
      at += 4 + nameLength;
      const valueLength = block.readUInt32BE(at);
      headers.set(name.toLowerCase(), block.toString('utf8', at + 4, at + 4 + valueLength));
      at += 4 + valueLength;
    }
    return headers;
  }
}

/** A DATA frame on a stream (FIN: the last). */
export function dataFrame(streamId: number, payload: Buffer, fin: boolean): Buffer {
  const head = Buffer.alloc(8);
  head.writeUInt32BE(streamId & 0x7fffffff, 0);
  head.writeUInt32BE(payload.length, 4);
  head[4] = fin ? FLAG_FIN : 0;
  return Buffer.concat([head, payload]);
}
