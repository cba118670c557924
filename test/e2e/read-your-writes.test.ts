/**
 * Read-your-writes for every write toward a cluster: the gateway's write hook marks the collection a
 * write changed, so a paged list read right after a write through the Kubernetes path, a scale or a
 * status write shows it — not only after the resource routes' own writes. Against the shared real
 * control plane; each write is followed at once by a page, several times over.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { kubeRequest } from '../harness/control-plane.js';
import { request } from '../support/http.js';
import { baseOf, page, startWorld, stopWorld, type World } from '../support/list-world.js';

const ROUNDS = 5;

describe('a page right after a write that did not go through the resource routes', () => {
  let w: World;
  let A: string;
  let base: string;
  before(async () => {
    w = await startWorld({ tag: 'ryw', namespaces: 1 });
    [A] = w.namespaces;
    base = await baseOf(w);
  });
  after(() => stopWorld(w));

  /**
   * A raw request on the Kubernetes path, as kubectl makes it: over a socket, or injected (no network in
   * between, so the page follows the write as closely as it can).
   */
  let injected = false;
  async function kube(method: string, path: string, body: unknown, contentType = 'application/json') {
    const url = `/api/v1/clusters/c/k8s${path}`;
    const headers = { authorization: `Bearer ${w.admin}`, 'content-type': contentType, accept: 'application/json' };
    if (injected) {
      const res = await w.t.app.inject({ method: method as 'POST', url, headers, payload: JSON.stringify(body) });
      return { status: res.statusCode, body: JSON.parse(res.body) };
    }
    const res = await fetch(`${base}${url}`, { method, headers, body: JSON.stringify(body) });
    return { status: res.status, body: (await res.json()) as any };
  }

  for (const via of ['a socket', 'an injected request']) {
    test(`through the Kubernetes path (${via}): a create and a patch show in the next page`, async () => {
      injected = via !== 'a socket';
      const [key, value] = w.label.split('=');
      const first = await page(w, `configmaps/${A}`, { labelSelector: w.label, page: 1 });
      assert.equal(first.status, 200, first.text); // the list cache runs from here on
      const prefix = injected ? 'i' : 'k';
      for (let n = 0; n < ROUNDS; n++) {
        const i = `${prefix}${n}`;
        const made = await kube('POST', `/api/v1/namespaces/${A}/configmaps`, {
          metadata: { name: `k-${i}`, labels: { [key]: value } },
          data: { round: 'created' },
        });
        assert.equal(made.status, 201, JSON.stringify(made.body));
        const afterCreate = await page(w, `configmaps/${A}`, { labelSelector: w.label, page: 1 });
        assert.ok(
          afterCreate.body.items.some((o: any) => o.metadata.name === `k-${i}`),
          `round ${i}: the created ConfigMap is in the page`,
        );
        const patched = await kube(
          'PATCH',
          `/api/v1/namespaces/${A}/configmaps/k-${i}`,
          { data: { round: 'patched' } },
          'application/merge-patch+json',
        );
        assert.equal(patched.status, 200, JSON.stringify(patched.body));
        const afterPatch = await page(w, `configmaps/${A}`, { labelSelector: w.label, page: 1 });
        const item = afterPatch.body.items.find((o: any) => o.metadata.name === `k-${i}`);
        assert.equal(item?.data?.round, 'patched', `round ${i}: the page shows the patch`);
        assert.equal(item?.metadata?.resourceVersion, patched.body.metadata.resourceVersion);
      }
    });
  }

  test('a scale (PATCH …/scale) shows in the next page of Deployments', async () => {
    const made = await kubeRequest(w.cp, 'POST', `/apis/apps/v1/namespaces/${A}/deployments`, {
      metadata: { name: 'web' },
      spec: {
        replicas: 0,
        selector: { matchLabels: { app: 'web' } },
        template: {
          metadata: { labels: { app: 'web' } },
          spec: { containers: [{ name: 'app', image: 'example.invalid/never-pulled' }] },
        },
      },
    });
    assert.equal(made.status, 201, JSON.stringify(made.body));
    assert.equal((await page(w, `deployments.apps/${A}`, { page: 1 })).status, 200);
    for (let i = 1; i <= ROUNDS; i++) {
      const scaled = await request(w.t.app, 'PATCH', `/api/v1/deployments.apps/${A}/web/scale`, {
        token: w.admin,
        headers: { 'x-cluster-name': 'c' },
        query: { patchType: 'merge' },
        body: { spec: { replicas: i } },
      });
      assert.equal(scaled.status, 200, scaled.text);
      const now = await page(w, `deployments.apps/${A}`, { page: 1 });
      const web = now.body.items.find((o: any) => o.metadata.name === 'web');
      assert.equal(web?.spec?.replicas, i, `round ${i}: the page shows the scale`);
    }
  });

  test('a status write (PATCH …/status) shows in the next page of Pods', async () => {
    const made = await kubeRequest(w.cp, 'POST', `/api/v1/namespaces/${A}/pods`, {
      metadata: { name: 'p' },
      spec: { containers: [{ name: 'app', image: 'example.invalid/never-pulled' }] },
    });
    assert.equal(made.status, 201, JSON.stringify(made.body));
    assert.equal((await page(w, `pods/${A}`, { page: 1 })).status, 200);
    for (let i = 0; i < ROUNDS; i++) {
      const written = await request(w.t.app, 'PATCH', `/api/v1/pods/${A}/p/status`, {
        token: w.admin,
        headers: { 'x-cluster-name': 'c' },
        query: { patchType: 'merge' },
        body: { status: { message: `round ${i}` } },
      });
      assert.equal(written.status, 200, written.text);
      const now = await page(w, `pods/${A}`, { page: 1 });
      const pod = now.body.items.find((o: any) => o.metadata.name === 'p');
      assert.equal(pod?.status?.message, `round ${i}`, `round ${i}: the page shows the status write`);
    }
  });
});
