// `?cluster=` names the target cluster wherever `x-cluster-name` does (EventSource and links cannot send
// headers); the header wins when both are sent. No cluster is registered here: a 404 naming the cluster
// shows which name the route went on with, before anything reached a cluster.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, describe, test } from 'node:test';
import { startTestApp, type TestApp } from '../support/app.js';
import { signedIn } from '../support/factories.js';
import { request } from '../support/http.js';

/** One call of each kind of route that takes `x-cluster-name`. */
const ROUTES: Array<[method: string, url: string, body?: unknown]> = [
  ['GET', '/api/v1/configmaps/default'],
  ['GET', '/api/v1/configmaps/default?watch=true'],
  ['GET', '/api/v1/configmaps/default?page=1&size=10'],
  ['GET', '/api/v1/configmaps/default/one'],
  ['GET', '/api/v1/configmaps/default/one/events'],
  ['GET', '/api/v1/deployments.apps/default/web/scale'],
  ['POST', '/api/v1/configmaps/default', { metadata: { name: 'one' } }],
  ['PUT', '/api/v1/configmaps/default/one', { metadata: { name: 'one' } }],
  ['DELETE', '/api/v1/configmaps/default/one'],
  ['GET', '/api/v1/pods/default/web-0/log'],
  ['POST', '/api/v1/apply', { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'one', namespace: 'default' } }],
  ['GET', '/api/v1/metrics/query?query=up'],
  ['GET', '/api/v1/metrics/pods/default/web-0'],
  ['GET', '/api/v1/metrics/nodes/node-1'],
];

const withQuery = (url: string, query: string) => `${url}${url.includes('?') ? '&' : '?'}${query}`;

describe('?cluster= in place of x-cluster-name', () => {
  let t: TestApp;
  let token: string;
  before(async () => {
    t = await startTestApp();
    token = (await signedIn(t, 'admin')).token;
  });
  after(() => t.close());

  test('every route that takes x-cluster-name goes on with the cluster ?cluster= names', async () => {
    for (const [method, url, body] of ROUTES) {
      const res = await request(t.app, method, withQuery(url, 'cluster=from-query'), { token, body });
      assert.equal(res.status, 404, `${method} ${url}: ${res.text}`);
      assert.match(String(res.body.message), /cluster 'from-query' not found/, `${method} ${url}`);
    }
  });

  test('the header wins when both are sent', async () => {
    for (const [method, url, body] of ROUTES) {
      const res = await request(t.app, method, withQuery(url, 'cluster=from-query'), {
        token,
        body,
        headers: { 'x-cluster-name': 'from-header' },
      });
      assert.equal(res.status, 404, `${method} ${url}: ${res.text}`);
      assert.match(String(res.body.message), /cluster 'from-header' not found/, `${method} ${url}`);
    }
  });

  test('a repeated, empty or over-long ?cluster= is a 400 naming it; neither one is a 400 asking for it', async () => {
    const url = '/api/v1/configmaps/default';
    for (const query of ['cluster=a&cluster=b', 'cluster=', `cluster=${'x'.repeat(254)}`, 'cluster=a%20b']) {
      const res = await request(t.app, 'GET', `${url}?${query}`, { token });
      assert.equal(res.status, 400, `${query}: ${res.text}`);
      assert.match(String(res.body.message), /x-cluster-name|cluster/, query);
    }
    const none = await request(t.app, 'GET', url, { token });
    assert.equal(none.status, 400);
    assert.match(String(none.body.message), /x-cluster-name header is required.*query parameter cluster/);
  });

  test('a route that takes no cluster still refuses ?cluster=', async () => {
    const res = await request(t.app, 'GET', '/api/v1/auth/me?cluster=x', { token });
    assert.equal(res.status, 400);
    assert.match(String(res.body.message), /'cluster' is not accepted/);
  });

  test('openapi.json documents the query parameter on every operation that takes the header', () => {
    const document = JSON.parse(readFileSync('openapi.json', 'utf8')) as {
      paths: Record<string, Record<string, { operationId: string; parameters?: Array<{ in: string; name: string }> }>>;
    };
    const missing: string[] = [];
    let count = 0;
    for (const item of Object.values(document.paths)) {
      for (const operation of Object.values(item)) {
        const parameters = operation.parameters ?? [];
        if (!parameters.some((p) => p.in === 'header' && p.name === 'x-cluster-name')) continue;
        count++;
        if (!parameters.some((p) => p.in === 'query' && p.name === 'cluster')) missing.push(operation.operationId);
      }
    }
    assert.ok(count >= 20, `${count} operations take x-cluster-name`);
    assert.deepEqual(missing, []);
  });
});
