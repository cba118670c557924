import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { BodyError, jsonDepthExceeds, parseJsonBody } from '../../src/common/json-body.js';

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
});
