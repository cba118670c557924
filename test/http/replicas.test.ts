import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { createPostgresDatabase, onPostgres, startTestApp, type TestApp } from '../support/app.js';
import { createUser, login } from '../support/factories.js';
import { request } from '../support/http.js';

/**
 * How long a change made through one replica may take to reach the others: each replica trusts what it
 * read for at most 1 s (the caller and cluster-row caches); the margin covers the polling request itself.
 */
const STALENESS_BOUND_MS = 1000;
const MARGIN_MS = 300;

/**
 * Asks until the answer is `status`; returns when (after the start) the first request that got it was
 * sent: the staleness seen, not counting how long that request itself took. Fails past the bound.
 */
async function msUntil(ask: () => Promise<{ status: number }>, status: number, what: string): Promise<number> {
  const started = Date.now();
  for (;;) {
    const sentAt = Date.now() - started;
    const res = await ask();
    if (res.status === status) return sentAt;
    assert.ok(sentAt < STALENESS_BOUND_MS + MARGIN_MS, `${what}: still ${res.status} after ${sentAt} ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** Three instances of the service on one PostgreSQL database, as behind a load balancer. */
describe(
  'replicas on one PostgreSQL',
  { skip: onPostgres ? false : 'replicas need PostgreSQL (SQLite serves one instance)' },
  () => {
    let replicas: TestApp[] = [];
    let dropDatabase: () => Promise<void>;

    before(async () => {
      const db = await createPostgresDatabase();
      dropDatabase = db.drop;
      // Start one first so migrations run once, then the others.
      replicas.push(await startTestApp({ databaseUrl: db.url, env: { CAS_LOGIN_MAX_FAILURES_PER_USERNAME: '4' } }));
      replicas.push(
        ...(await Promise.all(
          [1, 2].map(() => startTestApp({ databaseUrl: db.url, env: { CAS_LOGIN_MAX_FAILURES_PER_USERNAME: '4' } })),
        )),
      );
    });
    after(async () => {
      for (const r of replicas) await r.close();
      replicas = [];
      await dropDatabase?.();
    });

    const on = (i: number) => replicas[i % replicas.length];

    test('40 concurrent bootstraps spread over the replicas: exactly one succeeds', async () => {
      const results = await Promise.all(
        Array.from({ length: 40 }, (_, i) =>
          request(on(i).app, 'POST', '/api/v1/admin/users/create_super_user', {
            body: { username: `boot${i}`, password: `boot-password-${i}` },
          }),
        ),
      );
      const statuses = results.map((r) => r.status);
      assert.equal(statuses.filter((s) => s === 201).length, 1, statuses.join(','));
      assert.equal(statuses.filter((s) => s === 409).length, 39);
    });

    test('a session from one replica works on the others; disabling the user on one ends it on the others within 1 s', async () => {
      const admin = await createUser(on(0), { role: 'admin' });
      const adminToken = await login(on(0), admin);
      const user = await createUser(on(0));
      const token = await login(on(1), user);
      for (const i of [0, 1, 2])
        assert.equal((await request(on(i).app, 'GET', '/api/v1/auth/me', { token })).status, 200, `replica ${i}`);
      const disabled = await request(on(2).app, 'POST', `/api/v1/admin/users/${user.id}/enable`, {
        token: adminToken,
        body: { enabled: false },
      });
      assert.equal(disabled.status, 200);
      assert.equal((await request(on(2).app, 'GET', '/api/v1/auth/me', { token })).status, 401, 'at once where made');
      for (const i of [0, 1]) {
        const took = await msUntil(() => request(on(i).app, 'GET', '/api/v1/auth/me', { token }), 401, `replica ${i}`);
        console.log(`disable seen by replica ${i} after ${took} ms`);
      }
    });

    test('a role taken away on one replica is enforced by the others within 1 s', async () => {
      const root = await createUser(on(0), { role: 'admin' });
      const rootToken = await login(on(0), root);
      const demoted = await createUser(on(0), { role: 'admin' });
      const token = await login(on(1), demoted);
      for (const i of [0, 1, 2])
        assert.equal((await request(on(i).app, 'GET', '/api/v1/admin/users', { token })).status, 200, `replica ${i}`);
      const changed = await request(on(0).app, 'PUT', `/api/v1/admin/users/${demoted.id}/roles`, {
        token: rootToken,
        body: { roles: ['viewer'] },
      });
      assert.equal(changed.status, 200, changed.text);
      assert.equal(
        (await request(on(0).app, 'GET', '/api/v1/admin/users', { token })).status,
        403,
        'at once where made',
      );
      for (const i of [1, 2]) {
        const took = await msUntil(
          () => request(on(i).app, 'GET', '/api/v1/admin/users', { token }),
          403,
          `replica ${i}`,
        );
        console.log(`role change seen by replica ${i} after ${took} ms`);
      }
    });

    test('failed logins are counted across replicas', async () => {
      const user = await createUser(on(0));
      for (let i = 0; i < 4; i++) {
        const res = await request(on(i).app, 'POST', '/api/v1/auth/login', {
          body: { username: user.username, password: 'wrong-password' },
        });
        assert.equal(res.status, 401);
      }
      const blocked = await request(on(1).app, 'POST', '/api/v1/auth/login', {
        body: { username: user.username, password: user.password },
      });
      assert.equal(blocked.status, 429);
    });

    test('an API key created on one replica works on another and its deletion takes effect on all within 1 s', async () => {
      const admin = await createUser(on(0), { role: 'admin' });
      const token = await login(on(0), admin);
      const key = (
        await request(on(0).app, 'POST', '/api/v1/admin/apikeys', {
          token,
          body: { name: 'replicated', role: 'admin' },
        })
      ).body;
      assert.equal(
        (await request(on(2).app, 'GET', '/api/v1/auth/me', { headers: { authorization: key.key } })).status,
        200,
      );
      await request(on(1).app, 'DELETE', `/api/v1/admin/apikeys/${key.id}`, { token });
      const withKey = (i: number) =>
        request(on(i).app, 'GET', '/api/v1/auth/me', { headers: { authorization: key.key } });
      assert.equal((await withKey(1)).status, 401, 'at once where made');
      for (const i of [0, 2]) {
        const took = await msUntil(() => withKey(i), 401, `replica ${i}`);
        console.log(`key deletion seen by replica ${i} after ${took} ms`);
      }
    });
  },
);
