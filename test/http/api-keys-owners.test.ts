import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { DataSource } from 'typeorm';
import { dataSourceOptions } from '../../src/database/data-source.js';
import { POSTGRES_MIGRATIONS } from '../../src/database/migrations/postgres/index.js';
import { SQLITE_MIGRATIONS } from '../../src/database/migrations/sqlite/index.js';
import { createPostgresDatabase, onPostgres, startTestApp, type TestApp } from '../support/app.js';
import { signedIn } from '../support/factories.js';
import { client, request } from '../support/http.js';

const SHOP_DEV = {
  name: 'shop-dev',
  rules: [{ clusters: ['a'], namespaces: ['shop'], resources: ['pods'], verbs: ['get'] }],
};

describe('API keys belong to users', () => {
  let t: TestApp;
  let root: Awaited<ReturnType<typeof signedIn>>;
  let admin: ReturnType<typeof client>;
  const as = (key: string) => ({ headers: { authorization: key } });

  before(async () => {
    t = await startTestApp();
    root = await signedIn(t, 'admin', { username: 'root' });
    admin = client(t.app, root.token);
    assert.equal((await admin.post('/api/v1/admin/roles', { body: SHOP_DEV })).status, 201);
  });
  after(() => t?.close());

  test('a user lists, creates and deletes its own keys, with roles it holds only', async () => {
    const carol = await signedIn(t, ['viewer', 'shop-dev'], { username: 'carol' });
    const dave = await signedIn(t, 'viewer', { username: 'dave' });
    const api = client(t.app, carol.token);
    assert.deepEqual((await api.get('/api/v1/auth/apikeys')).body, []);

    const created = await api.post('/api/v1/auth/apikeys', { body: { name: 'carol-ci', roles: ['shop-dev'] } });
    assert.equal(created.status, 201, created.text);
    assert.deepEqual(created.body.owner, { id: carol.id, username: 'carol' });
    assert.deepEqual(created.body.roles, ['shop-dev']);
    assert.equal(created.body.role, 'shop-dev');
    assert.equal(created.body.createdBy, 'carol');
    const me = await request(t.app, 'GET', '/api/v1/auth/me', as(created.body.key));
    assert.deepEqual(me.body.roles, ['shop-dev']);

    for (const [body, status, message] of [
      [{ name: 'k-admin', roles: ['admin'] }, 403, /does not hold: 'admin'/],
      [{ name: 'k-admin2', role: 'admin' }, 403, /'admin'/],
      [{ name: 'k-unknown', roles: ['nope'] }, 400, /no role named 'nope'/],
      [{ name: 'k-both', role: 'viewer', roles: ['viewer'] }, 400, /not both/],
      [{ name: 'k-none' }, 400, /at least one role/],
      [{ name: 'k-empty', roles: [] }, 400, /roles/],
      [{ name: 'k-bad', roles: ['A B'] }, 400, /roles/],
      [{ name: 'k-owner', roles: ['viewer'], ownerId: root.id }, 400, /ownerId should not exist/],
    ] as const) {
      const res = await api.post('/api/v1/auth/apikeys', { body });
      assert.equal(res.status, status, `${JSON.stringify(body)}: ${res.text}`);
      const text = Array.isArray(res.body.message) ? res.body.message.join(';') : res.body.message;
      assert.match(text, message);
    }

    const daveKey = await client(t.app, dave.token).post('/api/v1/auth/apikeys', {
      body: { name: 'dave-ci', role: 'viewer' },
    });
    assert.equal(daveKey.status, 201);
    assert.deepEqual(
      (await api.get('/api/v1/auth/apikeys')).body.map((k: any) => k.name),
      ['carol-ci'],
      'only its own keys',
    );
    const all = (await admin.get('/api/v1/admin/apikeys')).body;
    assert.deepEqual(
      all.map((k: any) => [k.name, k.owner.username]),
      [
        ['carol-ci', 'carol'],
        ['dave-ci', 'dave'],
      ],
    );
    assert.equal((await api.delete(`/api/v1/auth/apikeys/${daveKey.body.id}`)).status, 404, "another user's key");
    assert.equal((await request(t.app, 'GET', '/api/v1/auth/me', as(daveKey.body.key))).status, 200);
    assert.equal((await api.delete(`/api/v1/auth/apikeys/${created.body.id}`)).status, 200);
    assert.equal((await request(t.app, 'GET', '/api/v1/auth/me', as(created.body.key))).status, 401);
  });

  test('a key created with a key belongs to the same owner and cannot exceed what that key acts with', async () => {
    const erin = await signedIn(t, ['viewer', 'shop-dev'], { username: 'erin' });
    const first = await client(t.app, erin.token).post('/api/v1/auth/apikeys', {
      body: { name: 'erin-1', roles: ['viewer'] },
    });
    const byKey = await request(t.app, 'POST', '/api/v1/auth/apikeys', {
      ...as(first.body.key),
      body: { name: 'erin-2', roles: ['viewer'] },
    });
    assert.equal(byKey.status, 201, byKey.text);
    assert.deepEqual(byKey.body.owner, { id: erin.id, username: 'erin' });
    assert.equal(byKey.body.createdBy, 'apikey:erin-1');
    const wider = await request(t.app, 'POST', '/api/v1/auth/apikeys', {
      ...as(first.body.key),
      body: { name: 'erin-3', roles: ['shop-dev'] },
    });
    assert.equal(wider.status, 403, 'erin holds shop-dev, but the key acts only as viewer');
  });

  test('owner disabled → its keys get 401 at once; enabled again → they work again', async () => {
    const owner = await signedIn(t, 'admin', { username: 'frank' });
    const key = (
      await client(t.app, owner.token).post('/api/v1/admin/apikeys', { body: { name: 'frank-k', role: 'admin' } })
    ).body.key;
    assert.equal((await request(t.app, 'GET', '/api/v1/admin/users', as(key))).status, 200);
    assert.equal(
      (await admin.post(`/api/v1/admin/users/${owner.id}/enable`, { body: { enabled: false } })).status,
      200,
    );
    const refused = await request(t.app, 'GET', '/api/v1/admin/users', as(key));
    assert.equal(refused.status, 401);
    assert.match(refused.body.message, /owner is disabled/);
    assert.equal((await request(t.app, 'GET', '/api/v1/auth/me', as(key))).status, 401);
    await admin.post(`/api/v1/admin/users/${owner.id}/enable`, { body: { enabled: true } });
    assert.equal((await request(t.app, 'GET', '/api/v1/admin/users', as(key))).status, 200);
  });

  test('owner deleted → its keys are gone and get 401', async () => {
    const owner = await signedIn(t, 'admin', { username: 'gina' });
    const created = (
      await client(t.app, owner.token).post('/api/v1/admin/apikeys', { body: { name: 'gina-k', role: 'viewer' } })
    ).body;
    assert.equal((await request(t.app, 'GET', '/api/v1/auth/me', as(created.key))).status, 200);
    assert.equal((await admin.delete(`/api/v1/admin/users/${owner.id}`)).status, 200);
    assert.equal((await request(t.app, 'GET', '/api/v1/auth/me', as(created.key))).status, 401);
    assert.ok(!(await admin.get('/api/v1/admin/apikeys')).body.some((k: any) => k.id === created.id));
  });

  test('owner demoted → an admin-role key can no longer write; it acts with the roles the owner still holds', async () => {
    const owner = await signedIn(t, 'admin', { username: 'hank' });
    const created = await client(t.app, owner.token).post('/api/v1/admin/apikeys', {
      body: { name: 'hank-k', roles: ['admin', 'viewer'] },
    });
    assert.deepEqual(created.body.roles, ['admin', 'viewer']);
    const key = created.body.key;
    const write = () =>
      request(t.app, 'POST', '/api/v1/admin/users', {
        ...as(key),
        body: { username: `made-${Date.now()}`, password: 'long-enough-pw' },
      });
    assert.equal((await write()).status, 201);

    assert.equal(
      (await admin.put(`/api/v1/admin/users/${owner.id}/roles`, { body: { roles: ['viewer'] } })).status,
      200,
    );
    assert.equal((await write()).status, 403, 'admin routes: refused at once');
    const resourceWrite = await request(t.app, 'POST', '/api/v1/configmaps/default', {
      headers: { authorization: key, 'x-cluster-name': 'any' },
      body: { metadata: { name: 'x' } },
    });
    assert.equal(resourceWrite.status, 403, resourceWrite.text);
    assert.match(resourceWrite.body.message, /create/);
    const me = await request(t.app, 'GET', '/api/v1/auth/me', as(key));
    assert.deepEqual(me.body.roles, ['viewer']);
    const can = await request(t.app, 'POST', '/api/v1/auth/can-i', {
      ...as(key),
      body: { cluster: 'any', resource: 'configmaps', namespace: 'default', verb: 'create' },
    });
    assert.equal(can.body.allowed, false);

    // Promoted again: the key has its admin role back.
    await admin.put(`/api/v1/admin/users/${owner.id}/roles`, { body: { roles: ['admin'] } });
    assert.equal((await write()).status, 201);
    // Left with no role in common: the key has no role (only /auth/me).
    await admin.put(`/api/v1/admin/users/${owner.id}/roles`, { body: { roles: ['shop-dev'] } });
    assert.deepEqual((await request(t.app, 'GET', '/api/v1/auth/me', as(key))).body.roles, []);
    assert.equal((await request(t.app, 'GET', '/api/v1/clusters', as(key))).status, 403);
  });
});

describe('API keys: limits, expiry, password reset, names per owner (issue 29 #10, #15), one key (#34)', () => {
  let t: TestApp;
  let admin: Awaited<ReturnType<typeof signedIn>>;
  const as = (key: string) => ({ headers: { authorization: key } });
  const mint = (credential: { token?: string; key?: string }, body: Record<string, unknown>) =>
    request(t.app, 'POST', '/api/v1/auth/apikeys', {
      ...(credential.key ? as(credential.key) : { token: credential.token }),
      body: { roles: ['viewer'], ...body },
    });

  before(async () => {
    t = await startTestApp({ env: { CAS_API_KEYS_PER_USER: '3' } });
    admin = await signedIn(t, 'admin', { username: 'root' });
  });
  after(() => t?.close());

  test('a user owns at most CAS_API_KEYS_PER_USER keys: one more is a 409 naming the limit', async () => {
    const ivy = await signedIn(t, 'viewer', { username: 'ivy' });
    const ids: number[] = [];
    for (let i = 0; i < 3; i++) {
      const res = await mint(ivy, { name: `ivy-${i}` });
      assert.equal(res.status, 201, res.text);
      ids.push(res.body.id);
    }
    // Not even two at once.
    const extra = await Promise.all([mint(ivy, { name: 'ivy-x' }), mint(ivy, { name: 'ivy-y' })]);
    for (const res of extra) {
      assert.equal(res.status, 409, res.text);
      assert.match(res.body.message, /at most 3 API keys \(CAS_API_KEYS_PER_USER\)/);
    }
    // The limit is per user: another user is not affected; a deleted key frees a place.
    const jay = await signedIn(t, 'viewer', { username: 'jay' });
    assert.equal((await mint(jay, { name: 'jay-1' })).status, 201);
    assert.equal((await client(t.app, ivy.token).delete(`/api/v1/auth/apikeys/${ids[0]}`)).status, 200);
    assert.equal((await mint(ivy, { name: 'ivy-3' })).status, 201);
  });

  test('a key minted with a key never outlives it', async () => {
    const kim = await signedIn(t, 'viewer', { username: 'kim' });
    const soon = new Date(Date.now() + 120_000).toISOString();
    const short = await mint(kim, { name: 'kim-short', expiresAt: soon });
    assert.equal(short.status, 201, short.text);
    assert.equal(short.body.expiresAt, soon);
    const forever = await mint({ key: short.body.key }, { name: 'kim-forever' });
    assert.equal(forever.status, 201, forever.text);
    assert.equal(forever.body.expiresAt, soon, 'no expiry asked: the minting key expiry');
    const later = await mint({ key: short.body.key }, { name: 'kim-later', expiresAt: '2099-01-01T00:00:00.000Z' });
    assert.equal(later.body.expiresAt, soon, 'a later expiry is capped');
    // Kim owns 3 keys (the limit here): one goes before each further mint.
    assert.equal((await client(t.app, kim.token).delete(`/api/v1/auth/apikeys/${later.body.id}`)).status, 200);
    const sooner = new Date(Date.now() + 60_000).toISOString();
    const soonerKey = await mint({ key: forever.body.key }, { name: 'kim-sooner', expiresAt: sooner });
    assert.equal(soonerKey.body.expiresAt, sooner, 'an earlier expiry is kept');
    // A session (no expiry of its own to pass on) still mints keys that never expire.
    assert.equal((await client(t.app, kim.token).delete(`/api/v1/auth/apikeys/${soonerKey.body.id}`)).status, 200);
    assert.equal((await mint(kim, { name: 'kim-free' })).body.expiresAt, null);
  });

  test("a password reset deletes the user's API keys: they get 401 at once", async () => {
    const lee = await signedIn(t, 'viewer', { username: 'lee' });
    const key = (await mint(lee, { name: 'lee-ci' })).body.key;
    assert.equal((await request(t.app, 'GET', '/api/v1/auth/me', as(key))).status, 200);
    const reset = await client(t.app, admin.token).post(`/api/v1/admin/users/${lee.id}/reset_password`, {
      body: { password: 'a-brand-new-password' },
    });
    assert.equal(reset.status, 200, reset.text);
    assert.equal((await request(t.app, 'GET', '/api/v1/auth/me', as(key))).status, 401);
    const keys = (await client(t.app, admin.token).get('/api/v1/admin/apikeys')).body;
    assert.ok(!keys.some((k: { owner: { id: number } }) => k.owner.id === lee.id));
  });

  test("key names are unique per owner, not across users: a 409 names no other user's key", async () => {
    const mia = await signedIn(t, 'viewer', { username: 'mia' });
    const ned = await signedIn(t, 'viewer', { username: 'ned' });
    assert.equal((await mint(mia, { name: 'deploy' })).status, 201);
    assert.equal((await mint(ned, { name: 'Deploy' })).status, 201, 'another user may use the same name');
    const again = await mint(ned, { name: 'DEPLOY' });
    assert.equal(again.status, 409);
    assert.match(again.body.message, /you already have an API key named 'DEPLOY'/);
  });

  test("GET one key: admins any key, a user only its own (another user's key is a 404); the same item as the list", async () => {
    const olga = await signedIn(t, 'viewer', { username: 'olga' });
    const pam = await signedIn(t, 'viewer', { username: 'pam' });
    const created = await mint(olga, { name: 'olga-ci' });
    const { key } = created.body;
    assert.ok(key);
    // Used once first (that sets lastUsedAt), then compared with the list.
    const byKey = await request(t.app, 'GET', `/api/v1/auth/apikeys/${created.body.id}`, as(key));
    assert.equal(byKey.status, 200, byKey.text);
    const listed = (await client(t.app, olga.token).get('/api/v1/auth/apikeys')).body;
    assert.equal(listed.length, 1);
    const item = listed[0];
    assert.equal(item.id, created.body.id);
    assert.deepEqual(byKey.body, item);

    const own = await client(t.app, olga.token).get(`/api/v1/auth/apikeys/${item.id}`);
    assert.equal(own.status, 200, own.text);
    assert.deepEqual(own.body, item);
    const other = await client(t.app, pam.token).get(`/api/v1/auth/apikeys/${item.id}`);
    assert.equal(other.status, 404);
    assert.equal(other.body.message, `API key ${item.id} not found`);

    const byAdmin = await client(t.app, admin.token).get(`/api/v1/admin/apikeys/${item.id}`);
    assert.equal(byAdmin.status, 200);
    assert.deepEqual(byAdmin.body, item);
    assert.equal((await client(t.app, admin.token).get('/api/v1/admin/apikeys/999999')).status, 404);
    assert.equal((await client(t.app, admin.token).get('/api/v1/admin/apikeys/x')).status, 400);
    assert.equal((await client(t.app, pam.token).get(`/api/v1/admin/apikeys/${item.id}`)).status, 403);
    assert.equal((await request(t.app, 'GET', `/api/v1/auth/apikeys/${item.id}`)).status, 401);
  });
});

describe('migration: keys made before keys had owners', () => {
  test('belong to the first admin afterwards, with their role', async () => {
    let url: string;
    let drop = async () => {};
    let dir: string | undefined;
    if (onPostgres) {
      const db = await createPostgresDatabase();
      url = db.url;
      drop = db.drop;
    } else {
      const { mkdtemp } = await import('node:fs/promises');
      const { tmpdir } = await import('node:os');
      dir = await mkdtemp(`${tmpdir()}/cas-mig-`);
      url = `sqlite:${dir}/cas.sqlite`;
    }
    const database = onPostgres ? { type: 'postgres' as const, url } : { type: 'sqlite' as const, path: url.slice(7) };
    const migrations = onPostgres ? POSTGRES_MIGRATIONS : SQLITE_MIGRATIONS;
    const older = migrations.slice(
      0,
      migrations.findIndex((m) => m.name.startsWith('RoleRulesKeyOwners')),
    );
    const ds = new DataSource({ ...dataSourceOptions({ database } as any), entities: [], migrations: older } as any);
    await ds.initialize();
    await ds.runMigrations();
    const now = onPostgres ? 'now()' : "datetime('now')";
    await ds.query(
      `INSERT INTO users (id, username, username_key, name, enabled, created_at, updated_at) VALUES (1, 'v', 'v', 'v', true, ${now}, ${now}), (2, 'boss', 'boss', 'boss', true, ${now}, ${now}), (3, 'boss2', 'boss2', 'boss2', true, ${now}, ${now})`,
    );
    if (onPostgres) await ds.query(`SELECT setval(pg_get_serial_sequence('users', 'id'), 10)`);
    await ds.query(
      `INSERT INTO user_roles (user_id, role_id) SELECT 1, id FROM roles WHERE name = 'viewer' UNION ALL SELECT 2, id FROM roles WHERE name = 'admin' UNION ALL SELECT 3, id FROM roles WHERE name = 'admin'`,
    );
    await ds.query(
      `INSERT INTO api_keys (name, name_key, role_id, prefix, key_hash, created_by) SELECT 'old', 'old', id, 'cas_key_xxxx', 'abc', 'boss' FROM roles WHERE name = 'viewer'`,
    );
    await ds.destroy();

    const t = await startTestApp({ databaseUrl: url });
    try {
      const admin = await signedIn(t, 'admin');
      const keys = (await client(t.app, admin.token).get('/api/v1/admin/apikeys')).body;
      assert.equal(keys.length, 1);
      assert.deepEqual(keys[0].owner, { id: 2, username: 'boss' });
      assert.deepEqual(keys[0].roles, ['viewer']);
      const roles = (await client(t.app, admin.token).get('/api/v1/admin/roles')).body;
      assert.deepEqual(
        roles.map((r: any) => [r.name, r.builtin]),
        [
          ['admin', true],
          ['viewer', true],
        ],
      );
    } finally {
      await t.close();
      await drop();
      if (dir) await (await import('node:fs/promises')).rm(dir, { recursive: true, force: true });
    }
  });
});
