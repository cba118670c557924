import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ConfigError, loadConfig } from '../../src/config/config.js';
import { offsetProblem, OutputRing, takeResumeQuery } from '../../src/terminal/resumable-sessions.js';

/** A small seeded generator (mulberry32), so that a failure can be run again. */
function random(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Output as the client sees it: its bytes in order, and the channel of each byte (as one string to compare). */
function flatten(parts: Array<{ channel: number; payload: Buffer }>, from = 0): string {
  const bytes = Buffer.concat(parts.map((p) => p.payload));
  const channels = Buffer.concat(parts.map((p) => Buffer.alloc(p.payload.length, p.channel)));
  return `${bytes.subarray(from).toString('hex')}/${channels.subarray(from).toString('hex')}`;
}

describe('resumable sessions: the output ring and its offsets', () => {
  test('the output after any offset is exactly what followed it, across channels, in order', () => {
    const ring = new OutputRing(1024 * 1024);
    const sent: Array<{ channel: number; payload: Buffer }> = [];
    for (const [channel, text] of [
      [1, 'one\n'],
      [2, 'two\n'],
      [1, ''],
      [1, 'three\n'],
      [1, 'four\n'],
    ] as const) {
      ring.push(channel, Buffer.from(text));
      sent.push({ channel, payload: Buffer.from(text) });
    }
    assert.equal(ring.start, 0);
    assert.equal(ring.end, 19);
    for (let offset = 0; offset <= 19; offset++) {
      assert.equal(flatten(ring.since(offset)), flatten(sent, offset), `from offset ${offset}`);
    }
    assert.deepEqual(ring.since(ring.end), []);
    // Consecutive output of one channel may come back in fewer messages, never reordered across channels.
    assert.deepEqual(
      ring.since(0).map((p) => [p.channel, p.payload.toString()]),
      [
        [1, 'one\n'],
        [2, 'two\n'],
        [1, 'three\nfour\n'],
      ],
    );
  });

  test('past its bound the oldest output goes: random traffic, every kept offset exact, the bound held', () => {
    for (const seed of [1, 2, 3, 42, 1234]) {
      const next = random(seed);
      const limit = 4096 + Math.floor(next() * 60_000);
      const ring = new OutputRing(limit);
      const sent: Array<{ channel: number; payload: Buffer }> = [];
      for (let i = 0; i < 400; i++) {
        const channel = next() < 0.7 ? 1 : 2;
        const size = next() < 0.1 ? Math.floor(next() * 3 * limit) : Math.floor(next() * 300);
        const payload = Buffer.alloc(size);
        for (let j = 0; j < size; j++) payload[j] = Math.floor(next() * 256);
        ring.push(channel, payload);
        sent.push({ channel, payload });
        assert.ok(ring.cost <= limit, `seed ${seed}: the ring holds ${ring.cost} > ${limit}`);
      }
      const total = sent.reduce((sum, p) => sum + p.payload.length, 0);
      assert.equal(ring.end, total, `seed ${seed}`);
      assert.ok(ring.start > 0, `seed ${seed}: more was written than the bound`);
      // Most of the bound holds output (chunk costs aside).
      assert.ok(ring.end - ring.start >= limit / 2, `seed ${seed}: only ${ring.end - ring.start} of ${limit} kept`);
      for (const offset of [ring.start, ring.start + 1, Math.floor((ring.start + ring.end) / 2), ring.end - 1]) {
        assert.ok(flatten(ring.since(offset)) === flatten(sent, offset), `seed ${seed}, offset ${offset}`);
      }
    }
  });

  test('stdout and stderr alternating byte by byte cannot hold more than the bound', () => {
    const ring = new OutputRing(64 * 1024);
    for (let i = 0; i < 200_000; i++) ring.push(1 + (i % 2), Buffer.from([65 + (i % 26)]));
    assert.ok(ring.cost <= 64 * 1024);
    assert.equal(ring.end, 200_000);
    const kept = ring.since(ring.start);
    assert.equal(
      kept.reduce((sum, p) => sum + p.payload.length, 0),
      ring.end - ring.start,
    );
    assert.deepEqual(kept.at(-1), { channel: 2, payload: Buffer.from([65 + (199_999 % 26)]) });
  });

  test('a message longer than the ring keeps its tail', () => {
    const ring = new OutputRing(4096);
    const big = Buffer.alloc(10_000, 'x');
    big.write('END', 10_000 - 3);
    ring.push(1, big);
    assert.equal(ring.end, 10_000);
    assert.ok(ring.start >= 10_000 - 4096);
    assert.match(Buffer.concat(ring.since(ring.start).map((p) => p.payload)).toString(), /xEND$/);
  });

  test('an offset past the output is a 400, one older than what is kept a 410 naming the bound', () => {
    const ring = new OutputRing(2048);
    for (let i = 0; i < 10; i++) ring.push(1, Buffer.alloc(1000, 'a'));
    assert.equal(offsetProblem(ring, ring.end, 'id'), undefined);
    assert.equal(offsetProblem(ring, ring.start, 'id'), undefined);
    const past = offsetProblem(ring, ring.end + 1, 'id');
    assert.equal(past?.status, 400);
    assert.match(past!.message, /offset 10001 is past the output of session 'id' \(10000 bytes so far\)/);
    const old = offsetProblem(ring, 0, 'id');
    assert.equal(old?.status, 410);
    assert.match(old!.message, /older than the output kept .*CAS_SESSION_RESUME_BYTES is 2048/);
  });

  test('resumable, resume and offset are taken out of the query, checked', () => {
    const url = (q: string, verb = 'exec') => new URL(`http://x/api/v1/pods/ns/p/${verb}?command=sh&${q}`);
    const plain = url('stdin=true');
    assert.equal(takeResumeQuery(plain), undefined);
    assert.equal(plain.search, '?command=sh&stdin=true');
    const open = url('resumable=true&stdin=true');
    assert.deepEqual(takeResumeQuery(open), { open: true });
    assert.equal(open.search, '?command=sh&stdin=true', 'the cluster never sees them');
    assert.equal(takeResumeQuery(url('resumable=false')), undefined);
    const id = `replica1.${'A'.repeat(23)}_`;
    assert.deepEqual(takeResumeQuery(url(`resume=${id}&offset=1234`)), { id, offset: 1234 });
    const refusals: Array<[string, RegExp, string?]> = [
      ['resumable=yes', /resumable must be true or false/],
      ['resumable=true&resumable=true', /resumable may be given once/],
      [`resume=${id}`, /offset is required with resume/],
      [`resume=${id}&offset=-1`, /offset is required with resume/],
      [`resume=${id}&offset=1e3`, /offset is required with resume/],
      ['resume=short&offset=0', /resume must be the session id/],
      [`resume=${'A'.repeat(24)}&offset=0`, /resume must be the session id/],
      [`resume=${id}&offset=0&resumable=true`, /takes the place of resumable=true/],
      ['offset=3', /offset is given only with resume/],
      ['resumable=true', /port-forward sessions are not resumable/, 'portforward'],
    ];
    for (const [query, message, verb] of refusals) {
      assert.throws(
        () => takeResumeQuery(url(query, verb)),
        (error: { getStatus(): number; getResponse(): { message: string[] } }) =>
          error.getStatus() === 400 && message.test(error.getResponse().message.join()),
        query,
      );
    }
  });

  test('configuration: the window, the ring, the replica address and secret', () => {
    const exec = loadConfig({}).exec;
    assert.deepEqual([exec.resumeMs, exec.resumeBytes, exec.replicaUrl], [60_000, 1024 * 1024, undefined]);
    const secret = 's'.repeat(32);
    const set = loadConfig({
      CAS_SESSION_RESUME_SECONDS: '5',
      CAS_SESSION_RESUME_BYTES: '4096',
      CAS_REPLICA_URL: 'http://10.1.2.3:8080/',
      CAS_REPLICA_SECRET: secret,
    }).exec;
    assert.deepEqual(
      [set.resumeMs, set.resumeBytes, set.replicaUrl, set.replicaSecret],
      [5000, 4096, 'http://10.1.2.3:8080', secret],
    );
    for (const [env, says] of [
      [{ CAS_SESSION_RESUME_SECONDS: '0' }, /CAS_SESSION_RESUME_SECONDS must be an integer from 1 to 3600/],
      [{ CAS_SESSION_RESUME_BYTES: '100' }, /CAS_SESSION_RESUME_BYTES must be an integer from 1024/],
      [{ CAS_REPLICA_URL: 'http://10.1.2.3:8080' }, /CAS_REPLICA_SECRET is required with CAS_REPLICA_URL/],
      [{ CAS_REPLICA_URL: 'ftp://x', CAS_REPLICA_SECRET: secret }, /CAS_REPLICA_URL must be an http\(s\) URL/],
      [{ CAS_REPLICA_URL: 'http://x/api', CAS_REPLICA_SECRET: secret }, /with no path/],
      [{ CAS_REPLICA_SECRET: 'short' }, /CAS_REPLICA_SECRET must be 32–512 characters/],
    ] as const) {
      assert.throws(
        () => loadConfig(env),
        (e: Error) => e instanceof ConfigError && says.test(e.message),
      );
    }
  });
});
