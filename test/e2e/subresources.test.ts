import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { kubeRequest, waitFor, type ControlPlane } from '../harness/control-plane.js';
import type { TestApp } from '../support/app.js';
import { signedIn } from '../support/factories.js';
import { request } from '../support/http.js';
import { createCrd } from '../support/kube.js';
import { startClusterApp } from '../support/cluster-app.js';

describe('scale and status subresources', () => {
  let cp: ControlPlane;
  let t: TestApp;
  let admin: string;
  let viewer: string;
  const ns = `subres-${process.pid}`;
  const group = `subres${process.pid}.example.com`;
  const crdName = `gizmos.${group}`;
  const call = (
    method: string,
    path: string,
    token: string,
    options: { body?: unknown; query?: Record<string, string> } = {},
  ) => request(t.app, method, `/api/v1/${path}`, { token, headers: { 'x-cluster-name': 'alpha' }, ...options });

  before(async () => {
    ({ cp, t, admin, viewer } = await startClusterApp({ cluster: 'alpha', namespace: ns, viewer: true }));
    const deployment = await kubeRequest(cp, 'POST', `/apis/apps/v1/namespaces/${ns}/deployments`, {
      metadata: { name: 'web' },
      spec: {
        replicas: 1,
        selector: { matchLabels: { app: 'web' } },
        template: {
          metadata: { labels: { app: 'web' } },
          spec: { containers: [{ name: 'app', image: 'example.invalid/never-pulled' }] },
        },
      },
    });
    assert.equal(deployment.status, 201, JSON.stringify(deployment.body));
  });
  after(async () => {
    await kubeRequest(cp, 'DELETE', `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${crdName}`);
    await kubeRequest(cp, 'DELETE', `/api/v1/namespaces/${ns}`);
    await t?.close();
  });

  const replicasOf = async () =>
    (await kubeRequest(cp, 'GET', `/apis/apps/v1/namespaces/${ns}/deployments/web`)).body.spec.replicas;

  test('scale of a Deployment: GET, PUT and PATCH change the replicas; a viewer reads but cannot write', async () => {
    const scale = await call('GET', `deployments.apps/${ns}/web/scale`, viewer);
    assert.equal(scale.status, 200, scale.text);
    assert.equal(scale.body.kind, 'Scale');
    assert.equal(scale.body.apiVersion, 'autoscaling/v1');
    assert.equal(scale.body.spec.replicas, 1);

    const put = await call('PUT', `deployments.apps/${ns}/web/scale`, admin, {
      body: { ...scale.body, spec: { replicas: 3 } },
    });
    assert.equal(put.status, 200, put.text);
    assert.equal(put.body.spec.replicas, 3);
    assert.equal(await replicasOf(), 3);

    const stale = await call('PUT', `deployments.apps/${ns}/web/scale`, admin, {
      body: { ...scale.body, spec: { replicas: 4 } },
    });
    assert.equal(stale.status, 409, "a stale resourceVersion: the cluster's conflict");
    assert.equal(stale.body.kind, 'Status');

    const patched = await call('PATCH', `deployments.apps/${ns}/web/scale`, admin, {
      body: { spec: { replicas: 2 } },
      query: { patchType: 'merge' },
    });
    assert.equal(patched.status, 200, patched.text);
    assert.equal(await replicasOf(), 2);

    const strategic = await call('PATCH', `deployments/${ns}/web/scale`, admin, { body: { spec: { replicas: 5 } } });
    assert.equal(strategic.status, 200, strategic.text);
    assert.equal(await replicasOf(), 5);

    for (const method of ['PUT', 'PATCH']) {
      const refused = await call(method, `deployments.apps/${ns}/web/scale`, viewer, {
        body: { ...scale.body, spec: { replicas: 9 } },
        query: method === 'PATCH' ? { patchType: 'merge' } : undefined,
      });
      assert.equal(refused.status, 403, `${method}: ${refused.text}`);
    }
    assert.equal(await replicasOf(), 5, 'nothing changed');
  });

  test('PUT bodies are checked before the cluster is asked', async () => {
    const current = (await call('GET', `deployments.apps/${ns}/web/scale`, admin)).body;
    const cases: Array<[unknown, RegExp]> = [
      [[], /body must be a JSON object/],
      [{ spec: { replicas: 1 } }, /metadata must be an object/],
      [{ ...current, metadata: { ...current.metadata, name: 'other' } }, /metadata.name must be 'web'/],
      [{ ...current, metadata: { name: 'web' } }, /metadata.resourceVersion is required/],
      [{ ...current, metadata: { ...current.metadata, namespace: 'elsewhere' } }, /differs from the namespace/],
    ];
    for (const [body, message] of cases) {
      const res = await call('PUT', `deployments.apps/${ns}/web/scale`, admin, { body });
      assert.equal(res.status, 400, res.text);
      assert.match(JSON.stringify(res.body.message), message);
    }
    const badPatchType = await call('PATCH', `deployments.apps/${ns}/web/scale`, admin, {
      body: {},
      query: { patchType: 'apply' },
    });
    assert.equal(badPatchType.status, 400);
  });

  test('status of a custom resource with a status subresource: GET, PATCH and PUT', async () => {
    await createCrd(cp, { group, plural: 'gizmos', kind: 'Gizmo', namespace: ns, status: true });
    const created = await waitFor(
      'the CRD to be usable',
      async () => {
        const res = await call('POST', `${crdName}/${ns}`, admin, {
          body: { metadata: { name: 'g1' }, spec: { size: 1 } },
        });
        return res.status === 201 ? res : undefined;
      },
      15_000,
      200,
    );
    assert.equal(created.body.status, undefined);

    const status = await call('GET', `${crdName}/${ns}/g1/status`, viewer);
    assert.equal(status.status, 200, status.text);
    assert.equal(status.body.kind, 'Gizmo');

    const patched = await call('PATCH', `${crdName}/${ns}/g1/status`, admin, {
      body: { status: { phase: 'Ready' }, spec: { size: 99 } },
      query: { patchType: 'merge' },
    });
    assert.equal(patched.status, 200, patched.text);
    assert.equal(patched.body.status.phase, 'Ready');
    assert.equal(patched.body.spec.size, 1, 'the status subresource changes only the status');

    const put = await call('PUT', `${crdName}/${ns}/g1/status`, admin, {
      body: { ...patched.body, status: { phase: 'Done' } },
    });
    assert.equal(put.status, 200, put.text);
    const stored = await kubeRequest(cp, 'GET', `/apis/${group}/v1/namespaces/${ns}/gizmos/g1`);
    assert.equal(stored.body.status.phase, 'Done');

    const refused = await call('PATCH', `${crdName}/${ns}/g1/status`, viewer, {
      body: { status: { phase: 'Hacked' } },
      query: { patchType: 'merge' },
    });
    assert.equal(refused.status, 403);
    const noScale = await call('GET', `${crdName}/${ns}/g1/scale`, admin);
    assert.equal(noScale.status, 404);
    assert.match(noScale.body.message, new RegExp(`${crdName} has no scale subresource`));
  });

  test('types without the subresource, unknown subresources, and the routes beside them', async () => {
    await kubeRequest(cp, 'POST', `/api/v1/namespaces/${ns}/configmaps`, { metadata: { name: 'cm' } });
    const noScale = await call('GET', `configmaps/${ns}/cm/scale`, admin);
    assert.equal(noScale.status, 404);
    assert.match(noScale.body.message, /configmaps has no scale subresource on cluster 'alpha'/);

    const unknown = await call('GET', `deployments.apps/${ns}/web/rollback`, admin);
    assert.equal(unknown.status, 404);
    assert.match(unknown.body.message, /no route for subresource 'rollback'/);

    // pods have a static `log` route: their `status` still reaches the subresource route
    await kubeRequest(cp, 'POST', `/api/v1/namespaces/${ns}/pods`, {
      metadata: { name: 'p' },
      spec: {
        automountServiceAccountToken: false,
        containers: [{ name: 'c', image: 'example.invalid/never-pulled' }],
      },
    });
    const podStatus = await call('GET', `pods/${ns}/p/status`, viewer);
    assert.equal(podStatus.status, 200, podStatus.text);
    assert.equal(podStatus.body.kind, 'Pod');
    assert.equal((await call('GET', `deployments.apps/${ns}/web`, viewer)).body.kind, 'Deployment');
    assert.equal((await call('GET', `deployments.apps/${ns}/web/scale`, viewer, { query: { x: '1' } })).status, 400);
    assert.equal((await call('GET', `deployments.apps/_all/web/scale`, viewer)).status, 400);
  });

  test('writing status needs update/patch on <resource>/status named in a rule: a * covers the object, not its status (issue 29 #13)', async () => {
    await kubeRequest(cp, 'POST', `/api/v1/namespaces/${ns}/pods`, {
      metadata: { name: 'st' },
      spec: { automountServiceAccountToken: false, containers: [{ name: 'c', image: 'example.invalid/never-pulled' }] },
    });
    const role = async (name: string, resources: string[]) => {
      const res = await request(t.app, 'POST', '/api/v1/admin/roles', {
        token: admin,
        body: { name, rules: [{ clusters: ['alpha'], namespaces: [ns], resources, verbs: ['*'] }] },
      });
      assert.equal(res.status, 201, res.text);
      return (await signedIn(t, name)).token;
    };
    const everything = await role('ns-everything', ['*']);
    const podsOnly = await role('ns-pods', ['pods', 'deployments.apps']);
    const statusWriter = await role('ns-pod-status', [
      'pods',
      'pods/status',
      'deployments.apps',
      'deployments.apps/status',
    ]);
    const writeStatus = (token: string, path = `pods/${ns}/st/status`) =>
      call('PATCH', path, token, {
        body: { status: { conditions: [{ type: 'cas.example/Checked', status: 'True' }] } },
        query: { patchType: 'merge' },
      });

    for (const token of [everything, podsOnly]) {
      const refused = await writeStatus(token);
      assert.equal(refused.status, 403, refused.text);
      assert.match(refused.body.message, /pods\/status/);
      const put = await call('PUT', `pods/${ns}/st/status`, token, {
        body: { metadata: { name: 'st', resourceVersion: '1' } },
      });
      assert.equal(put.status, 403, put.text);
      // The object itself and reading its status stay allowed.
      assert.equal((await call('GET', `pods/${ns}/st/status`, token)).status, 200);
      const label = await call('PATCH', `pods/${ns}/st`, token, {
        body: { metadata: { labels: { touched: 'yes' } } },
        query: { patchType: 'merge' },
      });
      assert.equal(label.status, 200, label.text);
    }
    const allowed = await writeStatus(statusWriter);
    assert.equal(allowed.status, 200, allowed.text);
    assert.ok(allowed.body.status.conditions.some((c: { type: string }) => c.type === 'cas.example/Checked'));
    const deploymentStatus = await writeStatus(statusWriter, `deployments.apps/${ns}/web/status`);
    assert.equal(deploymentStatus.status, 200, deploymentStatus.text);
    // Scale is written as the parent, as before; an admin writes status without any rule.
    assert.equal((await writeStatus(admin)).status, 200);
    assert.equal((await writeStatus(viewer)).status, 403);
  });
});
