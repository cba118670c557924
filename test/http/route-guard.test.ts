import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { ACCESS_ROUTE_CONFIG } from '../../src/auth/auth.decorators.js';
import { HttpEdge } from '../../src/http/edge.js';
import { startTestApp, type TestApp } from '../support/app.js';
import { request } from '../support/http.js';

/** Routes callable without credentials; everything else must answer 401 to an anonymous caller. */
const PUBLIC_ROUTES = new Set([
  'POST /api/v1/admin/users/create_super_user',
  'POST /api/v1/auth/login',
  'GET /api/v1/auth/providers',
  'GET /api/v1/auth/oidc/:provider/login',
  'GET /api/v1/auth/oidc/:provider/callback',
  'GET /healthz',
  'GET /readyz',
  'GET /metrics',
]);
/** Public only until the first user exists (the tests create one first). */
const PUBLIC_UNTIL_FIRST_USER = new Set(['POST /api/v1/admin/clusters/import']);

interface Route {
  method: string;
  path: string;
  access: unknown;
}

/** The routes Nest serves (the documentation's own routes and Fastify's automatic HEAD routes left out). */
function registeredRoutes(t: TestApp): Route[] {
  return t.app
    .get(HttpEdge)
    .routes.filter((r) => r.method !== 'HEAD' && !r.url.startsWith('/api/docs'))
    .map((r) => ({ method: r.method, path: r.url, access: r.config[ACCESS_ROUTE_CONFIG] }));
}

describe('deny by default', () => {
  let t: TestApp;
  before(async () => {
    t = await startTestApp();
    const res = await request(t.app, 'POST', '/api/v1/admin/users/create_super_user', {
      body: { username: 'root', password: 'root-password' },
    });
    assert.equal(res.status, 201);
  });
  after(() => t.close());

  test('every route declares who may call it', () => {
    const routes = registeredRoutes(t);
    assert.ok(routes.length >= 17, `found ${routes.length} routes`);
    const undeclared = routes.filter((r) => !r.access).map((r) => `${r.method} ${r.path}`);
    assert.deepEqual(undeclared, []);
  });

  test('every route without credentials → 401, except the public ones', async () => {
    const routes = registeredRoutes(t);
    const seenPublic = new Set<string>();
    for (const route of routes) {
      const label = `${route.method} ${route.path}`;
      const url = route.path.replace(/:[A-Za-z]+\*?/g, '1');
      const res = await request(t.app, route.method, url, {
        body: ['POST', 'PUT', 'PATCH'].includes(route.method) ? {} : undefined,
      });
      if (PUBLIC_ROUTES.has(label)) {
        seenPublic.add(label);
        assert.notEqual(res.status, 401, label);
        assert.notEqual(res.status, 403, label);
      } else if (route.path.startsWith('/api/v1/clusters/:name/k8s/')) {
        // The Kubernetes API path refuses as the apiserver does: a Status (kubectl prints its message).
        assert.equal(res.status, 401, `${label} answered ${res.status}`);
        assert.deepEqual([res.body.kind, res.body.reason, res.body.code], ['Status', 'Unauthorized', 401], label);
        assert.match(res.body.message, /^authentication required: send an API key or token in Authorization/);
      } else {
        assert.equal(res.status, 401, `${label} answered ${res.status}`);
        assert.equal(res.body.statusCode, 401);
        assert.equal(res.body.message, 'authentication required');
        assert.ok(PUBLIC_UNTIL_FIRST_USER.has(label) || res.body.requestId);
      }
    }
    assert.deepEqual([...seenPublic].sort(), [...PUBLIC_ROUTES].sort());
  });

  test('the documentation is public', async () => {
    assert.equal((await request(t.app, 'GET', '/api/docs/openapi.json')).status, 200);
    const ui = await request(t.app, 'GET', '/api/docs');
    assert.equal(ui.status, 200);
    assert.match(ui.text, /swagger/i);
  });
});
