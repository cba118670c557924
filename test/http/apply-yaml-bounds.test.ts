// What a YAML body of POST /api/v1/apply may cost before any cluster is involved: aliases are sized
// (an anchored 5 MB string used 60 times is 300 MB once expanded), and large bodies queue for a parser
// thread within a bound.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { MAX_WAITING_YAML_TEXTS, INLINE_YAML_CHARS } from '../../src/common/yaml-thread.js';
import { startTestApp, type TestApp } from '../support/app.js';
import { signedIn } from '../support/factories.js';
import { request } from '../support/http.js';

const MIB = 1024 * 1024;

describe('apply: YAML bodies within bounds', () => {
  let t: TestApp;
  let token: string;
  const apply = (body: string) =>
    request(t.app, 'POST', '/api/v1/apply', {
      token,
      headers: { 'x-cluster-name': 'nowhere', 'content-type': 'application/yaml' },
      rawBody: body,
      query: { dryRun: 'All' },
    });

  before(async () => {
    t = await startTestApp({ env: { CAS_CLUSTER_HEALTH_INTERVAL_SECONDS: '0' } });
    token = (await signedIn(t, 'admin')).token;
  });
  after(() => t?.close());

  test('a 5 MB anchored string used 60 times: 400 naming the lines, refused before it is expanded', async (ctx) => {
    const lines = [
      'apiVersion: v1',
      'kind: ConfigMap',
      'metadata: {name: big}',
      'data:',
      `  big: &big ${'x'.repeat(5_000_000)}`,
    ];
    for (let i = 0; i < 60; i++) lines.push(`  k${i}: *big`);
    const body = `${lines.join('\n')}\n`;
    assert.ok(body.length < 10 * MIB);
    const rss = process.memoryUsage().rss;
    const res = await apply(body);
    const grown = (process.memoryUsage().rss - rss) / MIB;
    ctx.diagnostic(`RSS grew by ${grown.toFixed(0)} MiB`);
    assert.equal(res.status, 400, res.text.slice(0, 300));
    assert.deepEqual(res.body.message, [
      'body expands to more than 20971520 characters as JSON (each alias repeats what it refers to) in the document at line 1; its first alias is at line 6',
    ]);
    // Expanded, it is 300 MB of strings in this process (and as much again as JSON): far beyond this bound.
    assert.ok(grown < 200, `RSS grew by ${grown.toFixed(0)} MiB`);
  });

  test('beyond the parser threads and their queue, a large body is refused at once: 503 with Retry-After', async () => {
    const body = `apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata:\n  k: "${'v'.repeat(INLINE_YAML_CHARS)}"\n`;
    const answers = await Promise.all(Array.from({ length: 2 + MAX_WAITING_YAML_TEXTS + 4 }, () => apply(body)));
    const busy = answers.filter((res) => res.status === 503);
    assert.ok(busy.length >= 1, answers.map((res) => res.status).join());
    for (const res of busy) {
      assert.equal(res.headers['retry-after'], '1');
      assert.match(
        res.body.message,
        /too many large YAML bodies are being parsed; try again in a moment \(or send JSON\)/,
      );
    }
    // The others were parsed, then found no cluster of that name.
    assert.ok(
      answers.every((res) => res.status === 503 || res.status === 404),
      answers.map((res) => res.status).join(),
    );
  });
});
