// Issue 9, findings 4, 5, 8, 10 and 12: input that used to cost seconds, crash with a 500, slip
// past a limit, or be read loosely.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { startTestApp, type TestApp } from '../support/app.js';
import { signedIn } from '../support/factories.js';
import { request, type Response } from '../support/http.js';

/** The service's error shape, with the request id in the body and the header. */
function assertServiceError(res: Response, status: number, label = ''): void {
  assert.equal(res.status, status, `${label}: ${res.text.slice(0, 300)}`);
  assert.deepEqual(Object.keys(res.body ?? {}).sort(), ['error', 'message', 'requestId', 'statusCode'], label);
  assert.equal(res.body.statusCode, status, label);
  assert.ok(res.headers['x-request-id'], `${label}: x-request-id header`);
  assert.equal(res.body.requestId, res.headers['x-request-id'], label);
}

const nested = (depth: number) => '{"a":'.repeat(depth) + '1' + '}'.repeat(depth);
const nestedArray = (depth: number) => '['.repeat(depth) + ']'.repeat(depth);
const json = { 'content-type': 'application/json' };

describe('hardening: input', () => {
  let t: TestApp;
  let token: string;
  let userId: number;
  before(async () => {
    t = await startTestApp();
    const admin = await signedIn(t, 'admin');
    token = admin.token;
    userId = admin.id;
  });
  after(() => t.close());

  test('finding 4: a 100,000-character URL is refused at once, with one message for the field', async () => {
    const long = 'http://a' + 'a'.repeat(100_000) + ' ';
    for (const [method, url, body, field] of [
      ['PUT', `/api/v1/admin/users/${userId}`, { avatar_url: long }, 'avatar_url'],
      ['POST', '/api/v1/admin/clusters', { name: 'c', inCluster: true, metricsURL: long }, 'metricsURL'],
    ] as const) {
      const started = performance.now();
      const res = await request(t.app, method, url, { token, body });
      const ms = performance.now() - started;
      assertServiceError(res, 400, field);
      assert.deepEqual(res.body.message, [`${field} must be an http(s) URL of at most 2048 characters, or ""`]);
      // Before: the quadratic pattern held the event loop for seconds on this value.
      assert.ok(ms < 1500, `${field} took ${Math.round(ms)} ms`);
    }
  });

  test('finding 4: URLs are still checked properly', async () => {
    const put = (avatar_url: string) =>
      request(t.app, 'PUT', `/api/v1/admin/users/${userId}`, { token, body: { avatar_url } });
    for (const ok of ['https://example.com/me.png', 'http://10.0.0.1:8080/a?b=c', '']) {
      assert.equal((await put(ok)).status, 200, ok);
    }
    for (const bad of [
      'ftp://example.com/x',
      'http://',
      'http://exa mple.com/',
      'example.com',
      'https://x/' + 'a'.repeat(2040),
    ]) {
      assert.equal((await put(bad)).status, 400, bad);
    }
  });

  test('validation stops at the first problem of each field', async () => {
    const res = await request(t.app, 'POST', '/api/v1/admin/apikeys', {
      token,
      body: { name: ' ' + 'x'.repeat(200) + ' ', role: 'viewer' },
    });
    assertServiceError(res, 400);
    assert.equal(res.body.message.length, 1, JSON.stringify(res.body.message));
  });

  test('finding 5: JSON nested 2,000 deep is a 400 on every route that reads a body, never a 500', async () => {
    const cases: Array<[string, string, string | undefined]> = [
      ['POST', '/api/v1/auth/login', undefined],
      ['POST', '/api/v1/admin/users/create_super_user', undefined],
      ['POST', '/api/v1/admin/clusters', token],
      ['POST', '/api/v1/admin/users', token],
      ['POST', '/api/v1/configmaps/default', token],
      ['PATCH', '/api/v1/configmaps/default/x', token],
      ['PUT', '/api/v1/configmaps/default/x', token],
    ];
    for (const [method, url, auth] of cases) {
      for (const body of [nested(2000), nestedArray(2000)]) {
        const res = await request(t.app, method, url, {
          token: auth,
          rawBody: body,
          headers: { ...json, 'x-cluster-name': 'nowhere' },
        });
        assertServiceError(res, 400, `${method} ${url}`);
        assert.match(String(res.body.message), /nested deeper than 64 levels/);
      }
    }
  });

  test('finding 5: nesting up to the limit is parsed as usual', async () => {
    const res = await request(t.app, 'POST', '/api/v1/configmaps/default', {
      token,
      rawBody: nested(63),
      headers: { ...json, 'x-cluster-name': 'nowhere' },
    });
    assertServiceError(res, 404);
    assert.match(res.body.message, /cluster 'nowhere' not found/);
  });

  test('finding 8: the 1 MiB limit of admin and auth routes holds however the path is spelt', async () => {
    const big = JSON.stringify({ username: 'x', password: 'y'.repeat(2 * 1024 * 1024) });
    for (const url of ['/api/v1/auth/login', '/api/v1/%61uth/login', '/api/v1/auth/%6Cogin', '/api/v1/admin/users/']) {
      const res = await request(t.app, 'POST', url, { token, rawBody: big, headers: json });
      assertServiceError(res, 413, url);
    }
    const encoded = await request(t.app, 'POST', '/api/v1/%61dmin/users', { token, rawBody: big, headers: json });
    assertServiceError(encoded, 413, 'encoded admin');
  });

  test('finding 8: resource routes take up to 10 MiB, not more', async () => {
    const object = (size: number) => JSON.stringify({ metadata: { name: 'x' }, data: { a: 'x'.repeat(size) } });
    const headers = { ...json, 'x-cluster-name': 'nowhere' };
    const fits = await request(t.app, 'POST', '/api/v1/configmaps/default', {
      token,
      rawBody: object(5 * 1024 * 1024),
      headers,
    });
    assertServiceError(fits, 404, 'a 5 MiB object reaches the cluster lookup');
    const tooBig = await request(t.app, 'POST', '/api/v1/configmaps/default', {
      token,
      rawBody: object(11 * 1024 * 1024),
      headers,
    });
    assertServiceError(tooBig, 413, 'an 11 MiB object');
  });

  test('finding 10: names of up to 253 characters reach the route; longer segments are a 414 in the service shape', async () => {
    for (const length of [101, 200, 253]) {
      const res = await request(t.app, 'GET', `/api/v1/configmaps/default/${'n'.repeat(length)}`, { token });
      assertServiceError(res, 400, `name of ${length}`);
      assert.match(String(res.body.message), /x-cluster-name header is required/);
    }
    const encoded = await request(t.app, 'GET', `/api/v1/configmaps/default/${'%3A'.repeat(253)}`, {
      token,
      headers: { 'x-cluster-name': 'nowhere' },
    });
    assertServiceError(encoded, 404, 'a name of 253 encoded characters');
    const tooLong = await request(t.app, 'GET', `/api/v1/configmaps/default/${'n'.repeat(2000)}`, { token });
    assertServiceError(tooLong, 414, 'a 2000-character segment');
  });

  test('finding 10: every framework-level error has the service shape and x-request-id', async () => {
    assertServiceError(await request(t.app, 'GET', '/api/v1/configmaps/%E0%A4%A', { token }), 400, 'bad URL');
    assertServiceError(await request(t.app, 'GET', '/api/v1/no/such/route/at/all', { token }), 404, 'no route');
    assertServiceError(
      await request(t.app, 'POST', '/api/v1/admin/users', {
        token,
        rawBody: 'username=x',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
      }),
      415,
      'form body',
    );
    assertServiceError(
      await request(t.app, 'POST', '/api/v1/admin/users', { token, rawBody: '{"a":', headers: json }),
      400,
      'bad JSON',
    );
  });

  test('finding 12: ids are decimal integers; 0x4 and " 1" are refused and delete nothing', async () => {
    const ids: number[] = [];
    for (let i = 0; i < 5; i++) {
      const res = await request(t.app, 'POST', '/api/v1/admin/apikeys', {
        token,
        body: { name: `key-${i}`, role: 'viewer' },
      });
      assert.equal(res.status, 201);
      ids.push(res.body.id);
    }
    const target = ids[4];
    for (const spelling of [
      `0x${target.toString(16)}`,
      `%20${target}`,
      `${target}.0`,
      `+${target}`,
      `0${target}`,
      `${target}e0`,
    ]) {
      const res = await request(t.app, 'DELETE', `/api/v1/admin/apikeys/${spelling}`, { token });
      assertServiceError(res, 400, spelling);
    }
    const keys = await request(t.app, 'GET', '/api/v1/admin/apikeys', { token });
    assert.ok(
      keys.body.some((k: { id: number }) => k.id === target),
      'the key is still there',
    );
    assert.equal((await request(t.app, 'DELETE', `/api/v1/admin/apikeys/${target}`, { token })).status, 200);
  });

  test('finding 12: an unknown query parameter is a 400 naming it, on routes with and without query parameters', async () => {
    const before = (await request(t.app, 'GET', '/api/v1/admin/apikeys', { token })).body.length;
    const created = await request(t.app, 'POST', '/api/v1/admin/apikeys?bogus=1', {
      token,
      body: { name: 'bogus-key', role: 'viewer' },
    });
    assertServiceError(created, 400, 'POST apikeys?bogus');
    assert.match(String(created.body.message), /'bogus'/);
    assert.equal((await request(t.app, 'GET', '/api/v1/admin/apikeys', { token })).body.length, before);
    for (const url of ['/api/v1/auth/me?x=1', '/api/v1/admin/users?bogus=1', '/api/v1/configmaps/default?bogus=1']) {
      const res = await request(t.app, 'GET', url, { token, headers: { 'x-cluster-name': 'nowhere' } });
      assertServiceError(res, 400, url);
      assert.match(String(res.body.message), /bogus|'x'/, url);
    }
  });
});
