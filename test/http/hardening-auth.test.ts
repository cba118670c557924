// Issue 9, findings 1, 2, 3 and 13: the login throttle holds under concurrency, password hashing is
// bounded and never spent on a request that cannot succeed, bodies are not parsed before
// authentication, and a disabled account answers like a wrong password.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { PasswordHasher } from '../../src/auth/passwords.js';
import { runSql } from '../../src/database/sql.js';
import { startTestApp, type TestApp } from '../support/app.js';
import { createUser, signedIn } from '../support/factories.js';
import { request } from '../support/http.js';

const login = (t: TestApp, username: string, password: string) =>
  request(t.app, 'POST', '/api/v1/auth/login', { body: { username, password } });

function tally(statuses: number[]): Record<number, number> {
  const counts: Record<number, number> = {};
  for (const s of statuses) counts[s] = (counts[s] ?? 0) + 1;
  return counts;
}

describe('login throttle under concurrency (finding 1)', () => {
  const env = {
    CAS_LOGIN_MAX_FAILURES_PER_USERNAME: '5',
    CAS_LOGIN_MAX_FAILURES_PER_ADDRESS: '100000',
    CAS_PASSWORD_HASH_QUEUE: '1000',
  };
  let t: TestApp;
  let replica: TestApp;
  before(async () => {
    t = await startTestApp({ env });
    replica = await startTestApp({ env, databaseUrl: t.databaseUrl });
  });
  after(async () => {
    await replica.close();
    await t.close();
  });

  test('of 40 concurrent wrong logins on two replicas, at most the limit are verified; the rest get 429', async () => {
    const user = await createUser(t);
    const attempts = Array.from({ length: 40 }, (_, i) => login(i % 2 ? replica : t, user.username, 'wrong-password'));
    const counts = tally((await Promise.all(attempts)).map((r) => r.status));
    assert.ok((counts[401] ?? 0) <= 5, `at most 5 verified, got ${JSON.stringify(counts)}`);
    assert.equal((counts[401] ?? 0) + (counts[429] ?? 0), 40, JSON.stringify(counts));
    // The right password does not get through afterwards either.
    const right = await login(t, user.username, user.password);
    assert.equal(right.status, 429);
  });

  test('a successful login gives its reservation back', async () => {
    const user = await createUser(t);
    for (let i = 0; i < 8; i++) assert.equal((await login(t, user.username, user.password)).status, 200);
  });
});

describe('password hashing is bounded and spent only where it can succeed (finding 2)', () => {
  let t: TestApp;
  let busy: TestApp;
  before(async () => {
    t = await startTestApp({ env: { CAS_BOOTSTRAP_MAX_ATTEMPTS_PER_ADDRESS: '1000' } });
    busy = await startTestApp({
      env: {
        CAS_PASSWORD_HASH_CONCURRENCY: '1',
        CAS_PASSWORD_HASH_QUEUE: '2',
        CAS_LOGIN_MAX_FAILURES_PER_ADDRESS: '100000',
      },
    });
  });
  after(async () => {
    await busy.close();
    await t.close();
  });

  test('after bootstrap, a burst of create_super_user spends no password hash: all 409, a login beside it answers', async () => {
    const user = await createUser(t, { role: 'admin' });
    // What the burst costs is counted where every password hash and check is made (not timed: the
    // machine is shared, and a timing says less than the count).
    const hasher = t.app.get(PasswordHasher);
    const spent = { hash: 0, verify: 0 };
    const { hash, verify } = PasswordHasher.prototype;
    hasher.hash = (password) => (spent.hash++, hash.call(hasher, password));
    hasher.verify = (stored, password) => (spent.verify++, verify.call(hasher, stored, password));
    try {
      const burst = Array.from({ length: 100 }, (_, i) =>
        request(t.app, 'POST', '/api/v1/admin/users/create_super_user', {
          body: { username: `intruder${i}`, password: 'a-long-password' },
        }),
      );
      await sleep(100); // the burst is under way (before: 100 hashes queued on the thread pool)
      const started = performance.now();
      assert.equal((await login(t, user.username, user.password)).status, 200);
      const during = performance.now() - started;
      const answers = await Promise.all(burst);
      console.log(`login during the burst ${Math.round(during)} ms`);
      assert.deepEqual(tally(answers.map((r) => r.status)), { 409: 100 });
      assert.deepEqual(spent, { hash: 0, verify: 1 }, 'one check: the login; no hash for the burst');
    } finally {
      // Back to the class's own methods.
      delete (hasher as Partial<PasswordHasher>).hash;
      delete (hasher as Partial<PasswordHasher>).verify;
    }
  });

  test('beyond the hashing queue, logins get 503 with Retry-After (and are not counted as failures)', async () => {
    const names = Array.from({ length: 12 }, (_, i) => `nobody-${i}`);
    const answers = await Promise.all(names.map((n) => login(busy, n, 'wrong-password')));
    const counts = tally(answers.map((r) => r.status));
    assert.ok((counts[503] ?? 0) >= 1, JSON.stringify(counts));
    assert.equal((counts[503] ?? 0) + (counts[401] ?? 0), 12, JSON.stringify(counts));
    for (const [i, res] of answers.entries()) {
      if (res.status !== 503) continue;
      assert.equal(res.headers['retry-after'], '1');
      assert.equal(res.body.requestId, res.headers['x-request-id']);
      const rows = await runSql<{ failures: number }>(
        busy.dataSource,
        'SELECT failures FROM login_throttle WHERE key = :key',
        { key: `u:${names[i]}` },
      );
      assert.equal(Number(rows[0]?.failures ?? 0), 0, `${names[i]} was never verified, so not counted`);
    }
  });
});

describe('create_super_user is throttled per client address (finding 2)', () => {
  let t: TestApp;
  before(async () => {
    t = await startTestApp({ env: { CAS_BOOTSTRAP_MAX_ATTEMPTS_PER_ADDRESS: '3' } });
    await createUser(t, { role: 'admin' });
  });
  after(() => t?.close());

  const bootstrapFrom = (remoteAddress: string) =>
    t.app.inject({
      method: 'POST',
      url: '/api/v1/admin/users/create_super_user',
      remoteAddress,
      payload: { username: 'intruder', password: 'a-long-password' },
    });

  test('past the limit an address gets 429 with Retry-After; another address is not affected', async () => {
    const statuses: number[] = [];
    for (let i = 0; i < 5; i++) statuses.push((await bootstrapFrom('198.51.100.7')).statusCode);
    assert.deepEqual(statuses, [409, 409, 409, 429, 429]);
    const refused = await bootstrapFrom('198.51.100.7');
    assert.equal(refused.statusCode, 429);
    assert.ok(Number(refused.headers['retry-after']) >= 1);
    assert.equal(refused.json().requestId, refused.headers['x-request-id']);
    assert.equal((await bootstrapFrom('198.51.100.8')).statusCode, 409);
  });
});

describe('authentication before the body is read (finding 3)', () => {
  let t: TestApp;
  let token: string;
  before(async () => {
    t = await startTestApp();
    token = (await signedIn(t, 'admin')).token;
  });
  after(() => t.close());

  const malformed = { rawBody: '{"not json', headers: { 'content-type': 'application/json' } };

  test('an anonymous request with a body that cannot even be parsed gets 401, not 400', async () => {
    for (const url of ['/api/v1/configmaps/default', '/api/v1/admin/users', '/api/v1/admin/clusters']) {
      const res = await request(t.app, 'POST', url, malformed);
      assert.equal(res.status, 401, url);
      assert.equal(res.body.requestId, res.headers['x-request-id']);
    }
    const badKey = await request(t.app, 'POST', '/api/v1/configmaps/default', {
      ...malformed,
      headers: { ...malformed.headers, authorization: 'Bearer cas_key_nothing' },
    });
    assert.equal(badKey.status, 401);
  });

  test('an anonymous 10 MiB body of nested arrays is refused without parsing it', async () => {
    const payload = '[' + '[],'.repeat(3 * 1024 * 1024) + '[]]';
    const started = performance.now();
    const res = await request(t.app, 'POST', '/api/v1/configmaps/default', {
      rawBody: payload,
      headers: { 'content-type': 'application/json', 'x-cluster-name': 'x' },
    });
    assert.equal(res.status, 401);
    assert.ok(performance.now() - started < 5000);
  });

  test('signed-in callers and public routes still have their bodies read', async () => {
    const parsed = await request(t.app, 'POST', '/api/v1/admin/users', { token, ...malformed });
    assert.equal(parsed.status, 400);
    assert.match(parsed.body.message, /not valid JSON/);
    const publicRoute = await request(t.app, 'POST', '/api/v1/auth/login', malformed);
    assert.equal(publicRoute.status, 400);
  });
});

describe('a disabled account answers like a wrong password (finding 13)', () => {
  let t: TestApp;
  before(async () => {
    t = await startTestApp();
  });
  after(() => t.close());

  test('the right password on a disabled account gets the same 401 as a wrong one', async () => {
    const user = await createUser(t, { enabled: false });
    const disabled = await login(t, user.username, user.password);
    const wrong = await login(t, user.username, 'wrong-password');
    assert.equal(disabled.status, 401);
    assert.equal(wrong.status, 401);
    assert.equal(disabled.body.message, wrong.body.message);
  });
});
