// WebSocket frames as a raw client writes them (RFC 6455 §5.2), honest or not, and the close codes among
// what a server sent: for tests that speak the protocol below any WebSocket library.

export const CONTINUATION = 0x0;
export const TEXT = 0x1;
export const BINARY = 0x2;
export const CLOSE = 0x8;
export const PING = 0x9;
export const PONG = 0xa;

export interface Frame {
  fin: boolean;
  rsv: number;
  opcode: number;
  masked: boolean;
  payload: Buffer;
  /** A length to announce instead of the payload's: only the header is sent. */
  announced?: bigint;
}

export const frame = (opcode: number, payload: Buffer, more: Partial<Frame> = {}): Frame => ({
  fin: true,
  rsv: 0,
  opcode,
  masked: true,
  payload,
  ...more,
});

/** A client frame (RFC 6455 §5.2), masked with a fixed key unless it is not to be. */
export function encode(f: Frame): Buffer {
  const length = f.announced ?? BigInt(f.payload.length);
  const head = [(f.fin ? 0x80 : 0) | (f.rsv << 4) | f.opcode];
  const mask = f.masked ? 0x80 : 0;
  let extended = Buffer.alloc(0);
  if (length < 126n) head.push(mask | Number(length));
  else if (length < 65536n) {
    head.push(mask | 126);
    extended = Buffer.alloc(2);
    extended.writeUInt16BE(Number(length));
  } else {
    head.push(mask | 127);
    extended = Buffer.alloc(8);
    extended.writeBigUInt64BE(length);
  }
  const key = Buffer.from([0x37, 0xfa, 0x21, 0x3d]);
  const body = f.announced === undefined ? Buffer.from(f.payload) : Buffer.alloc(0);
  if (f.masked) for (let i = 0; i < body.length; i++) body[i] ^= key[i % 4];
  return Buffer.concat([Buffer.from(head), extended, f.masked ? key : Buffer.alloc(0), body]);
}

/** A close frame's payload: the code, then the reason. */
export const closePayload = (code: number, reason = '') => {
  const b = Buffer.alloc(2);
  b.writeUInt16BE(code);
  return Buffer.concat([b, Buffer.from(reason)]);
};
/** The close frames among what the service sent (unmasked frames), as codes. */
export function closeCodes(bytes: Buffer): number[] {
  const codes: number[] = [];
  let at = 0;
  while (bytes.length - at >= 2) {
    const opcode = bytes[at] & 0x0f;
    let length = bytes[at + 1] & 0x7f;
    let head = 2;
    if (length === 126) {
      if (bytes.length - at < 4) break;
      length = bytes.readUInt16BE(at + 2);
      head = 4;
    } else if (length === 127) {
      if (bytes.length - at < 10) break;
      length = Number(bytes.readBigUInt64BE(at + 2));
      head = 10;
    }
    if (bytes.length - at < head + length) break;
    if (opcode === CLOSE) codes.push(length >= 2 ? bytes.readUInt16BE(at + head) : 1005);
    at += head + length;
  }
  return codes;
}
