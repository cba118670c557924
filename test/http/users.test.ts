import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { startTestApp, type TestApp } from '../support/app.js';
import { createUser, login, signedIn } from '../support/factories.js';
import { client, request } from '../support/http.js';

const USER_KEYS = ['avatar_url', 'createdAt', 'enabled', 'id', 'lastLoginAt', 'name', 'provider', 'roles', 'username'];

describe('user administration', () => {
  let t: TestApp;
  let api: ReturnType<typeof client>;
  before(async () => {
    t = await startTestApp();
    api = client(t.app, (await signedIn(t, 'admin')).token);
  });
  after(() => t.close());

  test('create → 201 User with role viewer and no password; it can log in', async () => {
    const res = await api.post('/api/v1/admin/users/', {
      body: { username: 'Dana.Scully', password: 'trust-no-1-please', name: 'Dana' },
    });
    assert.equal(res.status, 201);
    assert.deepEqual(Object.keys(res.body).sort(), USER_KEYS);
    assert.equal(res.body.username, 'Dana.Scully');
    assert.equal(res.body.name, 'Dana');
    assert.equal(res.body.provider, 'password');
    assert.deepEqual(
      res.body.roles.map((r: { name: string }) => r.name),
      ['viewer'],
    );
    assert.equal(await login(t, { username: 'dana.scully', password: 'trust-no-1-please' }).then(Boolean), true);

    const noName = await api.post('/api/v1/admin/users', { body: { username: 'fox', password: 'i-want-to-believe' } });
    assert.equal(noName.body.name, 'fox', 'name defaults to the username');
  });

  test('duplicate username ignoring case → 409', async () => {
    await api.post('/api/v1/admin/users', { body: { username: 'walter', password: 'password-walter' } });
    const dup = await api.post('/api/v1/admin/users', { body: { username: 'WALTER', password: 'password-walter2' } });
    assert.equal(dup.status, 409);
    assert.match(dup.body.message, /already taken/);
  });

  test('password policy and unknown properties → 400 naming them; nothing stored', async () => {
    const before = await api.get('/api/v1/admin/users', { query: { size: '100' } });
    const cases: Array<[unknown, RegExp]> = [
      [{ username: 'shorty', password: 'seven77' }, /password must be longer than or equal to 8/],
      [{ username: 'longpw', password: 'p'.repeat(1025) }, /password must be shorter than or equal to 1024/],
      [{ username: 'samesame', password: 'SameSame' }, /password must not be the same as the username/],
      [{ username: 'extra', password: 'password-extra', isAdmin: true }, /property isAdmin should not exist/],
      [{ username: 'x', password: 'password-x' }, /username must be longer than or equal to 3/],
      [{ username: '-dash', password: 'password-dash' }, /username may contain only/],
      [{ username: 'n'.repeat(65), password: 'password-long' }, /username must be shorter than or equal to 64/],
      [{ username: 'nameless', password: 'password-nameless', name: '' }, /name must be longer than or equal to 1/],
    ];
    for (const [body, pattern] of cases) {
      const res = await api.post('/api/v1/admin/users', { body });
      assert.equal(res.status, 400, JSON.stringify(body));
      assert.match(res.body.message.join('; '), pattern);
    }
    const afterList = await api.get('/api/v1/admin/users', { query: { size: '100' } });
    assert.equal(afterList.body.total, before.body.total);
  });

  test('update: name alone; name + avatar_url; "" clears avatar_url; only what is sent changes', async () => {
    const user = await createUser(t, { name: 'Old Name' });
    const nameOnly = await api.put(`/api/v1/admin/users/${user.id}`, { body: { name: 'New Name' } });
    assert.equal(nameOnly.status, 200);
    assert.deepEqual(Object.keys(nameOnly.body).sort(), USER_KEYS);
    assert.equal(nameOnly.body.name, 'New Name');
    assert.equal(nameOnly.body.avatar_url, null);

    const both = await api.put(`/api/v1/admin/users/${user.id}`, {
      body: { name: 'Newer', avatar_url: 'https://img.example.com/a.png' },
    });
    assert.equal(both.status, 200);
    assert.equal(both.body.avatar_url, 'https://img.example.com/a.png');

    const avatarOnly = await api.put(`/api/v1/admin/users/${user.id}`, { body: { avatar_url: '' } });
    assert.equal(avatarOnly.body.avatar_url, null);
    assert.equal(avatarOnly.body.name, 'Newer');

    for (const avatar of ['javascript:alert(1)', 'ftp://x/y', 'not a url', 'https://' + 'a'.repeat(2048)]) {
      const bad = await api.put(`/api/v1/admin/users/${user.id}`, { body: { avatar_url: avatar } });
      assert.equal(bad.status, 400, avatar);
      assert.match(bad.body.message.join(';'), /avatar_url/);
    }
    const unknown = await api.put(`/api/v1/admin/users/${user.id}`, { body: { name: 'X', username: 'renamed' } });
    assert.equal(unknown.status, 400);
    assert.match(unknown.body.message.join(';'), /property username should not exist/);
  });

  test('delete, reset_password and enable answer {success: true}', async () => {
    const user = await createUser(t);
    const reset = await api.post(`/api/v1/admin/users/${user.id}/reset_password`, {
      body: { password: 'brand-new-password' },
    });
    assert.equal(reset.status, 200);
    assert.deepEqual(reset.body, { success: true });
    assert.equal(
      (
        await request(t.app, 'POST', '/api/v1/auth/login', {
          body: { username: user.username, password: user.password },
        })
      ).status,
      401,
    );
    await login(t, { username: user.username, password: 'brand-new-password' });

    const badReset = await api.post(`/api/v1/admin/users/${user.id}/reset_password`, {
      body: { password: user.username },
    });
    assert.equal(badReset.status, 400);

    const disable = await api.post(`/api/v1/admin/users/${user.id}/enable`, { body: { enabled: false } });
    assert.equal(disable.status, 200);
    assert.deepEqual(disable.body, { success: true });
    const listed = await api.get('/api/v1/admin/users', { query: { search: user.username } });
    assert.equal(listed.body.users[0].enabled, false);
    const enable = await api.post(`/api/v1/admin/users/${user.id}/enable`, { body: { enabled: true } });
    assert.deepEqual(enable.body, { success: true });
    assert.equal((await api.post(`/api/v1/admin/users/${user.id}/enable`, { body: { enabled: 'false' } })).status, 400);
    assert.equal((await api.post(`/api/v1/admin/users/${user.id}/enable`, { body: {} })).status, 400);

    const del = await api.delete(`/api/v1/admin/users/${user.id}`);
    assert.equal(del.status, 200);
    assert.deepEqual(del.body, { success: true });
    assert.equal((await api.get('/api/v1/admin/users', { query: { search: user.username } })).body.total, 0);
  });

  test('unknown id → 404 on every user route; a malformed id → 400', async () => {
    const id = 999999;
    const calls = [
      api.put(`/api/v1/admin/users/${id}`, { body: { name: 'x' } }),
      api.delete(`/api/v1/admin/users/${id}`),
      api.post(`/api/v1/admin/users/${id}/reset_password`, { body: { password: 'whatever-password' } }),
      api.post(`/api/v1/admin/users/${id}/enable`, { body: { enabled: true } }),
      api.put(`/api/v1/admin/users/${id}/roles`, { body: { roles: ['viewer'] } }),
    ];
    for (const res of await Promise.all(calls)) {
      assert.equal(res.status, 404);
      assert.equal(res.body.message, `user ${id} not found`);
    }
    for (const bad of ['abc', '0', '-1', '1.5', '99999999999']) {
      assert.equal((await api.delete(`/api/v1/admin/users/${bad}`)).status, 400, bad);
    }
  });

  test('roles: listed; replaced with PUT /roles; unknown role → 400', async () => {
    const roles = await api.get('/api/v1/admin/roles');
    assert.equal(roles.status, 200);
    assert.deepEqual(
      roles.body.map((r: { name: string }) => r.name),
      ['admin', 'viewer'],
    );
    const user = await createUser(t);
    const promoted = await api.put(`/api/v1/admin/users/${user.id}/roles`, { body: { roles: ['admin', 'viewer'] } });
    assert.equal(promoted.status, 200);
    assert.deepEqual(promoted.body.roles.map((r: { name: string }) => r.name).sort(), ['admin', 'viewer']);
    const token = await login(t, user);
    assert.equal(
      (await request(t.app, 'GET', '/api/v1/admin/users', { token })).status,
      200,
      'the new admin can use admin routes',
    );
    const bad = await api.put(`/api/v1/admin/users/${user.id}/roles`, { body: { roles: ['root'] } });
    assert.equal(bad.status, 400);
    assert.match(bad.body.message.join(';'), /roles/);
  });

  test('a viewer gets 403 on admin routes', async () => {
    const viewer = await signedIn(t, 'viewer');
    for (const [method, url] of [
      ['GET', '/api/v1/admin/users'],
      ['POST', '/api/v1/admin/users'],
      ['GET', '/api/v1/admin/roles'],
      ['GET', '/api/v1/admin/apikeys'],
      ['DELETE', `/api/v1/admin/users/${viewer.id}`],
    ]) {
      const res = await request(t.app, method, url, { token: viewer.token, body: method === 'POST' ? {} : undefined });
      assert.equal(res.status, 403, `${method} ${url}`);
    }
  });
});

describe('sessions end at once when a user is disabled, deleted or given a new password', () => {
  let t: TestApp;
  let api: ReturnType<typeof client>;
  before(async () => {
    t = await startTestApp();
    api = client(t.app, (await signedIn(t, 'admin')).token);
  });
  after(() => t.close());

  for (const [label, act] of [
    ['disable', (id: number) => api.post(`/api/v1/admin/users/${id}/enable`, { body: { enabled: false } })],
    ['delete', (id: number) => api.delete(`/api/v1/admin/users/${id}`)],
    [
      'reset_password',
      (id: number) => api.post(`/api/v1/admin/users/${id}/reset_password`, { body: { password: 'a-new-password-9' } }),
    ],
  ] as const) {
    test(label, async () => {
      const user = await createUser(t);
      const tokens = [await login(t, user), await login(t, user)];
      for (const token of tokens) assert.equal((await request(t.app, 'GET', '/api/v1/auth/me', { token })).status, 200);
      assert.equal((await act(user.id)).status, 200);
      for (const token of tokens) assert.equal((await request(t.app, 'GET', '/api/v1/auth/me', { token })).status, 401);
    });
  }

  test('re-enabling does not bring old sessions back', async () => {
    const user = await createUser(t);
    const token = await login(t, user);
    await api.post(`/api/v1/admin/users/${user.id}/enable`, { body: { enabled: false } });
    await api.post(`/api/v1/admin/users/${user.id}/enable`, { body: { enabled: true } });
    assert.equal((await request(t.app, 'GET', '/api/v1/auth/me', { token })).status, 401);
  });
});

describe('the last enabled admin', () => {
  let t: TestApp;
  before(async () => {
    t = await startTestApp();
  });
  after(() => t.close());

  test('cannot be deleted, disabled or lose the admin role (409); with a second admin it can', async () => {
    const admin = await signedIn(t, 'admin');
    const api = client(t.app, admin.token);
    await createUser(t, { role: 'admin', enabled: false }); // a disabled admin does not count
    const del = await api.delete(`/api/v1/admin/users/${admin.id}`);
    assert.equal(del.status, 409);
    assert.match(del.body.message, /last enabled admin/);
    assert.equal((await api.post(`/api/v1/admin/users/${admin.id}/enable`, { body: { enabled: false } })).status, 409);
    assert.equal((await api.put(`/api/v1/admin/users/${admin.id}/roles`, { body: { roles: ['viewer'] } })).status, 409);
    assert.equal((await api.get('/api/v1/auth/me')).status, 200, 'still signed in');

    const second = await createUser(t, { role: 'admin' });
    const demote = await api.put(`/api/v1/admin/users/${admin.id}/roles`, { body: { roles: ['viewer'] } });
    assert.equal(demote.status, 200);
    const api2 = client(t.app, await login(t, second));
    assert.equal((await api2.delete(`/api/v1/admin/users/${second.id}`)).status, 409, 'now the second is the last');
  });

  test('two admins disabling each other at once: one of them stays', async () => {
    const a = await signedIn(t, 'admin');
    const b = await signedIn(t, 'admin');
    // Leave exactly a and b as enabled admins.
    const others: Array<{ id: number }> = await t.dataSource.query(
      `SELECT u.id FROM users u JOIN user_roles ur ON ur.user_id = u.id JOIN roles r ON r.id = ur.role_id WHERE r.name = 'admin' AND u.id NOT IN (${a.id}, ${b.id})`,
    );
    for (const o of others) await t.dataSource.query(`DELETE FROM users WHERE id = ${o.id}`);
    const [ra, rb] = await Promise.all([
      client(t.app, a.token).post(`/api/v1/admin/users/${b.id}/enable`, { body: { enabled: false } }),
      client(t.app, b.token).post(`/api/v1/admin/users/${a.id}/enable`, { body: { enabled: false } }),
    ]);
    const statuses = [ra.status, rb.status].sort();
    assert.ok(statuses[0] === 200 && [401, 409].includes(statuses[1]), `statuses ${statuses}`);
    const enabledAdmins = await t.dataSource.query(
      `SELECT COUNT(*) AS n FROM users u JOIN user_roles ur ON ur.user_id = u.id JOIN roles r ON r.id = ur.role_id WHERE r.name = 'admin' AND u.enabled = true`,
    );
    assert.equal(Number(enabledAdmins[0].n), 1);
  });
});
