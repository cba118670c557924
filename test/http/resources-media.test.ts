// What the resource routes answer in, decided before any cluster is asked (test/e2e/resources-editing.test.ts
// has the answers themselves, on a real cluster).
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { startTestApp, type TestApp } from '../support/app.js';
import { signedIn } from '../support/factories.js';
import { request } from '../support/http.js';

describe('resource routes: Accept', () => {
  let t: TestApp;
  let token: string;
  before(async () => {
    t = await startTestApp();
    token = (await signedIn(t, 'admin')).token;
  });
  after(() => t.close());

  const call = (method: string, path: string, accept: string, query?: Record<string, string>, body?: unknown) =>
    request(t.app, method, `/api/v1/${path}`, {
      token,
      headers: { 'x-cluster-name': 'nowhere', accept },
      query,
      body,
    });

  test('a read whose Accept names neither JSON nor YAML is a 406 naming both, before any cluster is asked', async () => {
    for (const [path, accept] of [
      ['configmaps/shop/settings', 'text/plain'],
      ['configmaps/shop', 'text/html, application/xml;q=0.9'],
      ['configmaps/shop', 'application/json;q=0'],
    ]) {
      const res = await call('GET', path, accept);
      assert.equal(res.status, 406, `${path} ${accept}: ${res.text}`);
      assert.match(res.body.message, /Accept: application\/json or application\/yaml/);
      assert.equal(res.body.error, 'Not Acceptable');
    }
    // Acceptable ones get as far as the cluster (which does not exist here).
    for (const accept of ['application/yaml', '*/*', 'application/json', 'text/html,*/*;q=0.8']) {
      assert.equal((await call('GET', 'configmaps/shop/settings', accept)).status, 404, accept);
    }
    // A watch keeps its own formats.
    assert.equal((await call('GET', 'configmaps/shop', 'text/event-stream', { watch: 'true' })).status, 404);
  });

  test('Accept: text/x-diff on a write that is not a dry run is a 400 naming dryRun=All', async () => {
    for (const method of ['PUT', 'PATCH']) {
      const res = await call(method, 'configmaps/shop/settings', 'text/x-diff', undefined, {
        metadata: { name: 'settings', resourceVersion: '1' },
      });
      assert.equal(res.status, 400, res.text);
      assert.match(res.body.message.join(';'), /text\/x-diff answers a dry run only: add dryRun=All/);
    }
    const dryRun = await call('PUT', 'configmaps/shop/settings', 'text/x-diff', { dryRun: 'All' }, { metadata: {} });
    assert.equal(dryRun.status, 404, 'a dry run goes on to the cluster');
  });
});
