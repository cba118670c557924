import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { REFUSAL_DELAY_MS } from '../../src/auth/auth.service.js';
import { startTestApp, type TestApp } from '../support/app.js';
import { createUser, login, signedIn } from '../support/factories.js';
import { client, request } from '../support/http.js';

describe('login, sessions and logout', () => {
  let t: TestApp;
  let admin: { id: number; token: string };
  before(async () => {
    t = await startTestApp();
    admin = await signedIn(t, 'admin');
  });
  after(() => t.close());

  test('wrong password and unknown user get the same 401', async () => {
    const user = await createUser(t);
    const wrong = await request(t.app, 'POST', '/api/v1/auth/login', {
      body: { username: user.username, password: 'not-the-password' },
    });
    const unknown = await request(t.app, 'POST', '/api/v1/auth/login', {
      body: { username: 'nobody-here', password: 'not-the-password' },
    });
    assert.equal(wrong.status, 401);
    assert.equal(unknown.status, 401);
    assert.equal(wrong.body.message, unknown.body.message);
    assert.equal(wrong.body.error, 'Unauthorized');
    assert.equal(wrong.headers['set-cookie'], undefined);
  });

  test('a disabled user gets 401', async () => {
    const user = await createUser(t, { enabled: false });
    const res = await request(t.app, 'POST', '/api/v1/auth/login', {
      body: { username: user.username, password: user.password },
    });
    assert.equal(res.status, 401);
  });

  test('success sets lastLoginAt, returns a token, sets an HttpOnly cookie', async () => {
    const user = await createUser(t, { name: 'Carol Example' });
    const before = await client(t.app, admin.token).get(`/api/v1/admin/users/`, { query: { search: user.username } });
    assert.equal(before.body.users[0].lastLoginAt, null);

    const started = Date.now();
    const res = await request(t.app, 'POST', '/api/v1/auth/login', {
      body: { username: user.username.toUpperCase(), password: user.password },
    });
    assert.equal(res.status, 200);
    assert.match(res.body.token, /^cas_sess_[A-Za-z0-9_-]{43}$/);
    assert.ok(Date.parse(res.body.expiresAt) > Date.now());
    assert.equal(res.body.user.username, user.username);
    assert.equal(res.body.user.name, 'Carol Example');
    const lastLoginAt = Date.parse(res.body.user.lastLoginAt);
    assert.ok(lastLoginAt >= started - 1000 && lastLoginAt <= Date.now() + 1000, 'lastLoginAt is now');
    assert.match(res.body.user.lastLoginAt, /Z$/);

    const cookie = String(res.headers['set-cookie']);
    assert.match(cookie, /^cas_session=cas_sess_/);
    assert.match(cookie, /HttpOnly/i);
    assert.match(cookie, /SameSite=Lax/i);
    assert.doesNotMatch(cookie, /Secure/i, 'not Secure over plain http');

    const after = await client(t.app, admin.token).get(`/api/v1/admin/users/`, { query: { search: user.username } });
    assert.equal(after.body.users[0].lastLoginAt, res.body.user.lastLoginAt);
  });

  test('the session works as Bearer and as the cookie; logout revokes it', async () => {
    const user = await createUser(t);
    const token = await login(t, user);
    const bearer = await request(t.app, 'GET', '/api/v1/auth/me', { token });
    assert.equal(bearer.status, 200);
    assert.equal(bearer.body.kind, 'user');
    assert.equal(bearer.body.user.username, user.username);
    assert.deepEqual(bearer.body.roles, ['viewer']);

    const viaCookie = await request(t.app, 'GET', '/api/v1/auth/me', { headers: { cookie: `cas_session=${token}` } });
    assert.equal(viaCookie.status, 200);
    assert.equal(viaCookie.body.user.id, user.id);

    const out = await request(t.app, 'POST', '/api/v1/auth/logout', { token });
    assert.equal(out.status, 200);
    assert.deepEqual(out.body, { success: true });
    assert.match(String(out.headers['set-cookie']), /cas_session=;/);

    assert.equal((await request(t.app, 'GET', '/api/v1/auth/me', { token })).status, 401);
    assert.equal(
      (await request(t.app, 'GET', '/api/v1/auth/me', { headers: { cookie: `cas_session=${token}` } })).status,
      401,
    );
  });

  test('a forged or garbled token is 401', async () => {
    for (const token of ['cas_sess_' + 'A'.repeat(43), 'garbage', 'cas_key_nope']) {
      assert.equal((await request(t.app, 'GET', '/api/v1/auth/me', { token })).status, 401, token);
    }
  });

  test('the stored session is a SHA-256 hash, not the token', async () => {
    const user = await createUser(t);
    const token = await login(t, user);
    const rows: Array<{ token_hash: string }> = await t.dataSource.query('SELECT token_hash FROM sessions');
    assert.ok(rows.length > 0);
    assert.ok(rows.every((r) => /^[0-9a-f]{64}$/.test(r.token_hash)));
    assert.ok(rows.every((r) => !r.token_hash.includes(token.slice('cas_sess_'.length, 20))));
  });
});

describe('session expiry', () => {
  let t: TestApp;
  before(async () => {
    t = await startTestApp({ env: { CAS_SESSION_IDLE_SECONDS: '60', CAS_SESSION_MAX_SECONDS: '120' } });
  });
  after(() => t.close());

  test('an idle session and one past its absolute limit are refused', async () => {
    const user = await createUser(t);
    const idle = await login(t, user);
    const old = await login(t, user);
    assert.equal((await request(t.app, 'GET', '/api/v1/auth/me', { token: idle })).status, 200);
    const sessions: Array<{ id: number }> = await t.dataSource.query('SELECT id FROM sessions ORDER BY id');
    const past = new Date(Date.now() - 61_000);
    await t.dataSource.getRepository('SessionEntity').update({ id: sessions[0].id }, { lastSeenAt: past });
    await t.dataSource
      .getRepository('SessionEntity')
      .update({ id: sessions[1].id }, { expiresAt: new Date(Date.now() - 1000) });
    const idleRes = await request(t.app, 'GET', '/api/v1/auth/me', { token: idle });
    assert.equal(idleRes.status, 401);
    assert.match(idleRes.body.message, /expired/);
    assert.equal((await request(t.app, 'GET', '/api/v1/auth/me', { token: old })).status, 401);
  });

  test('sessions past their absolute expiry are removed at the next login, presented or not', async () => {
    const user = await createUser(t);
    await login(t, user);
    const [row]: Array<{ id: number }> = await t.dataSource.query('SELECT id FROM sessions ORDER BY id DESC LIMIT 1');
    await t.dataSource
      .getRepository('SessionEntity')
      .update({ id: row.id }, { expiresAt: new Date(Date.now() - 1000) });
    await login(t, await createUser(t));
    const left = await t.dataSource.query(`SELECT id FROM sessions WHERE id = ${row.id}`);
    assert.deepEqual(left, []);
  });
});

describe('login throttling', () => {
  let t: TestApp;
  before(async () => {
    t = await startTestApp({
      env: { CAS_LOGIN_MAX_FAILURES_PER_USERNAME: '3', CAS_LOGIN_MAX_FAILURES_PER_ADDRESS: '6' },
    });
  });
  after(() => t.close());

  test('too many failures for one username give 429 with Retry-After, even with the right password', async () => {
    const user = await createUser(t);
    for (let i = 0; i < 3; i++) {
      const res = await request(t.app, 'POST', '/api/v1/auth/login', {
        body: { username: user.username, password: 'wrong-password' },
      });
      assert.equal(res.status, 401);
    }
    const blocked = await request(t.app, 'POST', '/api/v1/auth/login', {
      body: { username: user.username, password: user.password },
    });
    assert.equal(blocked.status, 429);
    assert.ok(Number(blocked.headers['retry-after']) > 0);
    assert.match(blocked.body.message, /too many failed logins/);
  });

  test('too many failures from one address block every username from it', async () => {
    const victim = await createUser(t);
    for (let i = 0; i < 6; i++) {
      await request(t.app, 'POST', '/api/v1/auth/login', {
        body: { username: `guess-${i}`, password: 'wrong-password' },
      });
    }
    const res = await request(t.app, 'POST', '/api/v1/auth/login', {
      body: { username: victim.username, password: victim.password },
    });
    assert.equal(res.status, 429);
  });

  test('a refused login is answered no sooner than a password check would be: a client retrying at once cannot flood', async () => {
    const user = await createUser(t);
    for (let i = 0; i < 3; i++) {
      await request(t.app, 'POST', '/api/v1/auth/login', { body: { username: user.username, password: 'wrong' } });
    }
    const started = performance.now();
    const refused = await Promise.all(
      Array.from({ length: 5 }, () =>
        request(t.app, 'POST', '/api/v1/auth/login', { body: { username: user.username, password: user.password } }),
      ),
    );
    const elapsed = performance.now() - started;
    assert.deepEqual(
      refused.map((r) => r.status),
      [429, 429, 429, 429, 429],
    );
    assert.ok(elapsed >= REFUSAL_DELAY_MS - 5, `answered after ${elapsed.toFixed(0)} ms`);
  });
});
