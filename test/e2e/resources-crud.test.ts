import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { kubeRequest, waitFor, type ControlPlane } from '../harness/control-plane.js';
import type { TestApp } from '../support/app.js';
import { request } from '../support/http.js';
import { startClusterApp } from '../support/cluster-app.js';

describe('resource routes on a real cluster: ConfigMaps, Deployments, Namespaces, scopes', () => {
  let t: TestApp;
  let cp: ControlPlane;
  let token: string;
  const ns = `crud-${process.pid}`;
  const call = (
    method: string,
    url: string,
    options: { body?: unknown; query?: Record<string, string>; rawBody?: string } = {},
  ) => request(t.app, method, `/api/v1/${url}`, { token, headers: { 'x-cluster-name': 'alpha' }, ...options });

  before(async () => {
    ({ cp, t, admin: token } = await startClusterApp({ cluster: 'alpha' }));
    const created = await call('POST', 'namespaces/_all', { body: { metadata: { name: ns } } });
    assert.equal(created.status, 201, created.text);
  });
  after(async () => {
    await kubeRequest(cp, 'DELETE', `/api/v1/namespaces/${ns}`);
    await t.close();
  });

  test('ConfigMap: create fills the namespace, get, list; a different body namespace is a 400', async () => {
    const created = await call('POST', `configmaps/${ns}`, {
      body: { metadata: { name: 'cm1', labels: { app: 'x' } }, data: { a: '1' } },
    });
    assert.equal(created.status, 201, created.text);
    assert.equal(created.body.kind, 'ConfigMap');
    assert.equal(created.body.metadata.namespace, ns);
    assert.equal(created.headers['content-type'], 'application/json');

    const other = await call('POST', `configmaps/${ns}`, {
      body: { metadata: { name: 'cm2', namespace: 'default' }, data: {} },
    });
    assert.equal(other.status, 400);
    assert.match(other.body.message.join(';'), /differs from the namespace in the path/);
    assert.equal(
      (await kubeRequest(cp, 'GET', `/api/v1/namespaces/default/configmaps/cm2`)).status,
      404,
      'nothing created',
    );

    const got = await call('GET', `configmaps/${ns}/cm1`);
    assert.equal(got.status, 200);
    assert.deepEqual(got.body.data, { a: '1' });

    const list = await call('GET', `configmaps/${ns}`, { query: { labelSelector: 'app=x' } });
    assert.equal(list.status, 200);
    assert.equal(list.body.kind, 'ConfigMapList');
    assert.match(list.body.metadata.resourceVersion, /^\d+$/);
    assert.deepEqual(
      list.body.items.map((i: any) => i.metadata.name),
      ['cm1'],
    );

    const paged = await call('GET', `configmaps/${ns}`, { query: { limit: '1' } });
    assert.equal(paged.body.items.length, 1);

    const missing = await call('GET', `configmaps/${ns}/nope`);
    assert.equal(missing.status, 404);
    assert.equal(missing.body.kind, 'Status', "the cluster's Status passes through");
    assert.equal(missing.body.reason, 'NotFound');
  });

  test("PUT: current resourceVersion → 200; stale → the cluster's 409; missing → 400; other name → 400", async () => {
    await call('POST', `configmaps/${ns}`, { body: { metadata: { name: 'put1' }, data: { v: '1' } } });
    const current = (await call('GET', `configmaps/${ns}/put1`)).body;
    const updated = await call('PUT', `configmaps/${ns}/put1`, { body: { ...current, data: { v: '2' } } });
    assert.equal(updated.status, 200, updated.text);
    assert.deepEqual(updated.body.data, { v: '2' });

    const stale = await call('PUT', `configmaps/${ns}/put1`, { body: { ...current, data: { v: '3' } } });
    assert.equal(stale.status, 409);
    assert.equal(stale.body.kind, 'Status');
    assert.equal(stale.body.reason, 'Conflict');

    const { resourceVersion: _rv, ...noVersion } = current.metadata;
    const missing = await call('PUT', `configmaps/${ns}/put1`, { body: { ...current, metadata: noVersion } });
    assert.equal(missing.status, 400);
    assert.match(missing.body.message.join(';'), /resourceVersion is required/);

    const renamed = await call('PUT', `configmaps/${ns}/put1`, {
      body: { ...updated.body, metadata: { ...updated.body.metadata, name: 'other' } },
    });
    assert.equal(renamed.status, 400);
    assert.match(renamed.body.message.join(';'), /metadata.name must be 'put1'/);
    assert.deepEqual((await call('GET', `configmaps/${ns}/put1`)).body.data, { v: '2' }, 'nothing changed');
  });

  test('strategic, merge and JSON patch each change what they should; unknown patchType → 400', async () => {
    await call('POST', `configmaps/${ns}`, {
      body: { metadata: { name: 'p1', labels: { keep: 'yes', drop: 'yes' } }, data: { a: '1', b: '2' } },
    });
    const strategic = await call('PATCH', `configmaps/${ns}/p1`, { body: { data: { c: '3' } } });
    assert.equal(strategic.status, 200, strategic.text);
    assert.deepEqual(strategic.body.data, { a: '1', b: '2', c: '3' });

    const merge = await call('PATCH', `configmaps/${ns}/p1`, {
      query: { patchType: 'merge' },
      body: { metadata: { labels: { drop: null } }, data: { a: null } },
    });
    assert.equal(merge.status, 200, merge.text);
    assert.deepEqual(merge.body.metadata.labels, { keep: 'yes' });
    assert.deepEqual(merge.body.data, { b: '2', c: '3' });

    const json = await call('PATCH', `configmaps/${ns}/p1`, {
      query: { patchType: 'json' },
      body: [
        { op: 'replace', path: '/data/b', value: '20' },
        { op: 'remove', path: '/data/c' },
      ],
    });
    assert.equal(json.status, 200, json.text);
    assert.deepEqual(json.body.data, { b: '20' });

    const bad = await call('PATCH', `configmaps/${ns}/p1`, { query: { patchType: 'server-side' }, body: {} });
    assert.equal(bad.status, 400);
    assert.match(bad.body.message.join(';'), /patchType/);

    const failedTest = await call('PATCH', `configmaps/${ns}/p1`, {
      query: { patchType: 'json' },
      body: [{ op: 'test', path: '/data/b', value: 'nope' }],
    });
    assert.ok(failedTest.status >= 400 && failedTest.status < 500);
    assert.equal(failedTest.body.kind, 'Status');
  });

  test("an invalid object → the cluster's 422; dryRun stores nothing", async () => {
    const invalid = await call('POST', `configmaps/${ns}`, { body: { metadata: { name: 'Not_Valid!' }, data: {} } });
    assert.equal(invalid.status, 422);
    assert.equal(invalid.body.kind, 'Status');
    assert.equal(invalid.body.reason, 'Invalid');

    const dry = await call('POST', `configmaps/${ns}`, {
      query: { dryRun: 'All' },
      body: { metadata: { name: 'dry' }, data: {} },
    });
    assert.equal(dry.status, 201);
    assert.equal((await kubeRequest(cp, 'GET', `/api/v1/namespaces/${ns}/configmaps/dry`)).status, 404);
  });

  test('Deployment rollout restart: a merge patch of a pod-template annotation starts a new ReplicaSet', async () => {
    const deployment = {
      metadata: { name: 'web' },
      spec: {
        replicas: 1,
        selector: { matchLabels: { app: 'web' } },
        template: {
          metadata: { labels: { app: 'web' } },
          spec: { containers: [{ name: 'web', image: 'nginx:1.25' }] },
        },
      },
    };
    const created = await call('POST', `deployments.apps/${ns}`, { body: deployment });
    assert.equal(created.status, 201, created.text);
    assert.equal(created.body.apiVersion, 'apps/v1', 'apiVersion and kind are filled from discovery');
    const replicaSets = async () =>
      (await kubeRequest(cp, 'GET', `/apis/apps/v1/namespaces/${ns}/replicasets?labelSelector=app%3Dweb`)).body
        .items as any[];
    await waitFor('the first ReplicaSet', async () => (await replicaSets()).length === 1, 20_000);

    const restart = await call('PATCH', `deployments/${ns}/web`, {
      query: { patchType: 'merge' },
      body: {
        spec: {
          template: { metadata: { annotations: { 'kubectl.kubernetes.io/restartedAt': new Date().toISOString() } } },
        },
      },
    });
    assert.equal(restart.status, 200, restart.text);
    assert.ok(restart.body.spec.template.metadata.annotations['kubectl.kubernetes.io/restartedAt']);
    await waitFor('a second ReplicaSet', async () => (await replicaSets()).length === 2, 20_000);
  });

  test('Namespace label through /namespaces/_all/<name>', async () => {
    const res = await call('PATCH', `namespaces/_all/${ns}`, {
      query: { patchType: 'merge' },
      body: { metadata: { labels: { team: 'platform' } } },
    });
    assert.equal(res.status, 200, res.text);
    const direct = await kubeRequest(cp, 'GET', `/api/v1/namespaces/${ns}`);
    assert.equal(direct.body.metadata.labels.team, 'platform');
  });

  test('cluster-scoped kinds with _all; names with `:`; a namespaced list with _all spans namespaces', async () => {
    const nodes = await call('GET', 'namespaces/_all');
    assert.equal(nodes.status, 200);
    assert.ok(nodes.body.items.some((n: any) => n.metadata.name === 'kube-system'));

    const role = await call(
      'GET',
      'clusterroles.rbac.authorization.k8s.io/_all/system:controller:namespace-controller',
    );
    assert.equal(role.status, 200, role.text);
    assert.equal(role.body.metadata.name, 'system:controller:namespace-controller');
    const created = await call('POST', 'clusterroles/_all', {
      body: { metadata: { name: `test:reader:${process.pid}` }, rules: [] },
    });
    assert.equal(created.status, 201, created.text);
    const deleted = await call('DELETE', `clusterroles/_all/test:reader:${process.pid}`);
    assert.equal(deleted.status, 200, deleted.text);

    const all = await call('GET', 'configmaps/_all');
    assert.equal(all.status, 200);
    const namespaces = new Set(all.body.items.map((i: any) => i.metadata.namespace));
    assert.ok(namespaces.has(ns) && namespaces.has('kube-system'), [...namespaces].join(','));
  });

  test("the cluster's Warning header reaches the caller with the answer: list, get, create and a 404", async () => {
    // extensions/v1beta1 Ingress is deprecated in v1.20: the apiserver adds a Warning to every answer about it.
    const deprecated = /^299 - "extensions\/v1beta1 Ingress is deprecated/;
    const ingress = {
      metadata: { name: 'old-style' },
      spec: { backend: { serviceName: 'web', servicePort: 80 } },
    };
    const created = await call('POST', `ingresses.extensions/${ns}`, { body: ingress });
    assert.equal(created.status, 201, created.text);
    const list = await call('GET', `ingresses.extensions/${ns}`);
    const got = await call('GET', `ingresses.extensions/${ns}/old-style`);
    const missing = await call('GET', `ingresses.extensions/${ns}/no-such-ingress`);
    assert.deepEqual([list.status, got.status, missing.status], [200, 200, 404]);
    assert.equal(got.body.metadata.name, 'old-style');
    assert.equal(missing.body.reason, 'NotFound', "the cluster's own Status");
    for (const res of [created, list, got, missing]) assert.match(String(res.headers.warning), deprecated);
  });

  test('scope mismatches → 400; unknown resource type → 404', async () => {
    const cases: Array<[string, string, number, RegExp]> = [
      ['GET', 'namespaces/default', 400, /cluster-scoped/],
      ['GET', `namespaces/${ns}/${ns}`, 400, /cluster-scoped/],
      ['GET', 'configmaps/_all/cm1', 400, /namespaced/],
      ['DELETE', 'configmaps/_all/cm1', 400, /namespaced/],
      ['POST', 'configmaps/_all', 400, /namespaced/],
      ['GET', 'gizmos/default', 404, /does not serve a resource type 'gizmos'/],
      ['GET', 'deployments.nope.example.com/default', 404, /does not serve/],
    ];
    for (const [method, url, status, pattern] of cases) {
      const res = await call(method, url, { body: method === 'POST' ? { metadata: { name: 'x' } } : undefined });
      assert.equal(res.status, status, `${method} ${url}: ${res.text}`);
      assert.match(String(res.body.message), pattern);
    }
  });

  test('unknown query parameters → 400', async () => {
    const res = await call('GET', `configmaps/${ns}`, { query: { pretty: 'true' } });
    assert.equal(res.status, 400);
    assert.match(res.body.message.join(';'), /property pretty should not exist/);
  });
});
