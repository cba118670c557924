// Issue 30: @kubernetes/client-node loads a kubeconfig from POST /api/v1/auth/kubeconfig and drives
// CoreV1Api, AppsV1Api, KubernetesObjectApi, Watch and Log through the service; kubectl logs (-f),
// explain, edit and rollout go through it too. The test kubelet serves the logs.
import * as k8s from '@kubernetes/client-node';
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { kubeBinDir } from '../harness/binaries.js';
import { kubeRequest, waitFor } from '../harness/control-plane.js';
import { startKubelet, type Kubelet } from '../harness/kubelet.js';
import { createUser, login } from '../support/factories.js';
import { startKubeApiApp, type KubeApiApp } from '../support/kube-api.js';

const KUBECTL = process.env.KUBECTL_BIN || join(kubeBinDir(), 'kubectl');

describe('client-node and more kubectl commands through the service', () => {
  const ns = `kube-clients-${process.pid}`;
  const nodeName = `kube-clients-node-${process.pid}`;
  let app: KubeApiApp;
  let kubelet: Kubelet;
  let scoped: k8s.KubeConfig;
  let scopedFile: string;
  let adminFile: string;
  let directFile: string;

  const run = (kubeconfig: string, args: string[], env: Record<string, string> = {}) =>
    new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
      execFile(
        KUBECTL,
        ['--kubeconfig', kubeconfig, ...args],
        { env: { ...process.env, HOME: join(app.dir, 'home'), KUBECONFIG: '', ...env }, timeout: 30_000 },
        (error, stdout, stderr) =>
          resolve({ code: error ? Number(error.code ?? -1) : 0, stdout: String(stdout), stderr: String(stderr) }),
      );
    });

  before(async () => {
    app = await startKubeApiApp({ cluster: 'alpha', namespace: ns });
    kubelet = await startKubelet(app.cp, nodeName);
    const role = await app.t.app.inject({
      method: 'POST',
      url: '/api/v1/admin/roles',
      headers: { authorization: `Bearer ${app.adminToken}`, 'content-type': 'application/json' },
      payload: JSON.stringify({
        name: 'clients-dev',
        rules: [
          {
            clusters: ['alpha'],
            namespaces: [ns],
            resources: ['configmaps', 'deployments.apps', 'pods'],
            verbs: ['get', 'list', 'watch', 'create', 'update', 'patch', 'delete', 'log'],
          },
        ],
      }),
    });
    assert.equal(role.statusCode, 201, role.body);
    const token = await login(app.t, await createUser(app.t, { role: 'clients-dev' as never }));
    const yaml = await app.mint(token);
    scoped = new k8s.KubeConfig();
    scoped.loadFromString(yaml);
    scopedFile = join(app.dir, 'scoped.yaml');
    adminFile = join(app.dir, 'admin.yaml');
    directFile = app.cp.kubeconfigPath;
    await writeFile(scopedFile, yaml);
    await writeFile(adminFile, await app.mint(app.adminToken));
    const pod = {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: 'talker', namespace: ns },
      spec: {
        nodeName,
        automountServiceAccountToken: false,
        containers: [{ name: 'app', image: 'example.invalid/never-pulled' }],
      },
    };
    const created = await kubeRequest(app.cp, 'POST', `/api/v1/namespaces/${ns}/pods`, pod);
    assert.equal(created.status, 201, JSON.stringify(created.body));
  });
  after(async () => {
    await kubeRequest(app.cp, 'DELETE', `/api/v1/namespaces/${ns}/pods/talker`, { gracePeriodSeconds: 0 }).catch(
      () => undefined,
    );
    await kubelet?.stop();
    await app?.close();
  });

  test('CoreV1Api and AppsV1Api: create, read, list, the scale subresource; outside the namespace a 403 Status', async () => {
    const core = scoped.makeApiClient(k8s.CoreV1Api);
    const created = await core.createNamespacedConfigMap({
      namespace: ns,
      body: { metadata: { name: 'from-node' }, data: { a: '1' } },
    });
    assert.equal(created.metadata?.namespace, ns);
    const read = await core.readNamespacedConfigMap({ namespace: ns, name: 'from-node' });
    assert.equal(read.data?.a, '1');
    const list = await core.listNamespacedConfigMap({ namespace: ns });
    assert.ok(list.items.some((c) => c.metadata?.name === 'from-node'));
    await assert.rejects(core.listNamespacedConfigMap({ namespace: 'kube-system' }), (error: any) => {
      assert.equal(error.code, 403);
      const status = typeof error.body === 'string' ? JSON.parse(error.body) : error.body;
      assert.equal(status.kind, 'Status');
      assert.equal(status.reason, 'Forbidden');
      assert.match(status.message, /namespace 'kube-system'/);
      return true;
    });

    const apps = scoped.makeApiClient(k8s.AppsV1Api);
    await apps.createNamespacedDeployment({
      namespace: ns,
      body: {
        metadata: { name: 'node-web' },
        spec: {
          replicas: 1,
          selector: { matchLabels: { app: 'node-web' } },
          template: {
            metadata: { labels: { app: 'node-web' } },
            spec: { containers: [{ name: 'web', image: 'example.invalid/web' }] },
          },
        },
      },
    });
    const scale = await apps.readNamespacedDeploymentScale({ namespace: ns, name: 'node-web' });
    assert.equal(scale.spec?.replicas, 1);
    const deployments = await apps.listNamespacedDeployment({ namespace: ns });
    assert.deepEqual(
      deployments.items.map((d) => d.metadata?.name),
      ['node-web'],
    );
  });

  test('KubernetesObjectApi: create, read, patch (merge) and delete a generic object', async () => {
    const objects = k8s.KubernetesObjectApi.makeApiClient(scoped);
    const spec = {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: 'generic', namespace: ns },
      data: { k: 'v' },
    };
    await objects.create(spec);
    const read = await objects.read<k8s.V1ConfigMap>({
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: 'generic', namespace: ns },
    });
    assert.equal(read.data?.k, 'v');
    const patched = await objects.patch<k8s.V1ConfigMap>(
      { ...spec, data: { k: 'w' } },
      undefined,
      undefined,
      undefined,
      undefined,
      k8s.PatchStrategy.MergePatch,
    );
    assert.equal(patched.data?.k, 'w');
    await objects.delete(spec);
    const gone = await kubeRequest(app.cp, 'GET', `/api/v1/namespaces/${ns}/configmaps/generic`);
    assert.equal(gone.status, 404);
  });

  test('Watch: events arrive through the service', async () => {
    const watch = new k8s.Watch(scoped);
    const seen: string[] = [];
    const controller = await watch.watch(
      `/api/v1/namespaces/${ns}/configmaps`,
      {},
      (phase, object: k8s.V1ConfigMap) => seen.push(`${phase} ${object.metadata?.name}`),
      () => undefined,
    );
    try {
      await sleep(500);
      await kubeRequest(app.cp, 'POST', `/api/v1/namespaces/${ns}/configmaps`, { metadata: { name: 'watched' } });
      await waitFor('the ADDED event', async () => seen.includes('ADDED watched'), 10_000);
    } finally {
      controller.abort();
    }
  });

  test('Log and kubectl logs (and -f): the kubelet’s lines through the service', async () => {
    for (let i = 1; i <= 3; i++) kubelet.write(ns, 'talker', 'app', `line ${i}`);
    const out = new PassThrough();
    let text = '';
    out.on('data', (chunk: Buffer) => (text += chunk.toString()));
    await new k8s.Log(scoped).log(ns, 'talker', 'app', out, { follow: false });
    await waitFor('the log', async () => text === 'line 1\nline 2\nline 3\n', 10_000);

    const logs = await run(scopedFile, ['logs', 'talker', '-n', ns]);
    assert.equal(logs.code, 0, logs.stderr);
    assert.equal(logs.stdout, 'line 1\nline 2\nline 3\n');

    const follower = spawn(KUBECTL, ['--kubeconfig', scopedFile, 'logs', '-f', 'talker', '-n', ns, '--tail=1'], {
      env: { ...process.env, HOME: join(app.dir, 'home'), KUBECONFIG: '' },
    });
    let followed = '';
    follower.stdout.on('data', (chunk: Buffer) => (followed += chunk.toString()));
    try {
      await waitFor('the last line', async () => followed === 'line 3\n', 10_000);
      kubelet.write(ns, 'talker', 'app', 'line 4');
      await waitFor('the new line', async () => followed === 'line 3\nline 4\n', 10_000);
    } finally {
      follower.kill();
    }
    const refused = await run(scopedFile, ['logs', 'talker', '-n', 'kube-system']);
    // kubectl reads the pod first: that get is refused before any log is asked for.
    assert.match(
      refused.stderr,
      /Error from server \(Forbidden\): pods is forbidden: your roles do not allow get on pods in namespace 'kube-system'/,
    );
  });

  test('explain, edit (KUBE_EDITOR), rollout restart and rollout status', async () => {
    const [explained, direct] = await Promise.all([
      run(scopedFile, ['explain', 'deployment.spec.replicas']),
      run(directFile, ['explain', 'deployment.spec.replicas']),
    ]);
    assert.equal(explained.code, 0, explained.stderr);
    assert.equal(explained.stdout, direct.stdout);

    await kubeRequest(app.cp, 'POST', `/api/v1/namespaces/${ns}/configmaps`, {
      metadata: { name: 'edited' },
      data: { mode: 'fast' },
    });
    const edited = await run(scopedFile, ['edit', 'cm/edited', '-n', ns], { KUBE_EDITOR: 'sed -i s/fast/slow/' });
    assert.equal(edited.code, 0, edited.stderr);
    const after = await kubeRequest(app.cp, 'GET', `/api/v1/namespaces/${ns}/configmaps/edited`);
    assert.equal(after.body.data.mode, 'slow');

    const restarted = await run(scopedFile, ['rollout', 'restart', 'deployment/node-web', '-n', ns]);
    assert.equal(restarted.code, 0, restarted.stderr);
    const deployment = await kubeRequest(app.cp, 'GET', `/apis/apps/v1/namespaces/${ns}/deployments/node-web`);
    assert.ok(deployment.body.spec.template.metadata.annotations['kubectl.kubernetes.io/restartedAt']);
    // No kubelet runs its pods: the rollout never finishes, but kubectl watches it through the service.
    const status = await run(scopedFile, ['rollout', 'status', 'deployment/node-web', '-n', ns, '--timeout=2s']);
    assert.match(status.stdout + status.stderr, /Waiting for deployment "node-web" rollout to finish/);
  });
});
