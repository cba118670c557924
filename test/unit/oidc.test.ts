import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { externalUserFrom, rolesFor } from '../../src/auth/oidc/claims.js';
import { safeRedirect, SignInStateBox } from '../../src/auth/oidc/sign-in-state.js';
import { ConfigError, loadConfig } from '../../src/config/config.js';

const BASE = {
  CAS_PUBLIC_URL: 'https://cas.example.com',
  CAS_OIDC_CORP_ISSUER: 'https://login.example.com/realms/corp',
  CAS_OIDC_CORP_CLIENT_ID: 'cas',
  CAS_OIDC_CORP_CLIENT_SECRET: 's3cret',
};

describe('OpenID Connect configuration', () => {
  test('defaults, and several providers', () => {
    const config = loadConfig({
      ...BASE,
      CAS_OIDC_DEX_ISSUER: 'https://dex.example.com',
      CAS_OIDC_DEX_CLIENT_ID: 'cas',
      CAS_OIDC_DEX_CLIENT_SECRET: 'x',
      CAS_OIDC_DEX_ROLE_MAP: 'platform-admins=admin, devs=viewer, devs=deployer',
      CAS_OIDC_DEX_SCOPES: 'openid profile groups',
      CAS_OIDC_DEX_DISPLAY_NAME: 'GitHub via Dex',
    });
    assert.equal(config.passwordLogin, true);
    assert.equal(config.oidc.publicUrl, 'https://cas.example.com');
    assert.equal(config.oidc.timeoutSeconds, 10);
    assert.equal(config.oidc.clockToleranceSeconds, 30);
    const [corp, dex] = config.oidc.providers;
    assert.deepEqual(
      { ...corp, roleMap: corp.roleMap },
      {
        id: 'corp',
        displayName: 'corp',
        issuer: 'https://login.example.com/realms/corp',
        clientId: 'cas',
        clientSecret: 's3cret',
        scopes: ['openid', 'profile', 'email', 'groups'],
        usernameClaim: 'preferred_username',
        groupsClaim: 'groups',
        roleMap: null,
        idTokenAlg: 'RS256',
      },
    );
    assert.equal(dex.id, 'dex');
    assert.equal(dex.displayName, 'GitHub via Dex');
    assert.deepEqual(dex.scopes, ['openid', 'profile', 'groups']);
    assert.deepEqual(
      [...dex.roleMap!],
      [
        ['platform-admins', ['admin']],
        ['devs', ['viewer', 'deployer']],
      ],
    );
  });

  test('the client secret from a file', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'cas-oidc-'));
    try {
      await writeFile(join(dir, 'secret'), 'from-a-file\n');
      const env = {
        ...BASE,
        CAS_OIDC_CORP_CLIENT_SECRET: undefined,
        CAS_OIDC_CORP_CLIENT_SECRET_FILE: join(dir, 'secret'),
      };
      assert.equal(loadConfig(env).oidc.providers[0].clientSecret, 'from-a-file');
      assert.throws(() => loadConfig({ ...env, CAS_OIDC_CORP_CLIENT_SECRET: 'x' }), /not both/);
      assert.throws(
        () => loadConfig({ ...env, CAS_OIDC_CORP_CLIENT_SECRET_FILE: join(dir, 'missing') }),
        /CAS_OIDC_CORP_CLIENT_SECRET_FILE cannot be read/,
      );
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  test('bad values stop start-up with a message naming the variable', () => {
    const cases: Array<[Record<string, string | undefined>, RegExp]> = [
      [{ CAS_PUBLIC_URL: undefined }, /CAS_PUBLIC_URL is required/],
      [{ CAS_PUBLIC_URL: 'http://cas.example.com' }, /CAS_PUBLIC_URL must be an https:\/\/ URL/],
      [{ CAS_OIDC_CORP_ISSUER: 'http://login.example.com' }, /CAS_OIDC_CORP_ISSUER must be an https:\/\/ URL/],
      [{ CAS_OIDC_CORP_ISSUER: 'https://user:pw@login.example.com' }, /CAS_OIDC_CORP_ISSUER must be/],
      [{ CAS_OIDC_CORP_CLIENT_ID: undefined }, /CAS_OIDC_CORP_CLIENT_ID is required/],
      [{ CAS_OIDC_CORP_CLIENT_SECRET: undefined }, /CAS_OIDC_CORP_CLIENT_SECRET or .* is required/],
      [{ CAS_OIDC_CORP_SCOPES: 'profile email' }, /SCOPES must include openid/],
      [{ CAS_OIDC_CORP_ROLE_MAP: 'platform-admins' }, /ROLE_MAP entries must look like group=role/],
      [{ CAS_OIDC_CORP_ROLE_MAP: 'a=Admin!' }, /ROLE_MAP entries/],
      [{ CAS_OIDC_CORP_ID_TOKEN_ALG: 'none' }, /ID_TOKEN_ALG must be one of RS256/],
      [{ CAS_OIDC_CORP_ID_TOKEN_ALG: 'HS256' }, /ID_TOKEN_ALG must be one of/],
      [{ CAS_OIDC_CORP_USERNAME_CLAIM: 'a b' }, /USERNAME_CLAIM is not a valid claim name/],
      [{ CAS_OIDC_CORP_CLIENTID: 'x' }, /CAS_OIDC_CORP_CLIENTID is not a known setting/],
      [{ CAS_OIDC_OTHER_CLIENT_ID: 'x' }, /CAS_OIDC_OTHER_CLIENT_ID is set, but CAS_OIDC_OTHER_ISSUER is not/],
      [{ CAS_OIDC_TIMEOUT_SECONDS: '0' }, /CAS_OIDC_TIMEOUT_SECONDS must be an integer from 1/],
      [{ CAS_PASSWORD_LOGIN: 'maybe' }, /CAS_PASSWORD_LOGIN must be true or false/],
      [{ CAS_OIDC_A_VERY_LONG_PROVIDER_ID_THAT_IS_TOO_LONG_ISSUER: 'https://x.example' }, /provider id/],
    ];
    for (const [change, message] of cases) {
      assert.throws(
        () => loadConfig({ ...BASE, ...change }),
        (e: unknown) => e instanceof ConfigError && message.test(e.message),
        JSON.stringify(change),
      );
    }
    // http only on loopback (tests, local trials).
    assert.equal(
      loadConfig({
        ...BASE,
        CAS_PUBLIC_URL: 'http://127.0.0.1:8080',
        CAS_OIDC_CORP_ISSUER: 'http://localhost:5556/dex',
      }).oidc.providers[0].issuer,
      'http://localhost:5556/dex',
    );
    assert.equal(loadConfig({ CAS_PASSWORD_LOGIN: 'false' }).passwordLogin, false);
  });
});

describe('sign-in helpers', () => {
  test('only relative paths of the service survive as the redirect', () => {
    const cases: Array<[string | undefined, string]> = [
      [undefined, '/'],
      ['', '/'],
      ['/clusters?tab=health#top', '/clusters?tab=health#top'],
      ['/a/../b', '/b'],
      ['https://evil.example', '/'],
      ['//evil.example/path', '/'],
      ['/\\evil.example', '/'],
      ['\\\\evil.example', '/'],
      ['https:evil.example', '/'],
      ['javascript:alert(1)', '/'],
      ['/ok\r\nSet-Cookie: x=y', '/'],
      ['relative/path', '/'],
      ['/' + 'a'.repeat(3000), '/'],
      // Dot segments that the URL parser normalises into a network-path `//host` (issue 29 #2).
      ['/.//evil.example/x', '/'],
      ['/..//x', '/'],
      ['/a/..//x', '/'],
      ['/%2e%2e//x', '/'],
      ['/%2E%2E//evil.example', '/'],
      ['/.%2e//x', '/'],
      ['/./\\evil.example', '/'],
      ['/a/..\\/x', '/'],
      ['/%2e%2e/\\x', '/'],
      ['/a/./b/../c', '/a/c'],
    ];
    for (const [input, expected] of cases) assert.equal(safeRedirect(input), expected, String(input));
  });

  test('the sealed sign-in state opens only unchanged, for its provider, before it expires', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'cas-oidc-'));
    try {
      const box = new SignInStateBox({ dataDir: dir, encryptionKey: Buffer.alloc(32, 7) });
      const state = { state: 's', nonce: 'n', verifier: 'v', redirect: '/', expiresAt: Date.now() + 60_000 };
      const sealed = box.seal('corp', state);
      assert.deepEqual(box.open('corp', sealed), state);
      assert.equal(box.open('dex', sealed), null);
      assert.equal(box.open('corp', sealed.slice(0, -2) + (sealed.endsWith('AA') ? 'BB' : 'AA')), null);
      assert.equal(box.open('corp', sealed, state.expiresAt + 1), null);
      assert.equal(box.open('corp', undefined), null);
      // Another service key (another installation) cannot open it.
      const other = new SignInStateBox({ dataDir: dir, encryptionKey: Buffer.alloc(32, 8) });
      assert.equal(other.open('corp', sealed), null);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  test('claims become the user: username, name, avatar, roles from groups', () => {
    const provider = loadConfig({ ...BASE, CAS_OIDC_CORP_ROLE_MAP: 'platform-admins=admin,devs=viewer' }).oidc
      .providers[0];
    const user = externalUserFrom(provider, {
      sub: 'f:123',
      preferred_username: 'alice@example.com',
      name: '  Alice Example  ',
      picture: 'javascript:alert(1)',
      groups: ['devs', 'platform-admins', 42, 'other'],
    });
    assert.deepEqual(user, {
      provider: 'oidc:corp',
      subject: 'f:123',
      username: 'alice@example.com',
      name: 'Alice Example',
      avatarUrl: null,
      roleNames: ['admin', 'viewer'],
    });
    assert.deepEqual(rolesFor(provider, []), []);
    assert.equal(rolesFor({ roleMap: null }, ['devs']), null);
    assert.throws(() => externalUserFrom(provider, { sub: 'x' }), /sent no 'preferred_username' claim/);
    assert.throws(() => externalUserFrom(provider, { sub: 'x', preferred_username: 'ab' }), /not a valid username/);
    assert.throws(() => externalUserFrom(provider, { preferred_username: 'alice' }), /no usable subject/);
  });
});
