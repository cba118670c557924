import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { kubeRequest, waitFor, type ControlPlane } from '../harness/control-plane.js';
import type { TestApp } from '../support/app.js';
import { request } from '../support/http.js';
import { startClusterApp } from '../support/cluster-app.js';

describe('custom resources, with a CRD created during the test', () => {
  let t: TestApp;
  let cp: ControlPlane;
  let token: string;
  const group = `e2e${process.pid}.example.com`;
  const crdName = `widgets.${group}`;
  const ns = `crd-${process.pid}`;
  const call = (method: string, url: string, options: { body?: unknown; query?: Record<string, string> } = {}) =>
    request(t.app, method, `/api/v1/${url}`, { token, headers: { 'x-cluster-name': 'alpha' }, ...options });

  before(async () => {
    ({ cp, t, admin: token } = await startClusterApp({ cluster: 'alpha', namespace: ns }));
    // Discovery of the cluster is cached before the CRD exists: the miss must refresh it.
    assert.equal((await call('GET', `configmaps/${ns}`)).status, 200);
  });
  after(async () => {
    await kubeRequest(cp, 'DELETE', `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${crdName}`);
    await kubeRequest(cp, 'DELETE', `/api/v1/namespaces/${ns}`);
    await t.close();
  });

  test('usable within 10 s through <plural>.<group>: create, list, get, PUT (stale → 409), merge and JSON patch, delete; strategic → 415', async () => {
    const crd = {
      apiVersion: 'apiextensions.k8s.io/v1',
      kind: 'CustomResourceDefinition',
      metadata: { name: crdName },
      spec: {
        group,
        scope: 'Namespaced',
        names: { plural: 'widgets', singular: 'widget', kind: 'Widget' },
        versions: [
          {
            name: 'v1',
            served: true,
            storage: true,
            schema: {
              openAPIV3Schema: {
                type: 'object',
                properties: { spec: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true } },
              },
            },
          },
        ],
      },
    } as any;
    const created = await call('POST', 'customresourcedefinitions.apiextensions.k8s.io/_all', { body: crd });
    assert.equal(created.status, 201, created.text);
    const started = Date.now();

    const widget = { metadata: { name: 'w1' }, spec: { size: 1, color: 'red' } };
    const first = await waitFor(
      'the new resource type to be usable',
      async () => {
        const res = await call('POST', `widgets.${group}/${ns}`, { body: widget });
        return res.status === 201 ? res : undefined;
      },
      10_000,
      250,
    );
    assert.ok(Date.now() - started < 10_000);
    assert.equal(first.body.kind, 'Widget');
    assert.equal(first.body.apiVersion, `${group}/v1`);

    const list = await call('GET', `widgets.${group}/${ns}`);
    assert.equal(list.status, 200);
    assert.deepEqual(
      list.body.items.map((i: any) => i.metadata.name),
      ['w1'],
    );
    const got = await call('GET', `widgets.${group}/${ns}/w1`);
    assert.equal(got.body.spec.color, 'red');

    const put = await call('PUT', `widgets.${group}/${ns}/w1`, {
      body: { ...got.body, spec: { size: 2, color: 'red' } },
    });
    assert.equal(put.status, 200, put.text);
    const stale = await call('PUT', `widgets.${group}/${ns}/w1`, { body: { ...got.body, spec: { size: 3 } } });
    assert.equal(stale.status, 409);
    assert.equal(stale.body.reason, 'Conflict');

    const merge = await call('PATCH', `widgets.${group}/${ns}/w1`, {
      query: { patchType: 'merge' },
      body: { spec: { color: 'blue' } },
    });
    assert.equal(merge.status, 200, merge.text);
    assert.deepEqual(merge.body.spec, { size: 2, color: 'blue' });
    const json = await call('PATCH', `widgets.${group}/${ns}/w1`, {
      query: { patchType: 'json' },
      body: [{ op: 'replace', path: '/spec/size', value: 5 }],
    });
    assert.equal(json.status, 200, json.text);
    assert.equal(json.body.spec.size, 5);
    const strategic = await call('PATCH', `widgets.${group}/${ns}/w1`, { body: { spec: { size: 6 } } });
    assert.equal(strategic.status, 415, 'custom resources do not support strategic merge patch');
    assert.equal(strategic.body.kind, 'Status');

    const deleted = await call('DELETE', `widgets.${group}/${ns}/w1`);
    assert.equal(deleted.status, 200, deleted.text);
    assert.equal((await call('GET', `widgets.${group}/${ns}/w1`)).status, 404);
  });
});
