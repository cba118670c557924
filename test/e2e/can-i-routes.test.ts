// Issue 29 #11: `can-i` and the routes agree on every (resource scope × namespace × verb) combination
// of a fixture role, against a real control plane: each combination is both asked and sent.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { kubeRequest, type ControlPlane } from '../harness/control-plane.js';
import type { TestApp } from '../support/app.js';
import { startClusterApp } from '../support/cluster-app.js';
import { signedIn } from '../support/factories.js';
import { request } from '../support/http.js';

const NS = `cani-${process.pid}`;
const OTHER = `cani-other-${process.pid}`;
const CLUSTER = 'alpha';
const VERBS = ['get', 'list', 'watch', 'create', 'update', 'patch', 'delete', 'log'] as const;
type Verb = (typeof VERBS)[number];

/** namespaced (core and a group), cluster-scoped, the metrics pseudo-resource, a type nobody serves. */
const RESOURCES = ['pods', 'deployments.apps', 'configmaps', 'nodes', 'metrics', 'nosuchthings'];
const NAMESPACES = [NS, OTHER, '_all'];

const FIXTURE_ROLE = {
  name: 'cani-fixture',
  rules: [
    {
      clusters: [CLUSTER],
      namespaces: [NS],
      resources: ['pods', 'deployments.apps'],
      verbs: ['get', 'list', 'watch', 'log', 'patch'],
    },
    { clusters: [CLUSTER], namespaces: ['*'], resources: ['nodes', 'metrics'], verbs: ['get', 'list'] },
    { clusters: [CLUSTER], namespaces: ['*'], resources: ['configmaps'], verbs: ['list', 'watch', 'create'] },
  ],
};

interface RouteCall {
  method: string;
  path: string;
  body?: unknown;
}

/** The route a client would call for the combination, or null when the service has none. */
function routeFor(resource: string, namespace: string, verb: Verb): RouteCall | null {
  const missing = 'cani-missing';
  if (resource === 'metrics') {
    return namespace === '_all' && verb === 'get' ? { method: 'GET', path: '/api/v1/metrics/query?query=up' } : null;
  }
  const base = `/api/v1/${resource}/${namespace}`;
  switch (verb) {
    case 'get':
      return { method: 'GET', path: `${base}/${missing}` };
    case 'list':
      return { method: 'GET', path: base };
    case 'watch':
      return { method: 'GET', path: `${base}?watch=true` };
    case 'create':
      return { method: 'POST', path: `${base}?dryRun=All`, body: { metadata: { name: missing } } };
    case 'update':
      return {
        method: 'PUT',
        path: `${base}/${missing}`,
        body: { metadata: { name: missing, resourceVersion: '1' } },
      };
    case 'patch':
      return { method: 'PATCH', path: `${base}/${missing}?patchType=merge`, body: {} };
    case 'delete':
      return { method: 'DELETE', path: `${base}/${missing}?wait=false` };
    case 'log':
      return { method: 'GET', path: `${base}/${missing}/log` };
  }
}

describe('can-i agrees with the routes on every combination of a fixture role (issue 29 #11)', () => {
  let cp: ControlPlane;
  let t: TestApp;
  let base: string;
  let token: string;

  before(async () => {
    ({ cp, t, base } = await startClusterApp({ cluster: CLUSTER, namespace: NS, listen: true }));
    const admin = (await signedIn(t, 'admin')).token;
    const role = await request(t.app, 'POST', '/api/v1/admin/roles', { token: admin, body: FIXTURE_ROLE });
    assert.equal(role.status, 201, role.text);
    token = (await signedIn(t, FIXTURE_ROLE.name)).token;
  });
  after(async () => {
    await kubeRequest(cp, 'DELETE', `/api/v1/namespaces/${NS}`);
    await t?.close();
  });

  /** Whether the service let the call through to the cluster (its answer, whatever it is, is the cluster's). */
  async function routeAllows(call: RouteCall): Promise<{ allowed: boolean; message?: string }> {
    const controller = new AbortController();
    const res = await fetch(base + call.path, {
      method: call.method,
      headers: {
        authorization: `Bearer ${token}`,
        'x-cluster-name': CLUSTER,
        ...(call.body ? { 'content-type': 'application/json' } : {}),
      },
      body: call.body ? JSON.stringify(call.body) : undefined,
      signal: controller.signal,
    });
    const streaming = /text\/event-stream|application\/json;\s*stream=watch|ndjson/.test(
      res.headers.get('content-type') ?? '',
    );
    if (streaming || (res.status === 200 && call.path.includes('watch=true'))) {
      controller.abort();
      return { allowed: true };
    }
    const text = await res.text();
    let body: { kind?: string; message?: unknown } = {};
    try {
      body = JSON.parse(text);
    } catch {
      // a log or another non-JSON answer
    }
    const message = Array.isArray(body.message) ? body.message.join('; ') : String(body.message ?? '');
    // Refused by the service: its own 400/403/404/405 (a cluster's refusal is a Kubernetes Status).
    // The metrics route answers 404 for a cluster without a metricsURL only after authorizing.
    const authorizedThenMissing = res.status === 404 && /has no metrics endpoint/.test(message);
    const refused = [400, 403, 404, 405].includes(res.status) && body.kind !== 'Status' && !authorizedThenMissing;
    // Only a refusal for access or scope (403, 400) carries a reason can-i should repeat word for word.
    return { allowed: !refused, message: [400, 403].includes(res.status) ? message : undefined };
  }

  test('for each resource scope, namespace and verb: can-i says allowed exactly when the route lets it through', async () => {
    const disagreements: string[] = [];
    let checked = 0;
    for (const resource of RESOURCES) {
      for (const namespace of NAMESPACES) {
        for (const verb of VERBS) {
          const asked = await request(t.app, 'POST', '/api/v1/auth/can-i', {
            token,
            body: { cluster: CLUSTER, resource, namespace, verb },
          });
          assert.equal(asked.status, 200, asked.text);
          const call = routeFor(resource, namespace, verb);
          const route = call ? await routeAllows(call) : { allowed: false };
          const what = `${verb} ${resource} in ${namespace}`;
          checked++;
          if (asked.body.allowed !== route.allowed) {
            disagreements.push(`${what}: can-i ${asked.body.allowed} (${asked.body.reason}), route ${route.allowed}`);
          } else if (!route.allowed && route.message && asked.body.reason !== route.message) {
            disagreements.push(`${what}: can-i says '${asked.body.reason}', the route '${route.message}'`);
          }
        }
      }
    }
    assert.equal(checked, RESOURCES.length * NAMESPACES.length * VERBS.length);
    assert.deepEqual(disagreements, []);
  });

  test('the findings: nodes or metrics with a namespace, log on other types, an unknown type are refused, saying why', async () => {
    const ask = async (resource: string, namespace: string | null, verb: Verb) =>
      (
        await request(t.app, 'POST', '/api/v1/auth/can-i', {
          token,
          body: { cluster: CLUSTER, resource, namespace, verb },
        })
      ).body as { allowed: boolean; reason: string };
    const nodes = await ask('nodes', NS, 'get');
    assert.equal(nodes.allowed, false);
    assert.match(nodes.reason, /nodes is cluster-scoped/);
    assert.equal((await ask('nodes', null, 'get')).allowed, true);
    const metrics = await ask('metrics', NS, 'get');
    assert.equal(metrics.allowed, false);
    assert.match(metrics.reason, /without a namespace/);
    assert.equal((await ask('metrics', null, 'get')).allowed, true);
    const log = await ask('deployments.apps', NS, 'log');
    assert.equal(log.allowed, false);
    assert.match(log.reason, /log is served for pods only/);
    assert.equal((await ask('pods', NS, 'log')).allowed, true);
    const unknown = await ask('nosuchthings', NS, 'get');
    assert.equal(unknown.allowed, false);
    assert.match(unknown.reason, /nosuchthings/);
  });
});
