import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { after, before, describe, test } from 'node:test';
import { startTestApp, type TestApp } from '../support/app.js';
import { signedIn } from '../support/factories.js';
import { client, request } from '../support/http.js';

describe('API keys', () => {
  let t: TestApp;
  let admin: { id: number; token: string; username: string; password: string };
  let api: ReturnType<typeof client>;
  before(async () => {
    t = await startTestApp();
    admin = await signedIn(t, 'admin');
    api = client(t.app, admin.token);
  });
  after(() => t.close());

  test('created with a role and shown once; works as `Authorization: <key>` and `Bearer <key>`', async () => {
    const created = await api.post('/api/v1/admin/apikeys', { body: { name: 'ci-admin', role: 'admin' } });
    assert.equal(created.status, 201);
    const key: string = created.body.key;
    assert.match(key, /^cas_key_[A-Za-z0-9_-]{43}$/);
    assert.equal(created.body.prefix, key.slice(0, 12));
    assert.equal(created.body.role, 'admin');
    assert.deepEqual(created.body.roles, ['admin']);
    assert.equal(created.body.createdBy, admin.username);
    assert.equal(created.body.lastUsedAt, null);
    assert.equal(created.body.expiresAt, null);

    const listed = await api.get('/api/v1/admin/apikeys');
    assert.equal(listed.status, 200);
    const entry = listed.body.find((k: { id: number }) => k.id === created.body.id);
    assert.deepEqual(Object.keys(entry).sort(), [
      'createdAt',
      'createdBy',
      'expiresAt',
      'id',
      'lastUsedAt',
      'name',
      'owner',
      'prefix',
      'role',
      'roles',
    ]);
    assert.deepEqual(entry.owner, { id: admin.id, username: admin.username });
    assert.ok(!listed.text.includes(key.slice(12)), 'the list never shows the key');

    const raw = await request(t.app, 'GET', '/api/v1/admin/users', { headers: { authorization: key } });
    assert.equal(raw.status, 200);
    const bearer = await request(t.app, 'GET', '/api/v1/admin/users', { headers: { authorization: `Bearer ${key}` } });
    assert.equal(bearer.status, 200);
    const me = await request(t.app, 'GET', '/api/v1/auth/me', { headers: { authorization: key } });
    assert.deepEqual(me.body, { kind: 'apiKey', apiKey: { id: created.body.id, name: 'ci-admin' }, roles: ['admin'] });

    const used = (await api.get('/api/v1/admin/apikeys')).body.find((k: { id: number }) => k.id === created.body.id);
    assert.ok(used.lastUsedAt, 'lastUsedAt is set after use');

    const byKey = await request(t.app, 'POST', '/api/v1/admin/apikeys', {
      headers: { authorization: key },
      body: { name: 'made-by-key', role: 'viewer' },
    });
    assert.equal(byKey.status, 201);
    assert.equal(byKey.body.createdBy, 'apikey:ci-admin');
  });

  test('a viewer key on an admin route → 403; on /auth/me → 200', async () => {
    const created = await api.post('/api/v1/admin/apikeys', { body: { name: 'reader', role: 'viewer' } });
    const key = created.body.key;
    assert.equal((await request(t.app, 'GET', '/api/v1/admin/users', { headers: { authorization: key } })).status, 403);
    assert.equal(
      (
        await request(t.app, 'POST', '/api/v1/admin/apikeys', {
          headers: { authorization: key },
          body: { name: 'x', role: 'admin' },
        })
      ).status,
      403,
    );
    const me = await request(t.app, 'GET', '/api/v1/auth/me', { headers: { authorization: key } });
    assert.equal(me.status, 200);
    assert.deepEqual(me.body.roles, ['viewer']);
  });

  test('a deleted key is refused (401) at once; deleting again → 404', async () => {
    const created = await api.post('/api/v1/admin/apikeys', { body: { name: 'short-lived', role: 'admin' } });
    const key = created.body.key;
    assert.equal((await request(t.app, 'GET', '/api/v1/admin/users', { headers: { authorization: key } })).status, 200);
    const del = await api.delete(`/api/v1/admin/apikeys/${created.body.id}`);
    assert.equal(del.status, 200);
    assert.deepEqual(del.body, { success: true });
    assert.equal((await request(t.app, 'GET', '/api/v1/admin/users', { headers: { authorization: key } })).status, 401);
    assert.equal((await api.delete(`/api/v1/admin/apikeys/${created.body.id}`)).status, 404);
  });

  test('expiry: a past expiresAt is refused at creation; an expired key → 401', async () => {
    const past = await api.post('/api/v1/admin/apikeys', {
      body: { name: 'old', role: 'admin', expiresAt: '2000-01-01T00:00:00Z' },
    });
    assert.equal(past.status, 400);
    assert.match(past.body.message.join(';'), /expiresAt/);
    const soon = await api.post('/api/v1/admin/apikeys', {
      body: { name: 'soon', role: 'admin', expiresAt: new Date(Date.now() + 60_000).toISOString() },
    });
    assert.equal(soon.status, 201);
    await t.dataSource.query(
      `UPDATE api_keys SET expires_at = ${t.config.database.type === 'postgres' ? "now() - interval '1 minute'" : "datetime('now', '-1 minute')"} WHERE id = ${soon.body.id}`,
    );
    const res = await request(t.app, 'GET', '/api/v1/auth/me', { headers: { authorization: soon.body.key } });
    assert.equal(res.status, 401);
  });

  test('invalid bodies: duplicate name ignoring case → 409; bad role, unknown property → 400', async () => {
    await api.post('/api/v1/admin/apikeys', { body: { name: 'Deployer', role: 'viewer' } });
    assert.equal((await api.post('/api/v1/admin/apikeys', { body: { name: 'deployer', role: 'viewer' } })).status, 409);
    const badRole = await api.post('/api/v1/admin/apikeys', { body: { name: 'k1', role: 'root' } });
    assert.equal(badRole.status, 400);
    assert.match(badRole.body.message.join(';'), /role/);
    const extra = await api.post('/api/v1/admin/apikeys', { body: { name: 'k2', role: 'admin', scopes: ['*'] } });
    assert.equal(extra.status, 400);
    assert.match(extra.body.message.join(';'), /property scopes should not exist/);
  });

  test('the database holds no key, session token or password in clear', async () => {
    const key = (await api.post('/api/v1/admin/apikeys', { body: { name: 'secret-check', role: 'admin' } })).body
      .key as string;
    const password = 'a-very-distinct-password-42';
    const user = await api.post('/api/v1/admin/users', { body: { username: 'secretive', password } });
    const token = (await request(t.app, 'POST', '/api/v1/auth/login', { body: { username: 'secretive', password } }))
      .body.token as string;
    assert.ok(user.body.id && token);
    const rows = JSON.stringify([
      await t.dataSource.query('SELECT * FROM api_keys'),
      await t.dataSource.query('SELECT * FROM sessions'),
      await t.dataSource.query('SELECT * FROM users'),
    ]);
    for (const secret of [key, key.slice(8), token, token.slice(9), password])
      assert.ok(!rows.includes(secret), 'secret found in rows');
    assert.match(rows, /\$argon2id\$/);
    if (t.config.database.type === 'sqlite') {
      // The whole file (and its write-ahead log), not only what a query shows.
      const bytes = Buffer.concat([
        await readFile(t.config.database.path),
        await readFile(t.config.database.path + '-wal').catch(() => Buffer.alloc(0)),
      ]).toString('latin1');
      for (const secret of [key, token, password])
        assert.ok(!bytes.includes(secret), 'secret found in the database file');
    }
  });
});
