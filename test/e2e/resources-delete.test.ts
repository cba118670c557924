import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { kubeRequest, readAudit, waitFor, type ControlPlane } from '../harness/control-plane.js';
import type { TestApp } from '../support/app.js';
import { request } from '../support/http.js';
import { startClusterApp } from '../support/cluster-app.js';

describe('DELETE on a real cluster', () => {
  let t: TestApp;
  let cp: ControlPlane;
  let token: string;
  const ns = `del-${process.pid}`;
  const call = (method: string, url: string, options: { body?: unknown; query?: Record<string, string> } = {}) =>
    request(t.app, method, `/api/v1/${url}`, { token, headers: { 'x-cluster-name': 'alpha' }, ...options });
  const replicaSets = async (app: string) =>
    (await kubeRequest(cp, 'GET', `/apis/apps/v1/namespaces/${ns}/replicasets?labelSelector=app%3D${app}`)).body
      .items as any[];

  async function deploymentWithReplicaSet(name: string) {
    const res = await call('POST', `deployments.apps/${ns}`, {
      body: {
        metadata: { name },
        spec: {
          replicas: 1,
          selector: { matchLabels: { app: name } },
          template: { metadata: { labels: { app: name } }, spec: { containers: [{ name: 'c', image: 'busybox' }] } },
        },
      },
    });
    assert.equal(res.status, 201, res.text);
    await waitFor(`the ReplicaSet of ${name}`, async () => (await replicaSets(name)).length === 1, 20_000);
  }

  before(async () => {
    ({ cp, t, admin: token } = await startClusterApp({ cluster: 'alpha', namespace: ns }));
  });
  after(async () => {
    await kubeRequest(cp, 'DELETE', `/api/v1/namespaces/${ns}`);
    await t.close();
  });

  test('Foreground + wait: the Deployment and its ReplicaSet are gone when it answers', async () => {
    await deploymentWithReplicaSet('fg');
    const res = await call('DELETE', `deployments/${ns}/fg`);
    assert.equal(res.status, 200, res.text);
    assert.equal((await kubeRequest(cp, 'GET', `/apis/apps/v1/namespaces/${ns}/deployments/fg`)).status, 404);
    assert.deepEqual(await replicaSets('fg'), [], 'dependents were deleted first');
  });

  test('cascade=false orphans the ReplicaSet', async () => {
    await deploymentWithReplicaSet('orphan');
    const res = await call('DELETE', `deployments/${ns}/orphan`, { query: { cascade: 'false' } });
    assert.equal(res.status, 200, res.text);
    assert.equal((await kubeRequest(cp, 'GET', `/apis/apps/v1/namespaces/${ns}/deployments/orphan`)).status, 404);
    const left = await replicaSets('orphan');
    assert.equal(left.length, 1, 'the ReplicaSet stays');
    assert.equal(left[0].metadata.ownerReferences, undefined, 'and is orphaned');
  });

  test("wait=false answers at once with the cluster's own answer, object still marked for deletion", async () => {
    await kubeRequest(cp, 'POST', `/api/v1/namespaces/${ns}/configmaps`, {
      metadata: { name: 'held-nowait', finalizers: ['example.com/hold'] },
    });
    const started = Date.now();
    const res = await call('DELETE', `configmaps/${ns}/held-nowait`, { query: { wait: 'false' } });
    assert.ok(Date.now() - started < 2000);
    assert.ok([200, 202].includes(res.status), res.text);
    assert.ok(res.body.metadata.deletionTimestamp, 'the cluster answered with the object marked for deletion');
    await kubeRequest(
      cp,
      'PATCH',
      `/api/v1/namespaces/${ns}/configmaps/held-nowait`,
      { metadata: { finalizers: null } },
      { contentType: 'application/merge-patch+json' },
    );
  });

  test('force=true sends grace period 0 (seen in the audit log)', async () => {
    await kubeRequest(cp, 'POST', `/api/v1/namespaces/${ns}/configmaps`, { metadata: { name: 'forced' } });
    const res = await call('DELETE', `configmaps/${ns}/forced`, { query: { force: 'true' } });
    assert.equal(res.status, 200, res.text);
    const event = await waitFor('the audit event of the delete', async () =>
      (await readAudit(cp)).find(
        (e) => e.verb === 'delete' && e.objectRef?.namespace === ns && e.objectRef?.name === 'forced',
      ),
    );
    assert.equal(event.requestObject?.gracePeriodSeconds, 0);
    assert.equal(event.requestObject?.propagationPolicy, 'Foreground');
  });

  test('an object held by a finalizer → 504 after timeoutSeconds; still there with its finalizer', async () => {
    await kubeRequest(cp, 'POST', `/api/v1/namespaces/${ns}/configmaps`, {
      metadata: { name: 'held', finalizers: ['example.com/hold'] },
    });
    const started = Date.now();
    const res = await call('DELETE', `configmaps/${ns}/held`, { query: { timeoutSeconds: '2' } });
    const took = Date.now() - started;
    assert.equal(res.status, 504, res.text);
    assert.ok(took >= 2000 && took < 6000, `took ${took} ms`);
    assert.match(res.body.message, /stays marked for deletion/);
    const still = await kubeRequest(cp, 'GET', `/api/v1/namespaces/${ns}/configmaps/held`);
    assert.equal(still.status, 200);
    assert.ok(still.body.metadata.deletionTimestamp);
    assert.deepEqual(still.body.metadata.finalizers, ['example.com/hold'], 'finalizers are never stripped');
    await kubeRequest(
      cp,
      'PATCH',
      `/api/v1/namespaces/${ns}/configmaps/held`,
      { metadata: { finalizers: null } },
      { contentType: 'application/merge-patch+json' },
    );
  });

  test("delete of a missing object passes the cluster's 404 through; bad timeoutSeconds → 400", async () => {
    const missing = await call('DELETE', `configmaps/${ns}/never-existed`);
    assert.equal(missing.status, 404);
    assert.equal(missing.body.reason, 'NotFound');
    for (const value of ['0', '301', 'soon']) {
      assert.equal(
        (await call('DELETE', `configmaps/${ns}/x`, { query: { timeoutSeconds: value } })).status,
        400,
        value,
      );
    }
  });
});
