import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { BodyError, DepthScanner, jsonDepthExceeds, parseJsonBody } from '../../src/common/json-body.js';

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

  test('parses within the bound; refuses deeper bodies and invalid JSON with a 400', () => {
    assert.deepEqual(parseJsonBody('{"a":[1,{"b":2}]}', 3), { a: [1, { b: 2 }] });
    assert.equal(parseJsonBody('  ', 3), undefined);
    for (const [text, message] of [
      ['[[[[1]]]]', /nested deeper than 3 levels/],
      ['{"a":', /not valid JSON/],
    ] as const) {
      assert.throws(
        () => parseJsonBody(text, 3),
        (error: unknown) => error instanceof BodyError && error.statusCode === 400 && message.test(error.message),
      );
    }
    assert.equal(({} as Record<string, unknown>).polluted, undefined);
    assert.deepEqual(parseJsonBody('{"__proto__":{"polluted":1},"a":1}', 3), { a: 1 });
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
