// The service's reading of SPDY/3 (src/terminal/spdy-frames.ts): frames found whatever the chunking,
// header blocks decoded in one zlib context across SYN_STREAMs (compressed here by zlib itself, with
// the protocol's dictionary and a sync flush per block, as client-go's framer writes them).
import fc from 'fast-check';
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import zlib from 'node:zlib';
import { randomBytes } from 'node:crypto';
import { dataFrame, DICTIONARY, SpdyFrameReader, SpdyHeaderDecoder } from '../../src/terminal/spdy-frames.js';

function headerBlock(headers: Array<[string, string]>): Buffer {
  const parts: Buffer[] = [u32(headers.length)];
  for (const [name, value] of headers)
    parts.push(u32(name.length), Buffer.from(name), u32(value.length), Buffer.from(value));
  return Buffer.concat(parts);
}

function u32(n: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(n);
  return b;
}

/** SYN_STREAM bodies for these header sets, compressed in one deflate context (async: zlib's stream API). */
async function synStreams(sets: Array<Array<[string, string]>>): Promise<Buffer[]> {
  const deflate = zlib.createDeflate({ dictionary: DICTIONARY });
  const out: Buffer[] = [];
  deflate.on('data', (c: Buffer) => out.push(c));
  const bodies: Buffer[] = [];
  for (const [i, set] of sets.entries()) {
    deflate.write(headerBlock(set));
    await new Promise<void>((resolve) => deflate.flush(zlib.constants.Z_SYNC_FLUSH, () => resolve()));
    const prefix = Buffer.alloc(10);
    prefix.writeUInt32BE(2 * i + 1, 0);
    bodies.push(Buffer.concat([prefix, ...out.splice(0)]));
  }
  deflate.close();
  return bodies;
}

describe('SPDY/3 frames as the service reads them', () => {
  test('whatever the chunking, the same frames come out, and only whole frames are released', () => {
    fc.assert(
      fc.property(
        fc.array(fc.tuple(fc.integer({ min: 1, max: 99 }), fc.uint8Array({ maxLength: 300 }), fc.boolean()), {
          minLength: 1,
          maxLength: 12,
        }),
        fc.array(fc.integer({ min: 1, max: 97 }), { minLength: 1, maxLength: 20 }),
        (frames, cuts) => {
          const bytes = Buffer.concat(frames.map(([id, data, fin]) => dataFrame(id, Buffer.from(data), fin)));
          const reader = new SpdyFrameReader();
          const seen: Array<[number, string, boolean]> = [];
          const released: Buffer[] = [];
          let at = 0;
          for (let i = 0; at < bytes.length; i++) {
            const { frames: got, whole } = reader.push(bytes.subarray(at, at + cuts[i % cuts.length]));
            at += cuts[i % cuts.length];
            released.push(whole);
            for (const f of got) seen.push([f.streamId, f.body.toString('hex'), (f.flags & 1) === 1]);
          }
          assert.deepEqual(
            seen,
            frames.map(([id, data, fin]) => [id, Buffer.from(data).toString('hex'), fin]),
          );
          assert.ok(Buffer.concat(released).equals(bytes));
        },
      ),
    );
  });

  test('a frame longer than 1 MiB is refused rather than held', () => {
    const head = Buffer.from([0, 0, 0, 1, 0, 0x20, 0, 0]); // DATA on stream 1, 2 MiB
    assert.throws(() => new SpdyFrameReader().push(head), /SPDY frame of 2097152 bytes/);
  });

  test('header blocks are read in one context across streams, as kubectl sends them', async () => {
    const sets: Array<Array<[string, string]>> = [
      [['streamtype', 'error']],
      [['streamtype', 'stdin']],
      [['streamtype', 'stdout']],
      [
        ['port', '8080'],
        ['requestid', '0'],
        ['streamtype', 'data'],
      ],
    ];
    const decoder = new SpdyHeaderDecoder();
    const bodies = await synStreams(sets);
    assert.deepEqual(
      bodies.map((body) => [...decoder.synStream(body)]),
      sets,
    );
  });

  test('a client that keeps opening streams past 64 KiB of headers is refused', async () => {
    const decoder = new SpdyHeaderDecoder();
    // Random values do not compress: 40 × 3,000 bytes of header.
    const bodies = await synStreams(
      Array.from(
        { length: 40 },
        () => [['streamtype', randomBytes(2250).toString('base64')]] as Array<[string, string]>,
      ),
    );
    assert.throws(() => bodies.forEach((body) => decoder.synStream(body)), /too many SPDY header bytes/);
  });
});
