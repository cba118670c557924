/**
 * Every request example in the committed openapi.json (what Swagger UI fills in and sends) is sent to the service,
 * in an order where each finds what it needs (the super user before login, a role before it is assigned, the
 * `production` cluster before a resource in it), and must be accepted: 2xx, or, for a replace whose example
 * carries a made-up `resourceVersion`, the cluster's own 409 Conflict (the service let it through).
 */
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { after, before, describe, test } from 'node:test';
import { kubeRequest, sharedControlPlane, waitFor, type ControlPlane } from '../harness/control-plane.js';
import { startKubelet, type Kubelet } from '../harness/kubelet.js';
import { podOnNode } from '../support/kube.js';
import { EXAMPLE_CLUSTER, PATCH_CONTENT_TYPES } from '../../src/openapi-examples.js';
import { startTestApp, type TestApp } from '../support/app.js';
import { kubeconfigFor } from '../support/clusters.js';
import { request } from '../support/http.js';

interface Example {
  operationId: string;
  method: string;
  path: string;
  contentType: string;
  body: unknown;
  /** A parameter's example is `x-example` (a hint Swagger UI does not fill in: src/openapi.ts). */
  parameters: Array<{ name: string; in: string; 'x-example'?: unknown }>;
}

/** The order the examples are sent in; every operation with a request body is here (the test fails otherwise). */
const ORDER = [
  'createSuperUser',
  'login',
  'createUser',
  'updateUser',
  'resetUserPassword',
  'setUserEnabled',
  'createRole',
  'updateRole',
  'setUserRoles',
  'createApiKey',
  'createOwnApiKey',
  'importClusters',
  'createCluster',
  'updateCluster',
  'createKubeconfig',
  'checkPermission',
  'createResource',
  'replaceResource',
  'patchResource',
  'replaceSubresource',
  'patchSubresource',
  'applyResources',
  'debugPod',
];
/**
 * Helm's writes run the Helm CLI with a chart from a repository on the internet, or an archive Swagger UI cannot
 * build: test/e2e/helm-writes.test.ts sends such requests against a chart repository of its own.
 */
const ELSEWHERE = new Set(['installHelmRelease', 'upgradeHelmRelease', 'rollbackHelmRelease']);
/** Replaces whose example `resourceVersion` is not the object's: the cluster answers 409 after the service accepted it. */
const STALE_REPLACES = new Set(['replaceResource', 'replaceSubresource']);

describe('every request example in openapi.json is accepted', () => {
  let cp: ControlPlane;
  let t: TestApp;
  const ns = `examples-${process.pid}`;
  let kubelet: Kubelet | undefined;

  before(async () => {
    cp = await sharedControlPlane('a');
    t = await startTestApp({ env: { CAS_CLUSTER_HEALTH_INTERVAL_SECONDS: '0', CAS_CLUSTER_PROBE_TIMEOUT_MS: '2000' } });
  });
  after(async () => {
    await kubelet?.stop();
    await kubeRequest(cp, 'DELETE', `/api/v1/namespaces/${ns}`);
    await t?.close();
  });

  test('sent in order, each is accepted', { timeout: 120_000 }, async () => {
    const doc = JSON.parse(await readFile(new URL('../../../openapi.json', import.meta.url), 'utf8'));
    const examples: Example[] = [];
    for (const [path, item] of Object.entries<any>(doc.paths)) {
      for (const [method, op] of Object.entries<any>(item)) {
        // The Kubernetes API path takes whatever the cluster takes: kubectl is its client, not a generated one.
        if (String(op.operationId).endsWith('KubernetesApi')) continue;
        for (const [contentType, media] of Object.entries<any>(op.requestBody?.content ?? {})) {
          assert.ok(media.example !== undefined, `${op.operationId} ${contentType} has an example`);
          if (ELSEWHERE.has(op.operationId)) continue;
          examples.push({
            operationId: op.operationId,
            method: method.toUpperCase(),
            path,
            contentType,
            body: media.example,
            parameters: op.parameters ?? [],
          });
        }
      }
    }
    assert.deepEqual([...new Set(examples.map((e) => e.operationId))].sort(), [...ORDER].sort());
    examples.sort((a, b) => ORDER.indexOf(a.operationId) - ORDER.indexOf(b.operationId));

    const ids: Record<string, number> = {};
    let token: string | undefined;
    let clusterReady = false;
    const sent: string[] = [];
    for (const example of examples) {
      const { operationId } = example;
      if (operationId === 'checkPermission' && !clusterReady) {
        // The `production` cluster of the createCluster example points at no cluster: aim it at the test's
        // (can-i resolves the type through the cluster's discovery, as the routes do).
        const real = await request(t.app, 'PUT', `/api/v1/admin/clusters/${ids.clusters}`, {
          token,
          body: { config: kubeconfigFor(cp) },
        });
        assert.equal(real.status, 200, real.text);
        assert.equal((await kubeRequest(cp, 'POST', '/api/v1/namespaces', { metadata: { name: ns } })).status, 201);
        const web = await kubeRequest(cp, 'POST', `/apis/apps/v1/namespaces/${ns}/deployments`, {
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
        assert.equal(web.status, 201, JSON.stringify(web.body));
        clusterReady = true;
      }

      if (operationId === 'debugPod') {
        // A debug container needs a pod that runs: the test kubelet's, marking it running.
        kubelet = await startKubelet(cp, `examples-node-${process.pid}`, { runPods: {} });
        await podOnNode(cp, ns, 'web-0', kubelet.nodeName);
        await waitFor('web-0 to run', async () => kubelet!.pods!.runningAt(ns, 'web-0', 'app') !== undefined, 20_000);
      }
      const headers: Record<string, string> = { 'content-type': example.contentType };
      let url = example.path;
      for (const parameter of example.parameters) {
        if (parameter.in === 'path') {
          let value = String(parameter['x-example'] ?? '');
          // The examples' namespace is `default`; the test works in its own.
          if (parameter.name === 'namespace') value = ns;
          if (parameter.name === 'id') value = String(ids[example.path.split('/')[4]]);
          assert.ok(value && value !== 'undefined', `${operationId}: a value for {${parameter.name}}`);
          url = url.replace(`{${parameter.name}}`, encodeURIComponent(value));
        } else if (parameter.in === 'header' && parameter['x-example'] !== undefined) {
          headers[parameter.name] = String(parameter['x-example']);
        }
      }
      let body = example.body as { metadata?: { namespace?: string } };
      if (body?.metadata?.namespace === 'default') body = { ...body, metadata: { ...body.metadata, namespace: ns } };
      // A YAML example (apply's) is sent as it is, in the test's namespace.
      const rawBody =
        typeof body === 'string'
          ? (body as string).replaceAll('namespace: default', `namespace: ${ns}`)
          : JSON.stringify(body);
      // No patchType: the Content-Type names the kind of patch.
      const res = await request(t.app, example.method, url, { token, headers, rawBody });
      const label = `${operationId} (${example.contentType}): ${res.status} ${res.text.slice(0, 300)}`;
      if (STALE_REPLACES.has(operationId)) {
        assert.equal(res.status, 409, label);
        assert.equal(res.body.kind, 'Status', `${label}: the cluster's answer`);
        assert.equal(res.body.reason, 'Conflict', label);
      } else {
        assert.ok(res.status >= 200 && res.status < 300, label);
      }
      if (operationId === 'applyResources') {
        assert.ok(
          res.body.results.every((r: { action: string }) => r.action !== 'error'),
          label,
        );
      }
      if (operationId === 'login') token = res.body.token;
      if (operationId === 'createUser') ids.users = res.body.id;
      if (operationId === 'createRole') ids.roles = res.body.id;
      if (operationId === 'createCluster') ids.clusters = res.body.id;
      sent.push(`${operationId} ${example.contentType}`);
    }
    // Each patch content type was sent to both patch routes.
    for (const type of Object.keys(PATCH_CONTENT_TYPES)) {
      assert.ok(sent.includes(`patchResource ${type}`) && sent.includes(`patchSubresource ${type}`), type);
    }
    const patched = await kubeRequest(cp, 'GET', `/api/v1/namespaces/${ns}/configmaps/my-config`);
    assert.equal(patched.body.data.greeting, 'hi');
    const scale = await kubeRequest(cp, 'GET', `/apis/apps/v1/namespaces/${ns}/deployments/web`);
    assert.equal(scale.body.spec.replicas, 2);
    const clusters = await request(t.app, 'GET', '/api/v1/clusters', { token });
    assert.deepEqual(clusters.body.map((c: { name: string }) => c.name).sort(), [EXAMPLE_CLUSTER, 'staging']);
  });
});
