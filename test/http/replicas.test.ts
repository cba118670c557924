import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { createPostgresDatabase, onPostgres, startTestApp, type TestApp } from '../support/app.js';
import { createUser, login } from '../support/factories.js';
import { request } from '../support/http.js';

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

    test('a session from one replica works on the others; disabling the user on one ends it on the others at once', async () => {
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
      const started = Date.now();
      for (const i of [0, 1])
        assert.equal((await request(on(i).app, 'GET', '/api/v1/auth/me', { token })).status, 401, `replica ${i}`);
      assert.ok(Date.now() - started < 1000);
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

    test('an API key created on one replica works on another and its deletion takes effect on all', async () => {
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
      for (const i of [0, 2])
        assert.equal(
          (await request(on(i).app, 'GET', '/api/v1/auth/me', { headers: { authorization: key.key } })).status,
          401,
        );
    });
  },
);
