import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, describe, test } from 'node:test';
import { onPostgres, startTestApp, type TestApp } from '../support/app.js';
import { signInThroughService, startOidcProvider, type OidcTestProvider } from '../support/oidc-provider.js';

const PUBLIC_URL = 'http://127.0.0.1:9';
const CAS = {
  client_id: 'cas',
  client_secret: 'the-cas-client-secret',
  redirect_uris: [`${PUBLIC_URL}/api/v1/auth/oidc/test/callback`],
};

/**
 * The provider's keys are cached (by openid-client, per discovery) and fetched again when an ID
 * token names an unknown `kid`, at most once a minute. This test waits out that minute: it is slow
 * on purpose (about 65 s), and runs on SQLite only: nothing in it depends on the database.
 */
describe('provider key rotation', { skip: onPostgres && 'database-independent: runs on SQLite only' }, () => {
  let idp: OidcTestProvider;
  let t: TestApp;
  before(async () => {
    idp = await startOidcProvider({
      clients: () => [CAS],
      accounts: [{ sub: 'alice', preferred_username: 'alice', groups: ['devs'] }],
    });
    t = await startTestApp({
      env: {
        CAS_PUBLIC_URL: PUBLIC_URL,
        CAS_OIDC_TEST_ISSUER: idp.issuer,
        CAS_OIDC_TEST_CLIENT_ID: CAS.client_id,
        CAS_OIDC_TEST_CLIENT_SECRET: CAS.client_secret,
        CAS_OIDC_TEST_ROLE_MAP: 'devs=viewer',
      },
    });
  });
  after(async () => {
    await t?.close();
    await idp?.close();
  });

  test('keys are fetched once, and again for an unknown kid once the cached copy is a minute old', async () => {
    const first = await signInThroughService(t.app, 'test', 'alice');
    assert.equal(first.callback.status, 302, first.callback.text);
    const fetchedAt = Date.now();
    assert.equal(idp.jwksFetches, 1);
    const second = await signInThroughService(t.app, 'test', 'alice');
    assert.equal(second.callback.status, 302, second.callback.text);
    assert.equal(idp.jwksFetches, 1, 'the cached keys are used');

    idp.rotateKeys();
    // Within a minute of the last fetch an unknown kid is refused without fetching (a forged kid
    // cannot make the service hammer the provider).
    const early = await signInThroughService(t.app, 'test', 'alice');
    assert.equal(early.callback.status, 401, early.callback.text);
    assert.match(early.callback.body.message, /no applicable keys/);
    assert.equal(idp.jwksFetches, 1);

    await sleep(Math.max(0, fetchedAt + 61_000 - Date.now()));
    const later = await signInThroughService(t.app, 'test', 'alice');
    assert.equal(later.callback.status, 302, later.callback.text);
    assert.equal(idp.jwksFetches, 2, 'the new key was fetched once');
  });
});
