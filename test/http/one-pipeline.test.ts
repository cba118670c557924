import assert from 'node:assert/strict';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { ACCESS_ROUTE_CONFIG } from '../../src/auth/auth.decorators.js';
import { AuthGuard } from '../../src/auth/auth.guard.js';
import { HttpEdge } from '../../src/http/edge.js';
import { startTestApp, type TestApp } from '../support/app.js';
import { signedIn } from '../support/factories.js';
import { request } from '../support/http.js';

/** The repository's root, from build/test/http. */
const ROOT = join(import.meta.dirname, '..', '..', '..');

function sources(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return name === 'generated' ? [] : sources(path);
    return /\.(ts|mjs)$/.test(name) ? [path] : [];
  });
}

describe('one pipeline: every route is a Nest route behind the guard, pipes and filter', () => {
  let t: TestApp;
  let admin: string;
  before(async () => {
    t = await startTestApp();
    admin = (await signedIn(t, 'admin')).token;
  });
  after(() => t.close());

  test('every route the router serves (but the documentation) is an operation of the document with an access rule', () => {
    const routes = t.app.get(HttpEdge).routes.filter((r) => !r.url.startsWith('/api/docs'));
    assert.ok(routes.length > 40, `found ${routes.length} routes`);
    const outside = routes
      .filter(
        (r) => r.url !== '/metrics' && (typeof r.config.operationId !== 'string' || !r.config[ACCESS_ROUTE_CONFIG]),
      )
      .map((r) => `${r.method} ${r.url}`);
    assert.deepEqual(outside, []);
  });

  test('every route runs the guard, whoever calls and whatever the query: no lane around Nest', async () => {
    const seen: unknown[] = [];
    const canActivate = AuthGuard.prototype.canActivate;
    AuthGuard.prototype.canActivate = function (this: AuthGuard, context) {
      seen.push(context.switchToHttp().getRequest<{ id: string }>().id);
      return canActivate.call(this, context);
    };
    try {
      const routes = t.app
        .get(HttpEdge)
        .routes.filter((r) => !r.url.startsWith('/api/docs'))
        // signing out ends the session the walk uses: last
        .sort((a, b) => Number(a.url.endsWith('/logout')) - Number(b.url.endsWith('/logout')));
      for (const route of routes) {
        const url = route.url.replace(/:[A-Za-z]+\*?/g, 'x1');
        const before = seen.length;
        const res = await request(t.app, route.method, url, {
          token: admin,
          headers: { 'x-cluster-name': 'no-such-cluster' },
          body: ['POST', 'PUT', 'PATCH'].includes(route.method) ? {} : undefined,
        });
        assert.equal(seen.length, before + 1, `${route.method} ${route.url} (${res.status}) did not pass the guard`);
        assert.equal(
          seen.at(-1),
          res.headers['x-request-id'],
          `${route.method} ${route.url}: the guard saw this request`,
        );
      }
    } finally {
      AuthGuard.prototype.canActivate = canActivate;
    }
  });

  test("no source imports a library's internal file (a path inside a package)", () => {
    const deep = /(?:from|import\(|require\()\s*['"]((?:@[^/'"]+\/)?[a-z][^/'":]*\/[^'"]+)['"]/g;
    const found: string[] = [];
    for (const file of [
      ...sources(join(ROOT, 'src')),
      ...sources(join(ROOT, 'test')),
      ...sources(join(ROOT, 'scripts')),
    ]) {
      for (const match of readFileSync(file, 'utf8').matchAll(deep)) {
        if (!match[1]!.startsWith('node:')) found.push(`${file.slice(ROOT.length + 1)}: ${match[1]}`);
      }
    }
    assert.deepEqual(found, []);
  });
});
