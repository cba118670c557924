/**
 * The little of Kubernetes' protobuf encoding the service reads and writes itself: the envelope
 * (`k8s\0` + runtime.Unknown) and the wire format of the self reviews it answers. kubectl ≥ 1.32
 * sends built-in types as `application/vnd.kubernetes.protobuf`; everything else on the Kubernetes
 * path passes through unread, so no schema compiler or library is needed for these few messages.
 */

export const PROTOBUF = 'application/vnd.kubernetes.protobuf';
const MAGIC = Buffer.from([0x6b, 0x38, 0x73, 0x00]); // "k8s\0"
/** Nesting of messages a reader follows (the deepest a review has is 4); a body can claim no more. */
const MAX_DEPTH = 8;
/** Fields of one message read at most: a review has a handful, a rules review's lists are written, not read. */
const MAX_FIELDS = 1024;

/** A body that is not the protobuf it claims to be: a 400 naming what is wrong. */
export class ProtobufError extends Error {}

/** One field as it came: a varint as a number (those read are booleans and small), else its bytes. */
export interface Field {
  field: number;
  varint?: number;
  bytes?: Buffer;
}

function varintAt(data: Buffer, at: number): { value: number; next: number } {
  let value = 0;
  let scale = 1;
  for (let i = 0; i < 10; i++) {
    if (at + i >= data.length) throw new ProtobufError('the protobuf body ends inside a number');
    const byte = data[at + i];
    // Past 2^53 a value is no longer exact; none the service reads comes near (lengths are bounded by the body).
    value += (byte & 0x7f) * scale;
    scale *= 128;
    if ((byte & 0x80) === 0) return { value, next: at + i + 1 };
  }
  throw new ProtobufError('the protobuf body has a number longer than 10 bytes');
}

/** The fields of one message, in order; groups (wire types 3 and 4) are refused. */
export function readFields(data: Buffer): Field[] {
  const fields: Field[] = [];
  let at = 0;
  while (at < data.length) {
    if (fields.length >= MAX_FIELDS) throw new ProtobufError(`a protobuf message has more than ${MAX_FIELDS} fields`);
    const key = varintAt(data, at);
    at = key.next;
    const field = Math.floor(key.value / 8);
    const wire = key.value % 8;
    if (field === 0) throw new ProtobufError('the protobuf body has a field numbered 0');
    if (wire === 0) {
      const value = varintAt(data, at);
      fields.push({ field, varint: value.value });
      at = value.next;
    } else if (wire === 2) {
      const length = varintAt(data, at);
      at = length.next;
      if (length.value > data.length - at) throw new ProtobufError('a protobuf field is longer than the body');
      fields.push({ field, bytes: data.subarray(at, at + length.value) });
      at += length.value;
    } else if (wire === 1 || wire === 5) {
      at += wire === 1 ? 8 : 4;
      if (at > data.length) throw new ProtobufError('the protobuf body ends inside a fixed-size field');
    } else {
      throw new ProtobufError(`the protobuf body has a field of wire type ${wire}, which no review has`);
    }
  }
  return fields;
}

/**
 * A message's known fields by a schema: `string`, `strings` (repeated), `bool`, a nested schema
 * (`{ message: schema }`), or `raw` (the bytes, kept). Unknown fields are skipped, as protobuf readers do.
 */
export type Schema = Record<number, [name: string, kind: FieldKind]>;
type FieldKind = 'string' | 'strings' | 'bool' | 'raw' | { message: Schema };

export function decodeMessage(data: Buffer, schema: Schema, depth = 0): Record<string, unknown> {
  if (depth > MAX_DEPTH) throw new ProtobufError('the protobuf body nests too deeply');
  const out: Record<string, unknown> = {};
  for (const { field, varint, bytes } of readFields(data)) {
    const known = schema[field];
    if (!known) continue;
    const [name, kind] = known;
    if (kind === 'bool') {
      if (varint === undefined) throw new ProtobufError(`${name} must be a boolean`);
      out[name] = varint !== 0;
      continue;
    }
    if (bytes === undefined) throw new ProtobufError(`${name} must be a length-delimited field`);
    if (kind === 'string') out[name] = utf8(bytes, name);
    else if (kind === 'strings') ((out[name] ??= []) as string[]).push(utf8(bytes, name));
    else if (kind === 'raw') out[name] = bytes;
    else out[name] = decodeMessage(bytes, kind.message, depth + 1);
  }
  return out;
}

function utf8(bytes: Buffer, name: string): string {
  const text = bytes.toString('utf8');
  if (!Buffer.from(text, 'utf8').equals(bytes)) throw new ProtobufError(`${name} is not valid UTF-8`);
  return text;
}

function varint(value: number): Buffer {
  const bytes: number[] = [];
  let rest = value;
  while (rest >= 0x80) {
    bytes.push((rest % 128) | 0x80);
    rest = Math.floor(rest / 128);
  }
  bytes.push(rest);
  return Buffer.from(bytes);
}

type Value = string | boolean | Buffer;

/**
 * Writes a message: each entry one field (an array: the field repeated), skipped when undefined
 * (proto2 `optional` left unset).
 */
export function encodeMessage(fields: Array<[field: number, value: Value | readonly Value[] | undefined]>): Buffer {
  const parts: Buffer[] = [];
  for (const [field, value] of fields) {
    if (value === undefined) continue;
    for (const one of Array.isArray(value) ? (value as readonly Value[]) : [value as Value]) {
      if (typeof one === 'boolean') {
        parts.push(varint(field * 8), varint(one ? 1 : 0));
        continue;
      }
      const bytes = typeof one === 'string' ? Buffer.from(one, 'utf8') : one;
      parts.push(varint(field * 8 + 2), varint(bytes.length), bytes);
    }
  }
  return Buffer.concat(parts);
}

/** runtime.Unknown's fields: typeMeta (apiVersion 1, kind 2) 1, raw 2, contentEncoding 3, contentType 4. */
const UNKNOWN: Schema = {
  1: ['typeMeta', { message: { 1: ['apiVersion', 'string'], 2: ['kind', 'string'] } }],
  2: ['raw', 'raw'],
  3: ['contentEncoding', 'string'],
  4: ['contentType', 'string'],
};

/** The object a protobuf body carries: its apiVersion and kind, and its own message's bytes. */
export function unwrap(body: Buffer): { apiVersion: string; kind: string; raw: Buffer } {
  if (body.length < MAGIC.length || !body.subarray(0, MAGIC.length).equals(MAGIC)) {
    throw new ProtobufError('a protobuf body must begin with the Kubernetes envelope (k8s\\0)');
  }
  const unknown = decodeMessage(body.subarray(MAGIC.length), UNKNOWN);
  if (unknown.contentEncoding) throw new ProtobufError('a protobuf body must not carry a content encoding');
  const typeMeta = (unknown.typeMeta ?? {}) as { apiVersion?: string; kind?: string };
  return {
    apiVersion: typeMeta.apiVersion ?? '',
    kind: typeMeta.kind ?? '',
    raw: (unknown.raw as Buffer | undefined) ?? Buffer.alloc(0),
  };
}

/** An object's message in the envelope, as the apiserver writes it (empty encoding and type included). */
export function wrap(apiVersion: string, kind: string, raw: Buffer): Buffer {
  const typeMeta = encodeMessage([
    [1, apiVersion],
    [2, kind],
  ]);
  return Buffer.concat([
    MAGIC,
    encodeMessage([
      [1, typeMeta],
      [2, raw],
      [3, ''],
      [4, ''],
    ]),
  ]);
}

/**
 * Whether an answer should be protobuf: the first media type of `Accept` the service can write
 * decides (client-go's protobuf clients name protobuf first, then any type); JSON otherwise.
 */
export function prefersProtobuf(accept: string | undefined): boolean {
  for (const part of (accept ?? '').split(',').slice(0, 32)) {
    const type = part.split(';')[0].trim().toLowerCase();
    if (type === PROTOBUF) return true;
    if (type === 'application/json' || type === '*/*' || type === 'application/*') return false;
  }
  return false;
}
