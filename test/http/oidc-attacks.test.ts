import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, describe, test } from 'node:test';
import { startTestApp, type TestApp } from '../support/app.js';
import { client, request } from '../support/http.js';
import {
  callService,
  cookieValue,
  exchangeCode,
  pkcePair,
  signInAt,
  signInThroughService,
  startOidcProvider,
  type OidcTestProvider,
  type TestClient,
} from '../support/oidc-provider.js';

/**
 * Every attack on the sign-in is played with tokens the real provider issued: the provider is
 * configured (another key, HS256, one-second ID tokens, a second client) or a real token response
 * is swapped in on the way back (as a compromised path would), never hand-minted.
 */
const PUBLIC_URL = 'http://127.0.0.1:9';
const CAS: TestClient = {
  client_id: 'cas',
  client_secret: 'the-cas-client-secret',
  redirect_uris: [`${PUBLIC_URL}/api/v1/auth/oidc/test/callback`],
};
const OTHER: TestClient = {
  client_id: 'another-app',
  client_secret: 'another-app-secret',
  redirect_uris: ['http://127.0.0.1:9/another-app/callback'],
};
const CAS_HS: TestClient = {
  client_id: 'cas-hs',
  client_secret: 'a-shared-secret-that-is-long-enough-for-hs256!!',
  redirect_uris: [`${PUBLIC_URL}/api/v1/auth/oidc/hs/callback`],
  id_token_signed_response_alg: 'HS256',
};

async function sessionCount(t: TestApp): Promise<number> {
  const rows: Array<{ n: number | string }> = await t.dataSource.query('SELECT COUNT(*) AS n FROM sessions');
  return Number(rows[0].n);
}

async function userCount(t: TestApp): Promise<number> {
  const rows: Array<{ n: number | string }> = await t.dataSource.query('SELECT COUNT(*) AS n FROM users');
  return Number(rows[0].n);
}

/** A real authorization and code exchange the attacker makes itself, with the victim's nonce. */
async function realTokenResponse(idp: OidcTestProvider, as: TestClient, login: string, nonce: string): Promise<string> {
  const { verifier, challenge } = pkcePair();
  const url = new URL(`${idp.issuer}/auth`);
  url.search = new URLSearchParams({
    client_id: as.client_id,
    redirect_uri: as.redirect_uris[0],
    response_type: 'code',
    scope: 'openid profile groups',
    state: 'attacker-state',
    nonce,
    code_challenge: challenge,
    code_challenge_method: 'S256',
  }).toString();
  const back = new URL(await signInAt(url.href, login));
  const code = back.searchParams.get('code');
  assert.ok(code, `the provider issued a code: ${back.href}`);
  return exchangeCode(idp, as, code, verifier);
}

describe('attacks on single sign-on are refused with a clear 4xx and no session', () => {
  let idp: OidcTestProvider;
  let t: TestApp;

  before(async () => {
    idp = await startOidcProvider({
      clients: () => [CAS, OTHER, CAS_HS],
      accounts: [
        { sub: 'mallory', preferred_username: 'mallory', groups: ['platform-admins'] },
        { sub: 'shorty', preferred_username: 'shorty', groups: ['platform-admins'] },
      ],
      shortLived: ['shorty'],
    });
    t = await startTestApp({
      env: {
        CAS_PUBLIC_URL: PUBLIC_URL,
        CAS_OIDC_TEST_ISSUER: idp.issuer,
        CAS_OIDC_TEST_CLIENT_ID: CAS.client_id,
        CAS_OIDC_TEST_CLIENT_SECRET: CAS.client_secret,
        CAS_OIDC_TEST_ROLE_MAP: 'platform-admins=admin',
        CAS_OIDC_HS_ISSUER: idp.issuer,
        CAS_OIDC_HS_CLIENT_ID: CAS_HS.client_id,
        CAS_OIDC_HS_CLIENT_SECRET: CAS_HS.client_secret,
        CAS_OIDC_HS_ROLE_MAP: 'platform-admins=admin',
        CAS_OIDC_CLOCK_TOLERANCE_SECONDS: '1',
      },
    });
  });
  after(async () => {
    await t?.close();
    await idp?.close();
  });

  /** Asserts the refusal: the status, the message, no session cookie, no session row, no user created. */
  async function refused(
    attempt: () => Promise<{ callback: { status: number; body: any; headers: any; text: string } }>,
    status: number,
    message: RegExp,
  ) {
    const sessions = await sessionCount(t);
    const users = await userCount(t);
    const { callback } = await attempt();
    assert.equal(callback.status, status, callback.text);
    assert.match(callback.body.message, message);
    assert.deepEqual(Object.keys(callback.body).sort(), ['error', 'message', 'requestId', 'statusCode']);
    assert.ok(callback.headers['x-request-id']);
    assert.equal(cookieValue(callback as never, 'cas_session'), undefined, 'no session cookie');
    assert.equal(await sessionCount(t), sessions, 'no session stored');
    assert.equal(await userCount(t), users, 'no user created');
    return callback;
  }

  test('a tampered state: 400, and the code is never redeemed', async () => {
    const tokenRequests = idp.tokenRequests;
    await refused(
      () =>
        signInThroughService(t.app, 'test', 'mallory', {
          tamperCallback: (url) => url.searchParams.set('state', url.searchParams.get('state') + 'x'),
        }),
      400,
      /state parameter does not match/,
    );
    assert.equal(idp.tokenRequests, tokenRequests);
  });

  test('a missing, altered or other-provider sign-in cookie: 400', async () => {
    const s = await signInThroughService(t.app, 'test', 'mallory', {
      tamperCallback: (url) => url.searchParams.set('state', 'not-sent'),
    });
    const [name, value] = s.stateCookie.split('=');
    const flipped = value.slice(0, -3) + (value.at(-3) === 'A' ? 'B' : 'A') + value.slice(-2);
    const url = new URL(s.callbackUrl);
    url.searchParams.set('state', s.authorizationUrl.searchParams.get('state')!);
    for (const cookie of [undefined, `${name}=${flipped}`]) {
      await refused(
        async () => ({ callback: await callService(t.app, url, cookie) }),
        400,
        /no sign-in with provider 'test' is in progress/,
      );
    }
    // A cookie sealed for provider 'test' does not open for provider 'hs'.
    const hsUrl = new URL(url.href.replace('/oidc/test/', '/oidc/hs/'));
    await refused(
      async () => ({ callback: await callService(t.app, hsUrl, `cas_oidc_hs=${value}`) }),
      400,
      /no sign-in with provider 'hs' is in progress/,
    );
  });

  test('a replayed code: the first use signs in, the replay is 401', async () => {
    const first = await signInThroughService(t.app, 'test', 'mallory');
    assert.equal(first.callback.status, 302, first.callback.text);
    assert.ok(first.sessionToken);
    const users = await userCount(t);
    await refused(
      async () => ({ callback: await callService(t.app, first.callbackUrl, first.stateCookie) }),
      401,
      /refused the authorization code \(invalid_grant/,
    );
    assert.equal(await userCount(t), users);
  });

  test('a wrong nonce (the authorization request was altered to carry another): 401', async () => {
    await refused(
      () =>
        signInThroughService(t.app, 'test', 'mallory', {
          tamperAuthorization: (url) => url.searchParams.set('nonce', 'a-nonce-of-the-attackers-choosing'),
        }),
      401,
      /ID token from provider 'test' was refused.*nonce/,
    );
  });

  test('an ID token signed by another key (an impostor with the same issuer and kid): 401', async () => {
    idp.useImpostor(true);
    try {
      await refused(
        () => signInThroughService(t.app, 'test', 'mallory'),
        401,
        /ID token from provider 'test' was refused.*signature/i,
      );
    } finally {
      idp.useImpostor(false);
    }
  });

  test('an ID token the provider signed with HS256 (the client secret) is outside the allowlist: 401', async () => {
    await refused(
      () => signInThroughService(t.app, 'hs', 'mallory'),
      401,
      /ID token from provider 'hs' was refused.*"alg"/,
    );
  });

  test('alg "none": a real token response whose ID token was stripped of its signature on the way: 401', async () => {
    await refused(
      () =>
        signInThroughService(t.app, 'test', 'mallory', {
          beforeCallback: async (authorizationUrl) => {
            const body = JSON.parse(
              await realTokenResponse(idp, CAS, 'mallory', authorizationUrl.searchParams.get('nonce')!),
            );
            const [, payload] = body.id_token.split('.');
            const header = Buffer.from(JSON.stringify({ alg: 'none', typ: 'JWT' })).toString('base64url');
            idp.replaceNextTokenResponse(JSON.stringify({ ...body, id_token: `${header}.${payload}.` }));
          },
        }),
      401,
      /ID token from provider 'test' was refused.*"alg"/,
    );
  });

  test('an expired ID token (a real one, issued earlier, replayed): 401', async () => {
    await refused(
      () =>
        signInThroughService(t.app, 'test', 'mallory', {
          beforeCallback: async (authorizationUrl) => {
            const body = await realTokenResponse(idp, CAS, 'shorty', authorizationUrl.searchParams.get('nonce')!);
            // It lives one second; the service allows one second of clock difference.
            await sleep(3000);
            idp.replaceNextTokenResponse(body);
          },
        }),
      401,
      /ID token from provider 'test' was refused.*(exp|timestamp)/,
    );
  });

  test('an ID token for another client (wrong audience), swapped in on the way back: 401', async () => {
    await refused(
      () =>
        signInThroughService(t.app, 'test', 'mallory', {
          beforeCallback: async (authorizationUrl) => {
            const body = await realTokenResponse(idp, OTHER, 'mallory', authorizationUrl.searchParams.get('nonce')!);
            assert.equal(
              JSON.parse(Buffer.from(JSON.parse(body).id_token.split('.')[1], 'base64url').toString()).aud,
              OTHER.client_id,
            );
            idp.replaceNextTokenResponse(body);
          },
        }),
      401,
      /ID token from provider 'test' was refused.*aud/,
    );
  });

  test('the provider answering with an error: 401 naming it', async () => {
    const login = await request(t.app, 'GET', '/api/v1/auth/oidc/test/login');
    const state = new URL(String(login.headers.location)).searchParams.get('state')!;
    const cookie = `cas_oidc_test=${cookieValue(login, 'cas_oidc_test')}`;
    const url = new URL(`${PUBLIC_URL}/api/v1/auth/oidc/test/callback`);
    url.search = new URLSearchParams({
      error: 'access_denied',
      error_description: 'End-User aborted',
      state,
    }).toString();
    await refused(
      async () => ({ callback: await callService(t.app, url, cookie) }),
      401,
      /refused the sign-in \(access_denied: End-User aborted\)/,
    );
  });

  test('redirect to another site falls back to / (the sign-in itself is genuine)', async () => {
    for (const redirect of [
      'https://evil.example',
      '//evil.example/x',
      '/\\evil.example',
      'https:evil.example',
      'javascript:alert(1)',
      // Dot segments the URL parser normalises into `//host` (issue 29 #2).
      '/.//evil.example/x',
      '/..//evil.example',
      '/a/..//evil.example',
      '/%2e%2e//evil.example',
      '/./\\evil.example',
    ]) {
      const s = await signInThroughService(t.app, 'test', 'mallory', { redirect });
      assert.equal(s.callback.status, 302, s.callback.text);
      assert.equal(s.callback.headers.location, '/', `redirect=${redirect}`);
      assert.equal(new URL(String(s.login.headers.location)).origin, idp.issuer);
    }
  });

  test('control: the same person signs in normally, as an admin', async () => {
    const s = await signInThroughService(t.app, 'test', 'mallory', { redirect: '/after' });
    assert.equal(s.callback.status, 302, s.callback.text);
    assert.equal(s.callback.headers.location, '/after');
    assert.deepEqual((await client(t.app, s.sessionToken).get('/api/v1/auth/me')).body.roles, ['admin']);
  });
});
