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

  test('the impersonating profile grants impersonation, discovery, and list and watch without Secrets', async () => {
    const roles = (await render('deploy')).filter((m) => m.kind === 'ClusterRole');
    assert.deepEqual(
      roles.map((r) => r.metadata.name),
      ['cluster-admin-service-impersonator'],
    );
    const rules = roles[0]!.rules as unknown[];
    assert.deepEqual(rules, [
      { apiGroups: [''], resources: ['users', 'groups'], verbs: ['impersonate'] },
      { apiGroups: ['authentication.k8s.io'], resources: ['userextras'], verbs: ['impersonate'] },
      { nonResourceURLs: ['/version', '/api', '/api/*', '/apis', '/apis/*', '/openapi/v2'], verbs: ['get'] },
      ...rules.slice(3),
    ]);
    const reads = rules.slice(3) as Array<{ apiGroups: string[]; resources: string[]; verbs: string[] }>;
    for (const rule of reads) assert.deepEqual(rule.verbs, ['list', 'watch']);
    const core = reads.find((r) => r.apiGroups.includes(''));
    assert.ok(core && !core.resources.includes('secrets') && !core.resources.includes('*'), 'no Secrets');
  });
});

/**
 * The service in in-cluster mode, as the Deployment runs it, with the token of a ServiceAccount bound to
 * exactly a profile's ClusterRole (as `kubectl kustomize` renders it, created under a name of this run's
 * own), against a real apiserver with a test kubelet for logs. Everything is removed in `after`.
 */
function inClusterService(profile: 'service-identity' | 'impersonating') {
  const ctx = {
    cp: undefined as unknown as ControlPlane,
    kubelet: undefined as unknown as Kubelet,
    t: undefined as unknown as TestApp,
    base: '',
    admin: { username: '', token: '' },
    ns: `cas-${profile}-${process.pid}`,
    nodeName: `cas-${profile}-node-${process.pid}`,
    roles: [] as string[],
    bindings: [] as string[],
    call(method: string, path: string, body?: unknown, query?: Record<string, string>) {
      return request(ctx.t.app, method, `/api/v1/${path}`, {
        token: ctx.admin.token,
        body,
        query,
        headers: { 'x-cluster-name': 'in-cluster' },
      });
    },
    async createRoleFrom(dir: string, rendered: string): Promise<string> {
      const source = (await render(dir)).find((m) => m.kind === 'ClusterRole' && m.metadata.name === rendered);
      assert.ok(source, `${dir} renders ClusterRole ${rendered}`);
      const name = `cas-test-${rendered}-${process.pid}`;
      const created = await kubeRequest(ctx.cp, 'POST', '/apis/rbac.authorization.k8s.io/v1/clusterroles', {
        metadata: { name },
        rules: source.rules,
      });
      assert.equal(created.status, 201, JSON.stringify(created.body));
      ctx.roles.push(name);
      return name;
    },
    async bind(name: string, clusterRole: string, subject: Record<string, string>): Promise<void> {
      const bound = await kubeRequest(ctx.cp, 'POST', '/apis/rbac.authorization.k8s.io/v1/clusterrolebindings', {
        metadata: { name },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: clusterRole },
        subjects: [subject],
      });
      assert.equal(bound.status, 201, JSON.stringify(bound.body));
      ctx.bindings.push(name);
    },
  };
  let saDir = '';

  before(async () => {
    ctx.cp = await sharedControlPlane('a');
    await kubeRequest(ctx.cp, 'POST', '/api/v1/namespaces', { metadata: { name: ctx.ns } });
    const role =
      profile === 'impersonating'
        ? await ctx.createRoleFrom('deploy', 'cluster-admin-service-impersonator')
        : await ctx.createRoleFrom('deploy/overlays/service-identity', 'cluster-admin-service');
    const { token } = await serviceAccountToken(ctx.cp, ctx.ns, 'cas', { clusterRole: role });
    ctx.bindings.push(`${ctx.ns}-cas`);
    ctx.kubelet = await startKubelet(ctx.cp, ctx.nodeName);
    saDir = await mkdtemp(join(tmpdir(), 'cas-sa-'));
    await writeFile(join(saDir, 'token'), token);
    await writeFile(join(saDir, 'ca.crt'), ctx.cp.caData);
    await writeFile(join(saDir, 'namespace'), ctx.ns);
    ctx.t = await startTestApp({ env: { CAS_IN_CLUSTER_DIR: saDir, CAS_IN_CLUSTER_SERVER: ctx.cp.server } });
    ctx.admin = await signedIn(ctx.t, 'admin', { username: `deploy-${profile}-${process.pid}` });
    const imported = await request(ctx.t.app, 'POST', '/api/v1/admin/clusters/import', {
      token: ctx.admin.token,
      body: { inCluster: true },
    });
    assert.equal(imported.status, 201, imported.text);
    if (profile === 'impersonating') {
      const updated = await request(ctx.t.app, 'PUT', `/api/v1/admin/clusters/${imported.body.clusters[0].id}`, {
        token: ctx.admin.token,
        body: { impersonate: true },
      });
      assert.equal(updated.status, 200, updated.text);
    }
    await ctx.t.app.listen({ port: 0, host: '127.0.0.1' });
    ctx.base = `http://127.0.0.1:${(ctx.t.app.getHttpServer().address() as AddressInfo).port}`;
  });
  after(async () => {
    const { cp } = ctx;
    await kubeRequest(cp, 'DELETE', `/api/v1/namespaces/${ctx.ns}/pods/app`, { gracePeriodSeconds: 0 });
    await kubeRequest(cp, 'DELETE', `/api/v1/namespaces/${ctx.ns}`);
    for (const name of ctx.bindings)
      await kubeRequest(cp, 'DELETE', `/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/${name}`);
    for (const name of ctx.roles)
      await kubeRequest(cp, 'DELETE', `/apis/rbac.authorization.k8s.io/v1/clusterroles/${name}`);
    await ctx.kubelet?.stop();
    await ctx.t?.close();
    if (saDir) await rm(saDir, { recursive: true, force: true });
  });
  return ctx;
}

type Ctx = ReturnType<typeof inClusterService>;

async function watchSeesCreate(ctx: Ctx): Promise<void> {
  const watch = await openWatch(ctx.base, `/api/v1/configmaps/${ctx.ns}?watch=true`, {
    token: ctx.admin.token,
    cluster: 'in-cluster',
  });
  try {
    assert.equal(watch.status, 200, JSON.stringify(watch.body));
    const created = await ctx.call('POST', `configmaps/${ctx.ns}`, { metadata: { name: 'watched' }, data: { a: '1' } });
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
}

/** Scale, events, logs and delete through the service; the ConfigMap `watched` must exist. */
async function scaleLogsDelete(ctx: Ctx): Promise<void> {
  const { ns, call } = ctx;
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

  const pod = await call('POST', `pods/${ns}`, {
    metadata: { name: 'app' },
    spec: { nodeName: ctx.nodeName, automountServiceAccountToken: false, containers: [{ name: 'app', image: 'app' }] },
  });
  assert.equal(pod.status, 201, pod.text);
  ctx.kubelet.write(ns, 'app', 'app', 'hello from the pod');
  const log = await call('GET', `pods/${ns}/app/log`);
  assert.equal(log.status, 200, log.text);
  assert.equal(log.text, 'hello from the pod\n');

  for (const path of [`pods/${ns}/app`, `configmaps/${ns}/watched`]) {
    const deleted = await call('DELETE', path, undefined, { force: 'true' });
    assert.equal(deleted.status, 200, `${path}: ${deleted.text}`);
  }
  assert.equal((await call('GET', `configmaps/${ns}/watched`)).status, 404);
}

describe("the service-identity profile's ClusterRole is enough for the service's features", () => {
  const ctx = inClusterService('service-identity');

  test('watch, scale, events, logs and delete succeed through the service as that ServiceAccount', async () => {
    await watchSeesCreate(ctx);
    await scaleLogsDelete(ctx);
    const events = await ctx.call('GET', `deployments.apps/${ctx.ns}/web/events`);
    assert.equal(events.status, 200, events.text);
    assert.equal(events.body.kind, 'EventList');
  });

  test('Secrets and RBAC writes are refused by the cluster; the opt-in grants Secrets', async () => {
    const { ns, call } = ctx;
    const secrets = await call('GET', `secrets/${ns}`);
    assert.equal(secrets.status, 403, secrets.text);
    assert.equal(secrets.body.kind, 'Status', 'the refusal is the cluster’s, not the service’s');
    const escalate = await call('POST', 'clusterroles.rbac.authorization.k8s.io/_all', {
      metadata: { name: `escalate-${process.pid}` },
      rules: [],
    });
    assert.equal(escalate.status, 403, escalate.text);
    assert.equal(escalate.body.kind, 'Status');

    const secretsRole = await ctx.createRoleFrom(
      'deploy/overlays/service-identity-secrets',
      'cluster-admin-service-secrets',
    );
    await ctx.bind(`${ns}-cas-secrets`, secretsRole, { kind: 'ServiceAccount', name: 'cas', namespace: ns });
    // The apiserver's RBAC cache takes a moment to see a new binding: a 403 just after it is that lag.
    let created = await call('POST', `secrets/${ns}`, { metadata: { name: 'opted-in' }, stringData: { k: 'v' } });
    for (let i = 0; i < 20 && created.status === 403; i++) {
      await new Promise((r) => setTimeout(r, 250));
      created = await call('POST', `secrets/${ns}`, { metadata: { name: 'opted-in' }, stringData: { k: 'v' } });
    }
    assert.equal(created.status, 201, created.text);
    assert.equal((await call('GET', `secrets/${ns}`)).status, 200);
  });
});

describe("the impersonating profile's ClusterRole is enough once the cluster impersonates", () => {
  const ctx = inClusterService('impersonating');

  test("each call reaches the cluster as the person; the cluster's RBAC decides", async () => {
    const { ns, call } = ctx;
    const refused = await call('POST', `configmaps/${ns}`, { metadata: { name: 'watched' } });
    assert.equal(refused.status, 403, 'no binding for this person yet: the cluster refuses');
    assert.equal(refused.body.kind, 'Status');
    assert.match(refused.body.message, new RegExp(`cas:${ctx.admin.username}`));

    await ctx.bind(`${ns}-person`, 'cluster-admin', {
      apiGroup: 'rbac.authorization.k8s.io',
      kind: 'User',
      name: `cas:${ctx.admin.username}`,
    });
    // The apiserver's RBAC cache takes a moment to see a new binding: a 403 just after it is that lag.
    let created = await call('POST', `configmaps/${ns}`, { metadata: { name: 'watched' }, data: { a: '1' } });
    for (let i = 0; i < 20 && created.status === 403; i++) {
      await new Promise((r) => setTimeout(r, 250));
      created = await call('POST', `configmaps/${ns}`, { metadata: { name: 'watched' }, data: { a: '1' } });
    }
    assert.equal(created.status, 201, created.text);
    await scaleLogsDelete(ctx);
  });

  test('a watch on an impersonating cluster: the shared watch as the service, the person reviewed by the cluster', async () => {
    await watchSeesCreate(ctx);
  });
});
