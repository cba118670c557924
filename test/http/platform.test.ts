import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { startTestApp, type TestApp } from '../support/app.js';
import { signedIn } from '../support/factories.js';
import { request } from '../support/http.js';

describe('request ids, errors, limits, headers', () => {
  let t: TestApp;
  let token: string;
  before(async () => {
    t = await startTestApp({ env: { CORS_ORIGINS: 'https://console.example.com' } });
    token = (await signedIn(t, 'admin')).token;
  });
  after(() => t.close());

  test('every response carries x-request-id; a well-formed one is echoed, a bad one replaced', async () => {
    const generated = await request(t.app, 'GET', '/healthz');
    assert.match(String(generated.headers['x-request-id']), /^[0-9a-f-]{36}$/);
    const echoed = await request(t.app, 'GET', '/api/v1/auth/me', { headers: { 'x-request-id': 'trace-abc.123' } });
    assert.equal(echoed.headers['x-request-id'], 'trace-abc.123');
    assert.equal(echoed.body.requestId, 'trace-abc.123', 'the error body names the same id');
    const bad = await request(t.app, 'GET', '/healthz', { headers: { 'x-request-id': 'evil\tvalue with spaces' } });
    assert.notEqual(bad.headers['x-request-id'], 'evil\tvalue with spaces');
  });

  test('malformed JSON → 400 in the error shape; unknown route → 404 in the error shape', async () => {
    const res = await request(t.app, 'POST', '/api/v1/admin/users', {
      token,
      rawBody: '{"username": ',
      headers: { 'content-type': 'application/json' },
    });
    assert.equal(res.status, 400);
    assert.deepEqual(Object.keys(res.body).sort(), ['error', 'message', 'requestId', 'statusCode']);
    // Three segments under /api/v1 are a resource route; four match nothing.
    const missing = await request(t.app, 'GET', '/api/v1/no/such/route/here', { token });
    assert.equal(missing.status, 404);
    assert.equal(missing.body.error, 'Not Found');
    // Under the service's own paths, an unknown route is a 404 too, not a resource call.
    for (const url of ['/api/v1/admin/users/1/nothing', '/api/v1/auth/nothing/here', '/api/v1/admin/nothing']) {
      const res = await request(t.app, 'GET', url, { token });
      assert.equal(res.status, 404, url);
    }
  });

  test('bodies over 1 MiB on admin routes → 413, nothing stored', async () => {
    const big = { username: 'biggy', password: 'big-password', name: 'x'.repeat(1024 * 1024 + 10) };
    const res = await request(t.app, 'POST', '/api/v1/admin/users', { token, body: big });
    assert.equal(res.status, 413);
    assert.equal(res.body.statusCode, 413);
    const users = await request(t.app, 'GET', '/api/v1/admin/users', { token, query: { search: 'biggy' } });
    assert.equal(users.body.total, 0);
  });

  test('a prototype-pollution body is inert', async () => {
    const res = await request(t.app, 'POST', '/api/v1/admin/users', {
      token,
      rawBody: '{"username":"proto","password":"proto-password","__proto__":{"isAdmin":true}}',
      headers: { 'content-type': 'application/json' },
    });
    assert.equal(res.status, 201);
    assert.equal(({} as Record<string, unknown>).isAdmin, undefined);
  });

  test('security headers are set', async () => {
    const res = await request(t.app, 'GET', '/healthz');
    assert.equal(res.headers['x-content-type-options'], 'nosniff');
    assert.match(String(res.headers['content-security-policy']), /default-src 'self'/);
    assert.match(String(res.headers['content-security-policy']), /frame-ancestors 'none'/);
  });

  test('CORS: the allowed origin gets credentials; another origin gets no CORS headers', async () => {
    const preflight = await request(t.app, 'OPTIONS', '/api/v1/auth/me', {
      headers: { origin: 'https://console.example.com', 'access-control-request-method': 'GET' },
    });
    assert.equal(preflight.headers['access-control-allow-origin'], 'https://console.example.com');
    assert.equal(preflight.headers['access-control-allow-credentials'], 'true');
    // Without it Chromium preflights again after 5 s, i.e. before nearly every call of a console.
    assert.equal(preflight.headers['access-control-max-age'], '600');
    const other = await request(t.app, 'GET', '/healthz', { headers: { origin: 'https://evil.example.com' } });
    assert.equal(other.headers['access-control-allow-origin'], undefined);
  });

  test('CAS_CORS_MAX_AGE_SECONDS sets how long a browser may keep a preflight', async () => {
    const other = await startTestApp({
      env: { CORS_ORIGINS: 'https://console.example.com', CAS_CORS_MAX_AGE_SECONDS: '7200' },
    });
    try {
      const preflight = await request(other.app, 'OPTIONS', '/api/v1/configmaps/default', {
        headers: {
          origin: 'https://console.example.com',
          'access-control-request-method': 'GET',
          'access-control-request-headers': 'authorization,x-cluster-name',
        },
      });
      assert.equal(preflight.status, 204);
      assert.equal(preflight.headers['access-control-max-age'], '7200');
    } finally {
      await other.close();
    }
  });

  test('readyz reports the database', async () => {
    const res = await request(t.app, 'GET', '/readyz');
    assert.equal(res.status, 200);
    assert.equal(res.body.status, 'ok');
    assert.equal(res.body.info.database.status, 'up');
  });
});
