// The service's reading of SPDY/3 (src/terminal/spdy-frames.ts): frames found whatever the chunking,
// header blocks decoded in one zlib context across SYN_STREAMs (compressed here by zlib itself, with
// the protocol's dictionary and a sync flush per block, as client-go's framer writes them), each block
// inflated once and within the bounds; and, seeded and deterministic, what hostile bytes do to both.
import fc from 'fast-check';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { describe, test } from 'node:test';
import {
  dataFrame,
  HEADER_LIMITS,
  SpdyError,
  SpdyFrameReader,
  SpdyHeaderDecoder,
} from '../../src/terminal/spdy-frames.js';
import { HeaderCompressor, headerBlock, type Headers, u32 } from '../support/spdy-client.js';

const SEED = Number(process.env.FUZZ_SEED ?? 20261122);
const KIB = 1024;
const MIB = 1024 * KIB;

/** Each SYN_STREAM's outcome, read one after another as the relay does: its headers, or the decoder's error. */
async function decodeAll(decoder: SpdyHeaderDecoder, frames: Buffer[]): Promise<Array<Headers | string>> {
  const outcomes: Array<Headers | string> = [];
  for (const frame of frames) {
    outcomes.push(
      await decoder.synStream(frame.subarray(8)).then(
        (headers): Headers | string => [...headers],
        (error: unknown) => {
          assert.ok(error instanceof SpdyError, `not the decoder's own error: ${String(error)}`);
          return error.message;
        },
      ),
    );
  }
  return outcomes;
}

const lowercase = (headers: Headers): Headers => {
  const map = new Map<string, string>();
  for (const [name, value] of headers) map.set(name.toLowerCase(), value);
  return [...map];
};

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
      { seed: SEED },
    );
  });

  test('a frame longer than 1 MiB is refused rather than held', () => {
    const head = Buffer.from([0, 0, 0, 1, 0, 0x20, 0, 0]); // DATA on stream 1, 2 MiB
    assert.throws(
      () => new SpdyFrameReader().push(head),
      (e) => e instanceof SpdyError && /2097152 bytes/.test(e.message),
    );
  });

  test('fuzz: arbitrary bytes in arbitrary chunks: whole frames or SpdyError, never more than a frame held', () => {
    // Frame headers with lengths around the bound, control bits and types at random, bodies short or
    // missing, then cut anywhere.
    const frame = fc
      .tuple(
        fc.boolean(),
        fc.integer({ min: 0, max: 0xffff }),
        fc.integer({ min: 0, max: 255 }),
        fc.oneof(fc.integer({ min: 0, max: 400 }), fc.constantFrom(MIB, MIB + 1, 0xffffff)),
        fc.uint8Array({ maxLength: 400 }),
      )
      .map(([control, type, flags, length, body]) => {
        const head = Buffer.alloc(8);
        head.writeUInt16BE((control ? 0x8000 : 0) | 3, 0);
        head.writeUInt16BE(type, 2);
        head.writeUInt32BE(length, 4);
        head[4] = flags;
        return Buffer.concat([head, Buffer.from(body)]);
      });
    fc.assert(
      fc.property(
        fc.array(
          fc.oneof(
            frame,
            fc.uint8Array({ maxLength: 64 }).map((b) => Buffer.from(b)),
          ),
          { maxLength: 30 },
        ),
        fc.array(fc.integer({ min: 1, max: 600 }), { minLength: 1, maxLength: 10 }),
        (parts, cuts) => {
          const bytes = Buffer.concat(parts);
          const reader = new SpdyFrameReader();
          let released = 0;
          let at = 0;
          for (let i = 0; at < bytes.length; i++) {
            const chunk = bytes.subarray(at, at + cuts[i % cuts.length]);
            at += chunk.length;
            let read: ReturnType<SpdyFrameReader['push']>;
            try {
              read = reader.push(chunk);
            } catch (error) {
              assert.ok(error instanceof SpdyError, `not the reader's own error: ${String(error)}`);
              return;
            }
            assert.equal(
              read.frames.reduce((n, f) => n + f.bytes.length, 0),
              read.whole.length,
            );
            for (const f of read.frames) assert.equal(f.body.length, f.bytes.readUIntBE(5, 3));
            released += read.whole.length;
            assert.ok(at - released < 8 + MIB, `${at - released} bytes held`);
          }
        },
      ),
      { seed: SEED, numRuns: 300 },
    );
  });
});

describe('SPDY/3 header blocks as the service reads them', () => {
  test('read in one context across streams, as kubectl sends them', async () => {
    const sets: Headers[] = [
      [['streamtype', 'error']],
      [['streamtype', 'stdin']],
      [['streamtype', 'stdout']],
      [
        ['port', '8080'],
        ['requestid', '0'],
        ['streamtype', 'data'],
      ],
    ];
    const compressor = new HeaderCompressor();
    const frames = await compressor.synStreams(sets);
    compressor.close();
    const decoder = new SpdyHeaderDecoder();
    assert.deepEqual(await decodeAll(decoder, frames), sets);
    decoder.close();
  });

  test('a 16 MiB header block stops inflating past 16 KiB; the tiny ones after it are refused, nothing inflated', async () => {
    const compressor = new HeaderCompressor();
    const [error, bomb, ...tiny] = await compressor.synStreams([
      [['streamtype', 'error']],
      [
        ['streamtype', 'stdin'],
        ['x', 'a'.repeat(16 * MIB)],
      ],
      ...Array.from({ length: 400 }, (_, i): Headers => [['streamtype', `s${i}`]]),
    ]);
    compressor.close();
    assert.ok(bomb.length < 64 * KIB, `the block is ${bomb.length} bytes compressed, within the compressed bound`);
    const decoder = new SpdyHeaderDecoder();
    const before = process.memoryUsage().arrayBuffers;
    const outcomes = await decodeAll(decoder, [error, bomb, ...tiny]);
    const grown = process.memoryUsage().arrayBuffers - before;
    assert.deepEqual(outcomes[0], [['streamtype', 'error']]);
    assert.equal(outcomes[1], 'a SPDY header block inflates past 16 KiB');
    assert.ok(
      outcomes.slice(2).every((o) => o === 'a SPDY header block inflates past 16 KiB'),
      'every block after it refused',
    );
    assert.ok(grown < 4 * MIB, `held ${grown} bytes more while decoding`);
  });

  test('blocks within 16 KiB each are refused once they inflate past 256 KiB in all', async () => {
    // Repetitive values compress to a few bytes: 20 × 15 KiB inflated is far under 64 KiB compressed.
    const blocks = Array.from({ length: 20 }, (_, i): Headers => [
      ['streamtype', 'abcdefghijklmnopqrst'[i].repeat(15 * KIB)],
    ]);
    const compressor = new HeaderCompressor();
    const frames = await compressor.synStreams(blocks);
    compressor.close();
    const decoder = new SpdyHeaderDecoder();
    const outcomes = await decodeAll(decoder, frames);
    const read = outcomes.filter((o) => typeof o !== 'string').length;
    assert.equal(read, Math.floor((256 * KIB) / (15 * KIB + 22)));
    assert.equal(outcomes[read], 'SPDY header blocks inflate past 256 KiB in one session');
  });

  test('past 64 KiB of compressed header bytes, or the bound on streams, a session is refused', async () => {
    // Random values do not compress: 40 × 3,000 bytes of header.
    const random = Array.from({ length: 40 }, (): Headers => [['streamtype', randomBytes(2250).toString('base64')]]);
    const compressor = new HeaderCompressor();
    const outcomes = await decodeAll(new SpdyHeaderDecoder(), await compressor.synStreams(random));
    assert.match(outcomes.at(-1) as string, /^SPDY header blocks past 64 KiB compressed in one session$/);
    const few = await decodeAll(
      new SpdyHeaderDecoder({ ...HEADER_LIMITS, streams: 5 }),
      await new HeaderCompressor().synStreams(Array.from({ length: 6 }, (): Headers => [['streamtype', 'x']])),
    );
    assert.deepEqual(few.slice(4), [[['streamtype', 'x']], 'more than 5 SPDY streams opened in one session']);
    assert.equal(HEADER_LIMITS.streams, 1024);
    compressor.close();
  });

  test('malformed blocks: a count or a length that lies, bytes past the block, not zlib at all', async () => {
    const refused = async (block: Buffer, raw = false) => {
      const compressor = new HeaderCompressor();
      const compressed = raw ? block : await compressor.compress(block);
      compressor.close();
      const body = Buffer.concat([Buffer.alloc(10), compressed]);
      const decoder = new SpdyHeaderDecoder();
      const error = await decoder.synStream(body).then(
        () => undefined,
        (e: unknown) => e,
      );
      assert.ok(error instanceof SpdyError, `accepted: ${block.toString('hex').slice(0, 80)}`);
      return error.message;
    };
    const good = headerBlock([['streamtype', 'stdin']]);
    assert.equal(await refused(Buffer.concat([u32(2), good.subarray(4)])), 'a malformed SPDY header block');
    assert.equal(await refused(Buffer.concat([u32(0xffffffff), good.subarray(4)])), 'a malformed SPDY header block');
    assert.equal(
      await refused(Buffer.concat([good.subarray(0, 4), u32(999), good.subarray(8)])),
      'a malformed SPDY header block',
    );
    assert.equal(await refused(Buffer.concat([good, Buffer.from('tail')])), 'a malformed SPDY header block');
    assert.equal(await refused(Buffer.alloc(0)), 'a malformed SPDY header block');
    assert.match(await refused(Buffer.from('not zlib at all'), true), /^SPDY header blocks zlib cannot inflate/);
    assert.equal(await refused(Buffer.alloc(0), true), 'a SYN_STREAM without a header block');
  });

  test('fuzz: hostile header blocks raise nothing but SpdyError and hold little; honest ones before them read exactly', async () => {
    const text = fc.string({ maxLength: 40 });
    type Step = { headers: Headers } | { inflates: Buffer } | { raw: Buffer } | { cut: number };
    const step: fc.Arbitrary<Step> = fc.oneof(
      { weight: 4, arbitrary: fc.array(fc.tuple(text, text), { maxLength: 6 }).map((headers) => ({ headers })) },
      // A block that inflates past the bound: a long run, or a long value that does not compress.
      {
        weight: 1,
        arbitrary: fc
          .tuple(fc.integer({ min: 16 * KIB, max: 4 * MIB }), fc.integer(), fc.boolean())
          .map(([n, seed, run]) => ({ inflates: headerBlock([['x', run ? 'y'.repeat(n) : noise(seed, n)]]) })),
      },
      // Bytes that lie when inflated, bytes that are not zlib, and a block cut short or run on.
      { weight: 2, arbitrary: fc.uint8Array({ maxLength: 200 }).map((b) => ({ inflates: Buffer.from(b) })) },
      { weight: 2, arbitrary: fc.uint8Array({ minLength: 1, maxLength: 100 }).map((b) => ({ raw: Buffer.from(b) })) },
      { weight: 1, arbitrary: fc.integer({ min: -8, max: 8 }).map((cut) => ({ cut })) },
    );
    await fc.assert(
      fc.asyncProperty(fc.array(step, { minLength: 1, maxLength: 12 }), async (plan) => {
        const compressor = new HeaderCompressor();
        const bodies: Buffer[] = [];
        for (const [i, s] of plan.entries()) {
          let compressed: Buffer;
          if ('headers' in s) compressed = await compressor.compress(s.headers);
          else if ('inflates' in s) compressed = await compressor.compress(s.inflates);
          else if ('raw' in s) compressed = s.raw;
          else {
            const whole = await compressor.compress([['streamtype', `cut${i}`]]);
            compressed =
              s.cut < 0
                ? whole.subarray(0, whole.length + s.cut)
                : Buffer.concat([whole, Buffer.from(noise(i, s.cut))]);
          }
          bodies.push(Buffer.concat([Buffer.alloc(18), compressed]));
        }
        compressor.close();
        const decoder = new SpdyHeaderDecoder();
        const before = process.memoryUsage().arrayBuffers;
        const outcomes = await decodeAll(decoder, bodies);
        // What the decoder held stays within a block's bound (and a chunk), whatever the blocks inflate to.
        const grown = process.memoryUsage().arrayBuffers - before;
        assert.ok(grown < 2 * MIB, `held ${grown} bytes more while decoding`);
        decoder.close();
        const refused = outcomes.findIndex((o) => typeof o === 'string');
        if (refused >= 0)
          assert.ok(
            outcomes.slice(refused).every((o) => typeof o === 'string'),
            'refused for good',
          );
        for (const outcome of outcomes) {
          if (typeof outcome === 'string') continue;
          const size = headerBlock(outcome).length;
          assert.ok(size <= HEADER_LIMITS.blockBytes, `a block of ${size} bytes was read`);
        }
        // Up to the first block that is not an honest one, every block is read as it was sent.
        const dishonest = plan.findIndex((s) => !('headers' in s));
        for (const [i, s] of plan.slice(0, dishonest < 0 ? plan.length : dishonest).entries()) {
          assert.deepEqual(outcomes[i], lowercase((s as { headers: Headers }).headers));
        }
      }),
      { seed: SEED, numRuns: 150 },
    );
  });
});

/** `n` bytes of seeded noise as latin1 text (it does not compress; the same seed, the same bytes). */
function noise(seed: number, n: number): string {
  const bytes = Buffer.alloc(Math.max(0, n));
  let x = seed | 1;
  for (let i = 0; i < bytes.length; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    bytes[i] = x & 0xff;
  }
  return bytes.toString('latin1');
}
