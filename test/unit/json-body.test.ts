import assert from 'node:assert/strict';
import { PassThrough } from 'node:stream';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import type { FastifyRequest } from 'fastify';
import { DepthScanner, jsonBodyParser } from '../../src/common/json-body.js';

/** The scanner's answer for a whole text in one piece. */
const jsonDepthExceeds = (text: string | Buffer, max: number) =>
  new DepthScanner(max).push(typeof text === 'string' ? Buffer.from(text, 'utf8') : text);

type Refusal = Error & { statusCode?: number };

/**
 * Runs the service's JSON body parser as Fastify does: a request with the route's body limit and a
 * Content-Length, and the body arriving as a stream in `pieces`. Settles with what `done` was given.
 */
function parseBody(
  pieces: Array<string | Buffer>,
  {
    maxDepth = 3,
    bodyLimit = 1024,
    contentLength,
  }: { maxDepth?: number; bodyLimit?: number; contentLength?: number } = {},
): Promise<unknown> {
  const length = contentLength ?? pieces.reduce((n, piece) => n + Buffer.byteLength(piece), 0);
  const request = {
    routeOptions: { bodyLimit },
    headers: { 'content-length': String(length) },
  } as unknown as FastifyRequest;
  const payload = new PassThrough();
  const settled = new Promise<unknown>((resolve, reject) =>
    jsonBodyParser(maxDepth)(request, payload, (error, body) => (error ? reject(error) : resolve(body))),
  );
  for (const piece of pieces) payload.write(piece);
  payload.end();
  return settled;
}

const refused = (statusCode: number, message: RegExp) => (error: Refusal) => {
  assert.equal(error.statusCode, statusCode, error.message);
  assert.match(error.message, message);
  return true;
};

describe('JSON body depth', () => {
  test('counts arrays and objects, not brackets inside strings (escapes included)', () => {
    assert.equal(jsonDepthExceeds('[[[]]]', 3), false);
    assert.equal(jsonDepthExceeds('[[[[]]]]', 3), true);
    assert.equal(jsonDepthExceeds('{"a":{"b":{"c":1}}}', 3), false);
    assert.equal(jsonDepthExceeds('{"a":{"b":{"c":{}}}}', 3), true);
    assert.equal(jsonDepthExceeds(JSON.stringify({ a: '[[[[[[[[', b: '\\"[[[[[', c: '\\\\' }), 1), false);
    assert.equal(jsonDepthExceeds(JSON.stringify(['\\', [[['x']]]]), 3), true);
    assert.equal(jsonDepthExceeds('[[[[[[', 5), true, 'unbalanced still counts');
  });

  test('parses within the bound; refuses deeper bodies and invalid JSON with a 400', async () => {
    assert.deepEqual(await parseBody(['{"a":[1,', '{"b":2}]}']), { a: [1, { b: 2 }] });
    assert.equal(await parseBody(['  ']), undefined);
    for (const [text, message] of [
      ['[[[[1]]]]', /nested deeper than 3 levels/],
      ['{"a":', /not valid JSON/],
    ] as const) {
      await assert.rejects(parseBody([text]), refused(400, message));
    }
    assert.equal(({} as Record<string, unknown>).polluted, undefined);
    assert.deepEqual(await parseBody(['{"__proto__":{"polluted":1},"a":1}']), { a: 1 });
  });

  test("Fastify's limits: 413 past the route's body limit, 400 for a body shorter than its Content-Length", async () => {
    await assert.rejects(parseBody(['[1,2,3]'], { bodyLimit: 4 }), refused(413, /body is too large/i));
    await assert.rejects(parseBody(['[1,', '2,3]'], { bodyLimit: 4, contentLength: 2 }), refused(413, /too large/i));
    await assert.rejects(parseBody(['[1,2]'], { contentLength: 9 }), refused(400, /content-length/i));
  });

  test('a body nested too deep is refused at the piece that shows it, before the rest arrives', async () => {
    const request = { routeOptions: { bodyLimit: 1024 }, headers: {} } as unknown as FastifyRequest;
    const payload = new PassThrough();
    const settled = new Promise<unknown>((resolve, reject) =>
      jsonBodyParser(3)(request, payload, (error, body) => (error ? reject(error) : resolve(body))),
    );
    payload.write('{"a":[[[');
    await assert.rejects(settled, refused(400, /nested deeper than 3 levels/));
    assert.equal(payload.writableEnded, false, 'refused while the body was still arriving');
  });

  test('fed in pieces, the scanner says what it says of the whole text, wherever the cuts fall', () => {
    // Strings with quotes, brackets and runs of backslashes, so that cuts fall inside escapes.
    const value = fc.letrec((tie) => ({
      node: fc.oneof(
        { depthSize: 'small' },
        fc.stringMatching(/^[a-z\\"[\]{}é]{0,8}$/),
        fc.integer(),
        fc.array(tie('node'), { maxLength: 4 }),
        fc.dictionary(fc.stringMatching(/^[a-z\\"[]{0,4}$/), tie('node'), { maxKeys: 3 }),
      ),
    })).node;
    fc.assert(
      fc.property(value, fc.array(fc.nat(), { maxLength: 6 }), fc.integer({ min: 1, max: 6 }), (v, cuts, max) => {
        const bytes = Buffer.from(JSON.stringify(v), 'utf8');
        const expected = jsonDepthExceeds(bytes, max);
        const points = [...new Set(cuts.map((c) => c % (bytes.length + 1)))].sort((a, b) => a - b);
        const scanner = new DepthScanner(max);
        let from = 0;
        let exceeded = false;
        for (const to of [...points, bytes.length]) {
          exceeded ||= scanner.push(bytes.subarray(from, to));
          from = to;
        }
        assert.equal(exceeded, expected, `${bytes.toString()} cut at ${points.join(',')}`);
      }),
      { numRuns: 2000, seed: 20261124 },
    );
    // "a\\\\\"[[[[" in JSON: two escaped backslashes, an escaped quote, then brackets still inside the string.
    // Depth 3; 7 if the scanner took the escaped quote for the end of the string. Cut at every byte.
    const tricky = Buffer.from(JSON.stringify(['a\\\\"[[[[', [[1]]]), 'utf8');
    assert.equal(jsonDepthExceeds(tricky, 3), false);
    for (let cut = 0; cut <= tricky.length; cut++) {
      const scanner = new DepthScanner(3);
      const exceeded = scanner.push(tricky.subarray(0, cut)) || scanner.push(tricky.subarray(cut));
      assert.equal(exceeded, false, `cut at ${cut}`);
    }
  });
});
