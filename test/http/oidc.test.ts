import assert from 'node:assert/strict';
import { createServer as createTcpServer, type AddressInfo, type Socket } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { startTestApp, type TestApp } from '../support/app.js';
import { createUser, login } from '../support/factories.js';
import { client, request } from '../support/http.js';
import {
  cookieValue,
  signInThroughService,
  startOidcProvider,
  type OidcTestProvider,
} from '../support/oidc-provider.js';

const PUBLIC_URL = 'http://127.0.0.1:9';
const CAS_CLIENT = {
  client_id: 'cas',
  client_secret: 'a-client-secret-for-the-tests',
  redirect_uris: [`${PUBLIC_URL}/api/v1/auth/oidc/test/callback`],
};

async function closedPort(): Promise<number> {
  const server = createTcpServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

async function sessionCount(t: TestApp): Promise<number> {
  const rows: Array<{ n: number | string }> = await t.dataSource.query('SELECT COUNT(*) AS n FROM sessions');
  return Number(rows[0].n);
}

describe('single sign-on with a real OpenID provider', () => {
  let idp: OidcTestProvider;
  let t: TestApp;
  let root: { id: number; token: string };
  const hanging = createTcpServer((socket) => sockets.push(socket));
  const sockets: Socket[] = [];

  before(async () => {
    idp = await startOidcProvider({
      clients: () => [CAS_CLIENT],
      accounts: [
        {
          sub: 'alice-sub',
          preferred_username: 'alice',
          name: 'Alice Admin',
          email: 'alice@example.com',
          picture: 'https://img.example.com/alice.png',
          groups: ['platform-admins', 'staff'],
        },
        { sub: 'bob-sub', preferred_username: 'bob', name: 'Bob Developer', groups: ['devs'] },
        { sub: 'carol-sub', preferred_username: 'carol', groups: ['devs'] },
        { sub: 'dave-sub', preferred_username: 'dave', groups: ['staff'] },
        { sub: 'eve-sub', preferred_username: 'Root', groups: ['platform-admins'] },
        { sub: 'frank-sub', preferred_username: 'frank', groups: ['platform-admins'] },
        { sub: 'gina-sub', preferred_username: 'gina smith', groups: ['devs'] },
      ],
    });
    await new Promise<void>((resolve) => hanging.listen(0, '127.0.0.1', resolve));
    t = await startTestApp({
      env: {
        CAS_PUBLIC_URL: PUBLIC_URL,
        CAS_OIDC_TEST_ISSUER: idp.issuer,
        CAS_OIDC_TEST_CLIENT_ID: CAS_CLIENT.client_id,
        CAS_OIDC_TEST_CLIENT_SECRET: CAS_CLIENT.client_secret,
        CAS_OIDC_TEST_ROLE_MAP: 'platform-admins=admin,devs=viewer',
        CAS_OIDC_TEST_DISPLAY_NAME: 'Test IdP',
        CAS_OIDC_DOWN_ISSUER: `http://127.0.0.1:${await closedPort()}`,
        CAS_OIDC_DOWN_CLIENT_ID: 'cas',
        CAS_OIDC_DOWN_CLIENT_SECRET: 'secret',
        CAS_OIDC_HANG_ISSUER: `http://127.0.0.1:${(hanging.address() as AddressInfo).port}`,
        CAS_OIDC_HANG_CLIENT_ID: 'cas',
        CAS_OIDC_HANG_CLIENT_SECRET: 'secret',
        CAS_OIDC_TIMEOUT_SECONDS: '2',
      },
    });
    const created = await request(t.app, 'POST', '/api/v1/admin/users/create_super_user', {
      body: { username: 'root', password: 'root-password' },
    });
    assert.equal(created.status, 201);
    root = { id: created.body.id, token: await login(t, { username: 'root', password: 'root-password' }) };
  });
  after(async () => {
    await t?.close();
    await idp?.close();
    for (const socket of sockets) socket.destroy();
    hanging.close();
  });

  test('the providers are listed publicly: password and each OpenID provider', async () => {
    const res = await request(t.app, 'GET', '/api/v1/auth/providers');
    assert.equal(res.status, 200);
    assert.deepEqual(res.body, [
      { id: 'password', type: 'password', displayName: 'Username and password', loginUrl: null },
      { id: 'down', type: 'oidc', displayName: 'down', loginUrl: '/api/v1/auth/oidc/down/login' },
      { id: 'hang', type: 'oidc', displayName: 'hang', loginUrl: '/api/v1/auth/oidc/hang/login' },
      { id: 'test', type: 'oidc', displayName: 'Test IdP', loginUrl: '/api/v1/auth/oidc/test/login' },
    ]);
  });

  test('a platform-admins member signs in and gets an admin session (cookie), then goes where she asked', async () => {
    const sessionsBefore = await sessionCount(t);
    const started = Date.now();
    const s = await signInThroughService(t.app, 'test', 'alice-sub', { redirect: '/clusters?tab=health' });

    // The redirect to the provider: authorization code with PKCE S256, state and nonce.
    assert.equal(s.authorizationUrl.origin, idp.issuer);
    const params = s.authorizationUrl.searchParams;
    assert.equal(params.get('response_type'), 'code');
    assert.equal(params.get('client_id'), 'cas');
    assert.equal(params.get('redirect_uri'), CAS_CLIENT.redirect_uris[0]);
    assert.equal(params.get('code_challenge_method'), 'S256');
    assert.match(params.get('code_challenge') ?? '', /^[A-Za-z0-9_-]{43}$/);
    assert.ok((params.get('state') ?? '').length >= 32 && (params.get('nonce') ?? '').length >= 32);
    assert.equal(params.get('scope'), 'openid profile email groups');
    const stateSetCookie = ([] as string[]).concat(s.login.headers['set-cookie'] as string[]).join('\n');
    assert.match(stateSetCookie, /HttpOnly/i);
    assert.match(stateSetCookie, /SameSite=Lax/i);
    assert.match(stateSetCookie, /Path=\/api\/v1\/auth\/oidc\/test\/callback/);
    assert.match(stateSetCookie, /Max-Age=600/);
    assert.ok(!s.stateCookie.includes(params.get('state')!), 'the state is sealed, not readable in the cookie');

    assert.equal(s.callbackUrl.pathname, '/api/v1/auth/oidc/test/callback');
    assert.equal(s.callback.status, 302, s.callback.text);
    assert.equal(s.callback.headers.location, '/clusters?tab=health');
    assert.equal(cookieValue(s.callback, 'cas_oidc_test'), '', 'the sign-in cookie is cleared');
    const sessionCookie = ([] as string[])
      .concat(s.callback.headers['set-cookie'] as string[])
      .find((c) => c.startsWith('cas_session='))!;
    assert.match(sessionCookie, /^cas_session=cas_sess_[A-Za-z0-9_-]{43};/);
    assert.match(sessionCookie, /HttpOnly/i);
    assert.match(sessionCookie, /Max-Age=86400/, 'the service’s own session limit (CAS_SESSION_MAX_SECONDS)');
    assert.equal(await sessionCount(t), sessionsBefore + 1);

    const me = await request(t.app, 'GET', '/api/v1/auth/me', { headers: { cookie: `cas_session=${s.sessionToken}` } });
    assert.equal(me.status, 200);
    assert.equal(me.body.user.username, 'alice');
    assert.equal(me.body.user.provider, 'oidc:test');
    assert.equal(me.body.user.name, 'Alice Admin');
    assert.equal(me.body.user.avatar_url, 'https://img.example.com/alice.png');
    assert.deepEqual(me.body.roles, ['admin']);
    assert.ok(Date.parse(me.body.user.lastLoginAt) >= started - 1000);
    // The same session works as a bearer token, and on admin routes.
    const users = await client(t.app, s.sessionToken).get('/api/v1/admin/users/');
    assert.equal(users.status, 200);
  });

  test('a devs member gets a viewer session; a group change changes the roles at the next login', async () => {
    const first = await signInThroughService(t.app, 'test', 'bob-sub');
    assert.equal(first.callback.status, 302, first.callback.text);
    assert.equal(first.callback.headers.location, '/', 'no redirect asked: /');
    const me = await client(t.app, first.sessionToken).get('/api/v1/auth/me');
    assert.deepEqual(me.body.roles, ['viewer']);
    assert.equal(me.body.user.name, 'Bob Developer');
    const bobId = me.body.user.id;
    assert.equal((await client(t.app, first.sessionToken).get('/api/v1/admin/users/')).status, 403);
    assert.equal((await client(t.app, first.sessionToken).get('/api/v1/clusters')).status, 200);

    idp.accounts.get('bob-sub')!.groups = ['devs', 'platform-admins'];
    const second = await signInThroughService(t.app, 'test', 'bob-sub');
    assert.equal(second.callback.status, 302, second.callback.text);
    const promoted = await client(t.app, second.sessionToken).get('/api/v1/auth/me');
    assert.deepEqual([...promoted.body.roles].sort(), ['admin', 'viewer'], 'each mapped group adds its role');
    assert.equal(promoted.body.user.id, bobId, 'the same user, not a new one');
    assert.equal((await client(t.app, second.sessionToken).get('/api/v1/admin/users/')).status, 200);

    // Removed from every mapped group (and renamed at the provider): no role at all, same account.
    idp.accounts.get('bob-sub')!.groups = ['staff'];
    idp.accounts.get('bob-sub')!.preferred_username = 'robert';
    const third = await signInThroughService(t.app, 'test', 'bob-sub');
    assert.equal(third.callback.status, 302, third.callback.text);
    const demoted = await client(t.app, third.sessionToken).get('/api/v1/auth/me');
    assert.equal(demoted.status, 200);
    assert.deepEqual(demoted.body.roles, []);
    assert.equal(demoted.body.user.id, bobId);
    assert.equal(demoted.body.user.username, 'robert');
    assert.equal((await client(t.app, third.sessionToken).get('/api/v1/clusters')).status, 403);
    // The older sessions carry the roles the user has now, not the ones of their login.
    assert.equal((await client(t.app, second.sessionToken).get('/api/v1/admin/users/')).status, 403);
  });

  test('a person in no mapped group signs in with no role: only /auth/me and logout work', async () => {
    const s = await signInThroughService(t.app, 'test', 'dave-sub');
    assert.equal(s.callback.status, 302, s.callback.text);
    const me = await client(t.app, s.sessionToken).get('/api/v1/auth/me');
    assert.equal(me.status, 200);
    assert.deepEqual(me.body.roles, []);
    const clusters = await client(t.app, s.sessionToken).get('/api/v1/clusters');
    assert.equal(clusters.status, 403);
    assert.match(clusters.body.message, /no role/);
  });

  test('users of the provider have no password: reset_password is 409, password login the usual 401', async () => {
    const alice = await client(t.app, root.token).get('/api/v1/admin/users/', { query: { search: 'alice' } });
    const aliceId = alice.body.users[0].id;
    const reset = await client(t.app, root.token).post(`/api/v1/admin/users/${aliceId}/reset_password`, {
      body: { password: 'a-new-password' },
    });
    assert.equal(reset.status, 409);
    assert.match(reset.body.message, /oidc:test/);
    const asAlice = await request(t.app, 'POST', '/api/v1/auth/login', {
      body: { username: 'alice', password: 'any-password' },
    });
    const wrong = await request(t.app, 'POST', '/api/v1/auth/login', {
      body: { username: 'root', password: 'not-the-password' },
    });
    assert.equal(asAlice.status, 401);
    assert.equal(asAlice.body.message, wrong.body.message);
    assert.equal(asAlice.headers['set-cookie'], undefined);
  });

  test('a disabled user loses the session at once and the next single sign-on is refused', async () => {
    const s = await signInThroughService(t.app, 'test', 'carol-sub');
    assert.equal(s.callback.status, 302, s.callback.text);
    const me = await client(t.app, s.sessionToken).get('/api/v1/auth/me');
    const disable = await client(t.app, root.token).post(`/api/v1/admin/users/${me.body.user.id}/enable`, {
      body: { enabled: false },
    });
    assert.equal(disable.status, 200);
    assert.equal((await client(t.app, s.sessionToken).get('/api/v1/auth/me')).status, 401);

    const sessions = await sessionCount(t);
    const again = await signInThroughService(t.app, 'test', 'carol-sub');
    assert.equal(again.callback.status, 401);
    assert.equal(again.callback.body.message, 'user is disabled');
    assert.equal(again.sessionToken, undefined);
    assert.equal(await sessionCount(t), sessions);
  });

  test('a username held by another account is refused, never taken over', async () => {
    const sessions = await sessionCount(t);
    const s = await signInThroughService(t.app, 'test', 'eve-sub');
    assert.equal(s.callback.status, 409);
    assert.match(s.callback.body.message, /username 'Root' belongs to another account/);
    assert.equal(s.sessionToken, undefined);
    assert.equal(await sessionCount(t), sessions);
    const list = await client(t.app, root.token).get('/api/v1/admin/users/', { query: { search: 'root' } });
    assert.equal(list.body.total, 1);
    assert.equal(list.body.users[0].provider, 'password');
    assert.deepEqual(
      list.body.users[0].roles.map((r: { name: string }) => r.name),
      ['admin'],
    );
    assert.equal((await client(t.app, root.token).get('/api/v1/auth/me')).body.user.username, 'root');
  });

  test('a username claim the service cannot use is a 403 naming the claim', async () => {
    const s = await signInThroughService(t.app, 'test', 'gina-sub');
    assert.equal(s.callback.status, 403);
    assert.match(s.callback.body.message, /preferred_username 'gina smith'.*not a valid username/);
    assert.equal(s.sessionToken, undefined);
  });

  test('the users list shows the provider; search and role filters work across providers', async () => {
    const password = await createUser(t, { username: 'alicia-pw', role: 'viewer' });
    const admin = client(t.app, root.token);
    const search = await admin.get('/api/v1/admin/users/', {
      query: { search: 'ALI', sortBy: 'username', sortOrder: 'asc' },
    });
    assert.equal(search.status, 200);
    assert.deepEqual(
      search.body.users.map((u: { username: string; provider: string }) => [u.username, u.provider]),
      [
        ['alice', 'oidc:test'],
        ['alicia-pw', 'password'],
      ],
    );
    const admins = await admin.get('/api/v1/admin/users/', {
      query: { role: 'admin', sortBy: 'username', sortOrder: 'asc' },
    });
    assert.deepEqual(
      admins.body.users.map((u: { username: string; provider: string }) => [u.username, u.provider]),
      [
        ['alice', 'oidc:test'],
        ['root', 'password'],
      ],
    );
    const viewers = await admin.get('/api/v1/admin/users/', {
      query: { role: 'viewer', sortBy: 'username', sortOrder: 'asc' },
    });
    const names = viewers.body.users.map((u: { username: string }) => u.username);
    assert.ok(names.includes('alicia-pw') && names.includes('carol'), names.join(','));
    assert.ok(!names.includes('robert') && !names.includes('alice'), names.join(','));
    const both = await admin.get('/api/v1/admin/users/', { query: { search: 'ali', role: 'viewer' } });
    assert.deepEqual(
      both.body.users.map((u: { id: number }) => u.id),
      [password.id],
    );
  });

  test('strict queries, unknown providers', async () => {
    const extra = await request(t.app, 'GET', '/api/v1/auth/oidc/test/login?redirect=/&prompt=none');
    assert.equal(extra.status, 400);
    assert.match(JSON.stringify(extra.body.message), /prompt/);
    const unknown = await request(t.app, 'GET', '/api/v1/auth/oidc/nope/login');
    assert.equal(unknown.status, 404);
    assert.match(unknown.body.message, /no OpenID provider 'nope'/);
    const callbackExtra = await request(t.app, 'GET', '/api/v1/auth/oidc/test/callback?code=x&state=y&token=z');
    assert.equal(callbackExtra.status, 400);
    const long = await request(t.app, 'GET', '/api/v1/auth/oidc/test/login', {
      query: { redirect: '/' + 'a'.repeat(3000) },
    });
    assert.equal(long.status, 400);
    assert.match(JSON.stringify(long.body.message), /redirect/);
    assert.ok(long.headers['x-request-id']);
  });

  test('the provider keys and discovery are fetched once and reused for later sign-ins', async () => {
    const before = idp.jwksFetches;
    assert.ok(before >= 1, 'the keys were fetched for the first sign-ins');
    idp.accounts.get('alice-sub')!.groups = ['platform-admins'];
    const s = await signInThroughService(t.app, 'test', 'alice-sub');
    assert.equal(s.callback.status, 302, s.callback.text);
    assert.equal(idp.jwksFetches, before, 'no new fetch of the keys');
  });

  test('an unreachable provider is a 502 naming it; the rest of the service carries on', async () => {
    const down = await request(t.app, 'GET', '/api/v1/auth/oidc/down/login');
    assert.equal(down.status, 502);
    assert.match(down.body.message, /OpenID provider 'down' \(http:\/\/127\.0\.0\.1:\d+\/\) could not be reached/);
    assert.equal(down.headers['set-cookie'], undefined);

    const started = Date.now();
    const hang = request(t.app, 'GET', '/api/v1/auth/oidc/hang/login');
    // While one provider does not answer, everything else does.
    const me = await client(t.app, root.token).get('/api/v1/auth/me');
    assert.equal(me.status, 200);
    assert.ok(Date.now() - started < 1500, 'not held up by the hanging provider');
    assert.equal((await request(t.app, 'GET', '/api/v1/auth/providers')).status, 200);
    const hung = await hang;
    assert.equal(hung.status, 502);
    assert.match(hung.body.message, /OpenID provider 'hang'.*could not be reached/);
    assert.ok(Date.now() - started < 15_000);
    const ok = await signInThroughService(t.app, 'test', 'alice-sub');
    assert.equal(ok.callback.status, 302);
  });

  test('the last-admin rule counts single sign-on admins', async () => {
    const frank = await signInThroughService(t.app, 'test', 'frank-sub');
    assert.equal(frank.callback.status, 302, frank.callback.text);
    const asFrank = client(t.app, frank.sessionToken);
    const frankId = (await asFrank.get('/api/v1/auth/me')).body.user.id;
    const admins = await asFrank.get('/api/v1/admin/users/', { query: { role: 'admin' } });
    const others = admins.body.users.filter((u: { id: number }) => u.id !== frankId);
    // Frank (an OIDC admin) counts: every other admin may be disabled.
    for (const other of others) {
      const res = await asFrank.post(`/api/v1/admin/users/${other.id}/enable`, { body: { enabled: false } });
      assert.equal(res.status, 200, `disable ${other.username}: ${res.text}`);
    }
    const disableSelf = await asFrank.post(`/api/v1/admin/users/${frankId}/enable`, { body: { enabled: false } });
    assert.equal(disableSelf.status, 409);

    // The provider drops Frank from platform-admins: the login that would leave no admin is refused.
    idp.accounts.get('frank-sub')!.groups = ['devs'];
    const sessions = await sessionCount(t);
    const refused = await signInThroughService(t.app, 'test', 'frank-sub');
    assert.equal(refused.callback.status, 409);
    assert.match(refused.callback.body.message, /last enabled admin/);
    assert.equal(refused.sessionToken, undefined);
    assert.equal(await sessionCount(t), sessions);
    assert.deepEqual((await asFrank.get('/api/v1/auth/me')).body.roles, ['admin']);

    for (const other of others) {
      const res = await asFrank.post(`/api/v1/admin/users/${other.id}/enable`, { body: { enabled: true } });
      assert.equal(res.status, 200);
    }
    const demoted = await signInThroughService(t.app, 'test', 'frank-sub');
    assert.equal(demoted.callback.status, 302, demoted.callback.text);
    assert.deepEqual((await client(t.app, demoted.sessionToken).get('/api/v1/auth/me')).body.roles, ['viewer']);
  });
});

describe('CAS_PASSWORD_LOGIN=false', () => {
  let t: TestApp;
  before(async () => {
    t = await startTestApp({ env: { CAS_PASSWORD_LOGIN: 'false' } });
  });
  after(() => t.close());

  test('only the super user may sign in with a password (break-glass); the refusal tells nothing more', async () => {
    const created = await request(t.app, 'POST', '/api/v1/admin/users/create_super_user', {
      body: { username: 'root', password: 'root-password' },
    });
    assert.equal(created.status, 201);
    const token = await login(t, { username: 'root', password: 'root-password' });
    assert.equal((await client(t.app, token).get('/api/v1/admin/users/')).status, 200);

    const user = await createUser(t, { role: 'admin' });
    const refused = await request(t.app, 'POST', '/api/v1/auth/login', {
      body: { username: user.username, password: user.password },
    });
    const wrong = await request(t.app, 'POST', '/api/v1/auth/login', {
      body: { username: 'root', password: 'not-the-password' },
    });
    const unknown = await request(t.app, 'POST', '/api/v1/auth/login', {
      body: { username: 'nobody', password: 'not-the-password' },
    });
    assert.equal(refused.status, 401);
    assert.equal(refused.headers['set-cookie'], undefined);
    assert.match(refused.body.message, /password login is turned off/);
    assert.equal(wrong.body.message, refused.body.message);
    assert.equal(unknown.body.message, refused.body.message);

    const providers = await request(t.app, 'GET', '/api/v1/auth/providers');
    assert.deepEqual(providers.body, []);
  });
});
