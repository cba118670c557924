import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { startTestApp, type TestApp } from '../support/app.js';
import { request } from '../support/http.js';

describe('create_super_user', () => {
  let t: TestApp;
  before(async () => {
    t = await startTestApp();
  });
  after(() => t.close());

  test('32 concurrent calls: exactly one 201, the rest 409; later calls 409', async () => {
    const calls = Array.from({ length: 32 }, (_, i) =>
      request(t.app, 'POST', '/api/v1/admin/users/create_super_user', {
        body: { username: `root${i}`, password: `password-number-${i}`, name: `Root ${i}` },
      }),
    );
    const results = await Promise.all(calls);
    const statuses = results.map((r) => r.status).sort();
    assert.deepEqual(statuses.filter((s) => s === 201).length, 1, `statuses: ${statuses.join(',')}`);
    assert.deepEqual(statuses.filter((s) => s === 409).length, 31);
    const created = results.find((r) => r.status === 201)!.body;
    assert.deepEqual(
      created.roles.map((r: { name: string }) => r.name),
      ['admin'],
    );
    assert.equal(created.provider, 'password');
    assert.equal(created.enabled, true);
    assert.equal(created.lastLoginAt, null);
    assert.equal('password' in created, false);
    const conflict = results.find((r) => r.status === 409)!.body;
    assert.equal(conflict.error, 'Conflict');
    assert.match(conflict.message, /already exists/);
    assert.equal(typeof conflict.requestId, 'string');

    const later = await request(t.app, 'POST', '/api/v1/admin/users/create_super_user', {
      body: { username: 'another', password: 'another-password' },
    });
    assert.equal(later.status, 409);

    const list = await t.dataSource.query('SELECT COUNT(*) AS n FROM users');
    assert.equal(Number(list[0].n), 1);
  });
});

describe('create_super_user validation', () => {
  let t: TestApp;
  before(async () => {
    t = await startTestApp();
  });
  after(() => t.close());

  test('invalid bodies are 400 naming the field and create nothing', async () => {
    const cases: Array<[unknown, RegExp]> = [
      [{ username: 'ab', password: 'long-enough-1' }, /username/],
      [{ username: 'bad name', password: 'long-enough-1' }, /username/],
      [{ username: 'alice', password: 'short' }, /password/],
      [{ username: 'alice', password: 'x'.repeat(1025) }, /password/],
      [{ username: 'alice', password: 'ALICE' }, /password must be longer than or equal to 8/],
      [{ username: 'alicealice', password: 'AliceAlice' }, /password must not be the same as the username/],
      [{ username: 'alice', password: 'long-enough-1', role: 'admin' }, /property role should not exist/],
    ];
    for (const [body, pattern] of cases) {
      const res = await request(t.app, 'POST', '/api/v1/admin/users/create_super_user', { body });
      assert.equal(res.status, 400, JSON.stringify(body));
      assert.ok(Array.isArray(res.body.message), 'validation messages are an array');
      assert.match(res.body.message.join('; '), pattern);
    }
    const rows = await t.dataSource.query('SELECT COUNT(*) AS n FROM users');
    assert.equal(Number(rows[0].n), 0);
  });
});

describe('bootstrap from environment', () => {
  let t: TestApp;
  before(async () => {
    t = await startTestApp({ env: { CAS_BOOTSTRAP_USERNAME: 'envadmin', CAS_BOOTSTRAP_PASSWORD: 'env-password-1' } });
  });
  after(() => t.close());

  test('the super user from CAS_BOOTSTRAP_* can log in, and the route then answers 409', async () => {
    const login = await request(t.app, 'POST', '/api/v1/auth/login', {
      body: { username: 'envadmin', password: 'env-password-1' },
    });
    assert.equal(login.status, 200);
    assert.deepEqual(
      login.body.user.roles.map((r: { name: string }) => r.name),
      ['admin'],
    );
    const again = await request(t.app, 'POST', '/api/v1/admin/users/create_super_user', {
      body: { username: 'other', password: 'other-password' },
    });
    assert.equal(again.status, 409);
  });
});
