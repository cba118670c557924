import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { negotiate } from '../../src/common/negotiate.js';

const READ = ['application/json', 'application/yaml'];
const WRITE = ['application/json', 'text/x-diff'];

describe('negotiate: the media type a route answers in, by Accept', () => {
  const cases: Array<[string | undefined, readonly string[], string | null]> = [
    [undefined, READ, 'application/json'],
    ['', READ, 'application/json'],
    ['*/*', READ, 'application/json'],
    ['application/*', READ, 'application/json'],
    ['application/json', READ, 'application/json'],
    ['application/yaml', READ, 'application/yaml'],
    ['Application/YAML', READ, 'application/yaml'],
    ['application/yaml, */*;q=0.1', READ, 'application/yaml'],
    ['application/yaml, */*', READ, 'application/yaml'], // named outright beats a wildcard
    ['application/json, application/yaml', READ, 'application/json'], // the client's order
    ['application/yaml, application/json', READ, 'application/yaml'],
    ['application/json;q=0.5, application/yaml', READ, 'application/yaml'],
    ['application/yaml;q=0, */*', READ, 'application/json'],
    ['application/json;as=Table;g=meta.k8s.io;v=v1', READ, 'application/json'],
    // a browser's navigation
    ['text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8', READ, 'application/json'],
    ['text/plain', READ, null],
    ['text/html, application/xml', READ, null],
    ['application/json;q=0', READ, null],
    ['application/yaml;q=2', READ, null], // an invalid q is no range at all
    ['garbage', READ, null],
    ['text/x-diff', WRITE, 'text/x-diff'],
    ['text/*', WRITE, 'text/x-diff'],
    ['*/*', WRITE, 'application/json'],
    ['application/json', WRITE, 'application/json'],
  ];
  for (const [accept, offered, chosen] of cases) {
    test(`${JSON.stringify(accept)} of ${offered.join(', ')} → ${chosen}`, () => {
      assert.equal(negotiate(accept, offered), chosen);
    });
  }

  test('bounded: a header of thousands of ranges is read in its first 64', () => {
    const long = Array.from({ length: 10_000 }, () => 'text/plain').join(',') + ',application/yaml';
    const started = performance.now();
    assert.equal(negotiate(long, READ), null);
    assert.ok(performance.now() - started < 100);
  });
});
