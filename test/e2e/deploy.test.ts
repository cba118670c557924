import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { after, before, describe, test } from 'node:test';
import { parseAllDocuments } from 'yaml';
import { kubeBinDir } from '../harness/binaries.js';
import { kubeRequest, sharedControlPlane, type ControlPlane } from '../harness/control-plane.js';
import { startKubelet, type Kubelet } from '../harness/kubelet.js';
import { startTestApp, type TestApp } from '../support/app.js';
import { signedIn } from '../support/factories.js';
import { request } from '../support/http.js';
import { serviceAccountToken } from '../support/kube.js';
import { openWatch } from './watch-client.js';

const run = promisify(execFile);
const kubectl = process.env.KUBECTL_BIN || join(kubeBinDir(), 'kubectl');
/** The namespace every profile installs into. */
const NS = 'cluster-admin-service';

/** Every profile and overlay under deploy/ that `kubectl apply -k` takes, as the docs name them. */
const KUSTOMIZATIONS = [
  'deploy',
  'deploy/overlays/impersonating',
  'deploy/overlays/service-identity',
  'deploy/overlays/service-identity-secrets',
  'deploy/overlays/postgres',
  'deploy/monitoring',
];

interface Manifest {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string };
  rules?: unknown[];
}

/** What `kubectl kustomize <dir>` (kubectl 1.20's built-in kustomize) renders, in its order. */
async function render(dir: string): Promise<Manifest[]> {
  const { stdout } = await run(kubectl, ['kustomize', dir]);
  return parseAllDocuments(stdout)
    .map((doc) => doc.toJS() as Manifest | null)
    .filter((m): m is Manifest => !!m);
}

/** Creates an object unless it exists: state shared by parallel runs is only ever added, never removed. */
async function ensure(cp: ControlPlane, path: string, body: unknown): Promise<void> {
  const res = await kubeRequest(cp, 'POST', path, body);
  assert.ok(res.status === 201 || res.status === 409, JSON.stringify(res.body));
}

describe('deploy/ as kustomize profiles on a real control plane', () => {
  let cp: ControlPlane;

  before(async () => {
    cp = await sharedControlPlane('a');
  });

  test('every profile renders with the Namespace first, so one `kubectl apply -k` creates it before what goes in it', async () => {
    for (const dir of KUSTOMIZATIONS.filter((d) => d !== 'deploy/monitoring')) {
      const manifests = await render(dir);
      assert.equal(manifests[0].kind, 'Namespace', dir);
      assert.equal(manifests[0].metadata.name, NS, dir);
      for (const m of manifests.slice(1)) {
        if (!['ClusterRole', 'ClusterRoleBinding'].includes(m.kind)) assert.equal(m.metadata.namespace, NS, m.kind);
      }
      assert.ok(!manifests.some((m) => m.kind === 'Secret'), `${dir} ships no Secret with placeholder values`);
    }
  });

  test('kubectl apply -k --dry-run=server succeeds for each profile and overlay', async () => {
    // A server-side dry run does not create the namespace it would create, so it must exist already;
    // the monitoring overlay's PodMonitor needs the Prometheus Operator's CRD. Both are left in place
    // (a parallel run may be using them).
    await ensure(cp, '/api/v1/namespaces', { metadata: { name: NS } });
    await ensure(cp, '/apis/apiextensions.k8s.io/v1/customresourcedefinitions', {
      metadata: { name: 'podmonitors.monitoring.coreos.com' },
      spec: {
        group: 'monitoring.coreos.com',
        scope: 'Namespaced',
        names: { plural: 'podmonitors', singular: 'podmonitor', kind: 'PodMonitor' },
        versions: [
          {
            name: 'v1',
            served: true,
            storage: true,
            schema: { openAPIV3Schema: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true } },
          },
        ],
      },
    });
    for (const dir of KUSTOMIZATIONS) {
      const expected = await render(dir);
      const { stdout } = await run(
        kubectl,
        ['--kubeconfig', cp.kubeconfigPath, 'apply', '-k', dir, '--dry-run=server'],
        { timeout: 60_000 },
      ).catch((error: { stderr?: string; message: string }) => {
        throw new Error(`kubectl apply -k ${dir} --dry-run=server failed: ${error.stderr ?? error.message}`);
      });
      for (const m of expected) {
        const line = stdout
          .split('\n')
          .find((l) => l.includes(`/${m.metadata.name} `) && l.includes('(server dry run)'));
        assert.ok(line, `${dir}: ${m.kind} ${m.metadata.name} not applied:\n${stdout}`);
      }
      assert.equal(stdout.trim().split('\n').length, expected.length, `${dir}:\n${stdout}`);
    }
  });

  test('the impersonating profile grants only impersonation and discovery', async () => {
    const roles = (await render('deploy')).filter((m) => m.kind === 'ClusterRole');
    assert.deepEqual(
      roles.map((r) => r.metadata.name),
      ['cluster-admin-service-impersonator'],
    );
    assert.deepEqual(roles[0].rules, [
      { apiGroups: [''], resources: ['users', 'groups'], verbs: ['impersonate'] },
      { apiGroups: ['authentication.k8s.io'], resources: ['userextras'], verbs: ['impersonate'] },
      { nonResourceURLs: ['/version', '/api', '/api/*', '/apis', '/apis/*', '/openapi/v2'], verbs: ['get'] },
    ]);
  });
});

describe("the service-identity profile's ClusterRole is enough for the service's features", () => {
  let cp: ControlPlane;
  let kubelet: Kubelet;
  let t: TestApp;
  let base: string;
  let admin: { token: string };
  let saDir: string;
  const suffix = `${process.pid}`;
  const ns = `cas-sa-${suffix}`;
  const nodeName = `cas-sa-node-${suffix}`;
  const role = `cas-test-service-identity-${suffix}`;
  const secretsRole = `cas-test-service-identity-secrets-${suffix}`;
  const call = (method: string, path: string, body?: unknown, query?: Record<string, string>) =>
    request(t.app, method, `/api/v1/${path}`, {
      token: admin.token,
      body,
      query,
      headers: { 'x-cluster-name': 'in-cluster' },
    });

  /** The profile's ClusterRole as `kubectl kustomize` renders it, created under a name of this run's own. */
  async function createRoleFrom(dir: string, rendered: string, name: string): Promise<void> {
    const source = (await render(dir)).find((m) => m.kind === 'ClusterRole' && m.metadata.name === rendered);
    assert.ok(source, `${dir} renders ClusterRole ${rendered}`);
    const created = await kubeRequest(cp, 'POST', '/apis/rbac.authorization.k8s.io/v1/clusterroles', {
      metadata: { name },
      rules: source.rules,
    });
    assert.equal(created.status, 201, JSON.stringify(created.body));
  }

  before(async () => {
    cp = await sharedControlPlane('a');
    await kubeRequest(cp, 'POST', '/api/v1/namespaces', { metadata: { name: ns } });
    await createRoleFrom('deploy/overlays/service-identity', 'cluster-admin-service', role);
    const { token } = await serviceAccountToken(cp, ns, 'cas', { clusterRole: role });
    kubelet = await startKubelet(cp, nodeName);
    // In-cluster mode, as the Deployment runs it: the ServiceAccount's token and the cluster CA as files.
    saDir = await mkdtemp(join(tmpdir(), 'cas-sa-'));
    await writeFile(join(saDir, 'token'), token);
    await writeFile(join(saDir, 'ca.crt'), cp.caData);
    await writeFile(join(saDir, 'namespace'), ns);
    t = await startTestApp({ env: { CAS_IN_CLUSTER_DIR: saDir, CAS_IN_CLUSTER_SERVER: cp.server } });
    admin = await signedIn(t, 'admin');
    const imported = await request(t.app, 'POST', '/api/v1/admin/clusters/import', {
      token: admin.token,
      body: { inCluster: true },
    });
    assert.equal(imported.status, 201, imported.text);
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    base = `http://127.0.0.1:${(t.app.getHttpServer().address() as AddressInfo).port}`;
  });
  after(async () => {
    await kubeRequest(cp, 'DELETE', `/api/v1/namespaces/${ns}/pods/app`, { gracePeriodSeconds: 0 });
    await kubeRequest(cp, 'DELETE', `/api/v1/namespaces/${ns}`);
    for (const name of [`${ns}-cas`, `${ns}-cas-secrets`])
      await kubeRequest(cp, 'DELETE', `/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/${name}`);
    for (const name of [role, secretsRole])
      await kubeRequest(cp, 'DELETE', `/apis/rbac.authorization.k8s.io/v1/clusterroles/${name}`);
    await kubelet?.stop();
    await t?.close();
    if (saDir) await rm(saDir, { recursive: true, force: true });
  });

  test('create, watch, scale, logs, events and delete succeed through the service as that ServiceAccount', async () => {
    const watch = await openWatch(base, `/api/v1/configmaps/${ns}?watch=true`, {
      token: admin.token,
      cluster: 'in-cluster',
    });
    try {
      assert.equal(watch.status, 200, JSON.stringify(watch.body));
      const created = await call('POST', `configmaps/${ns}`, { metadata: { name: 'watched' }, data: { a: '1' } });
      assert.equal(created.status, 201, created.text);
      await watch.until(
        (events) => events.some((e) => e.type === 'ADDED' && e.object?.metadata?.name === 'watched'),
        15_000,
        'the ADDED event of the new ConfigMap',
      );
      assert.ok(!watch.events.some((e) => e.type === 'ERROR'), JSON.stringify(watch.events.map((e) => e.raw)));
    } finally {
      watch.close();
    }

    const deployment = await call('POST', `deployments.apps/${ns}`, {
      metadata: { name: 'web' },
      spec: {
        replicas: 1,
        selector: { matchLabels: { app: 'web' } },
        template: { metadata: { labels: { app: 'web' } }, spec: { containers: [{ name: 'web', image: 'web' }] } },
      },
    });
    assert.equal(deployment.status, 201, deployment.text);
    const scaled = await call(
      'PATCH',
      `deployments.apps/${ns}/web/scale`,
      { spec: { replicas: 3 } },
      { patchType: 'merge' },
    );
    assert.equal(scaled.status, 200, scaled.text);
    assert.equal(scaled.body.spec.replicas, 3);
    assert.equal((await call('GET', `deployments.apps/${ns}/web/scale`)).body.spec.replicas, 3);

    const events = await call('GET', `deployments.apps/${ns}/web/events`);
    assert.equal(events.status, 200, events.text);
    assert.equal(events.body.kind, 'EventList');

    const pod = await call('POST', `pods/${ns}`, {
      metadata: { name: 'app' },
      spec: { nodeName, automountServiceAccountToken: false, containers: [{ name: 'app', image: 'app' }] },
    });
    assert.equal(pod.status, 201, pod.text);
    kubelet.write(ns, 'app', 'app', 'hello from the pod');
    const log = await call('GET', `pods/${ns}/app/log`);
    assert.equal(log.status, 200, log.text);
    assert.equal(log.text, 'hello from the pod\n');

    for (const path of [`pods/${ns}/app`, `configmaps/${ns}/watched`]) {
      const deleted = await call('DELETE', path, undefined, { force: 'true' });
      assert.equal(deleted.status, 200, `${path}: ${deleted.text}`);
    }
    assert.equal((await call('GET', `configmaps/${ns}/watched`)).status, 404);
  });

  test('Secrets and RBAC writes are refused by the cluster; the opt-in grants Secrets', async () => {
    const secrets = await call('GET', `secrets/${ns}`);
    assert.equal(secrets.status, 403, secrets.text);
    assert.equal(secrets.body.kind, 'Status', 'the refusal is the cluster’s, not the service’s');
    const escalate = await call('POST', 'clusterroles.rbac.authorization.k8s.io/_all', {
      metadata: { name: `escalate-${suffix}` },
      rules: [],
    });
    assert.equal(escalate.status, 403, escalate.text);
    assert.equal(escalate.body.kind, 'Status');

    await createRoleFrom('deploy/overlays/service-identity-secrets', 'cluster-admin-service-secrets', secretsRole);
    const bound = await kubeRequest(cp, 'POST', '/apis/rbac.authorization.k8s.io/v1/clusterrolebindings', {
      metadata: { name: `${ns}-cas-secrets` },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: secretsRole },
      subjects: [{ kind: 'ServiceAccount', name: 'cas', namespace: ns }],
    });
    assert.equal(bound.status, 201, JSON.stringify(bound.body));
    const created = await call('POST', `secrets/${ns}`, { metadata: { name: 'opted-in' }, stringData: { k: 'v' } });
    assert.equal(created.status, 201, created.text);
    assert.equal((await call('GET', `secrets/${ns}`)).status, 200);
  });
});
