// Issue 43 on the Kubernetes path: Debian's kubectl 1.20 runs `kubectl debug -it <pod> --image=… --target=…`
// through the service (a JSON patch of pods/ephemeralcontainers, a watch until the container runs, then an
// attach over SPDY/3.1), decided by the same named grant as the REST route.
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { kubeBinDir } from '../harness/binaries.js';
import { kubeRequest, waitFor } from '../harness/control-plane.js';
import { startKubelet, type Kubelet } from '../harness/kubelet.js';
import { createUser, login } from '../support/factories.js';
import { podOnNode } from '../support/kube.js';
import { startKubeApiApp, type KubeApiApp } from '../support/kube-api.js';

const KUBECTL = process.env.KUBECTL_BIN || join(kubeBinDir(), 'kubectl');

describe('kubectl debug through the service', () => {
  const ns = `dbg-kube-${process.pid}`;
  const nodeName = `dbg-kube-node-${process.pid}`;
  let app: KubeApiApp;
  let kubelet: Kubelet;
  let devFile: string;
  let readerFile: string;

  before(async () => {
    app = await startKubeApiApp({ cluster: 'alpha', namespace: ns, env: { CAS_EXEC_RECORDING: 'output' } });
    kubelet = await startKubelet(app.cp, nodeName, { runPods: {} });
    await podOnNode(app.cp, ns, 'box', nodeName);
    const on = { clusters: ['alpha'], namespaces: [ns] };
    for (const [name, rules] of [
      [
        'kube-dbg-dev',
        [
          { ...on, resources: ['pods'], verbs: ['get', 'list', 'watch', 'attach'] },
          { ...on, resources: ['pods/ephemeralcontainers'], verbs: ['update'] },
        ],
      ],
      ['kube-dbg-star', [{ ...on, resources: ['*'], verbs: ['*'] }]],
    ] as const) {
      const res = await app.t.app.inject({
        method: 'POST',
        url: '/api/v1/admin/roles',
        headers: { authorization: `Bearer ${app.adminToken}`, 'content-type': 'application/json' },
        payload: JSON.stringify({ name, rules }),
      });
      assert.equal(res.statusCode, 201, res.body);
    }
    devFile = join(app.dir, 'dev.yaml');
    await writeFile(
      devFile,
      await app.mint(await login(app.t, await createUser(app.t, { role: 'kube-dbg-dev' as never }))),
    );
    readerFile = join(app.dir, 'star.yaml');
    await writeFile(
      readerFile,
      await app.mint(await login(app.t, await createUser(app.t, { role: 'kube-dbg-star' as never }))),
    );
    await waitFor('the pod to run', async () => kubelet.pods!.runningAt(ns, 'box', 'app') !== undefined, 20_000);
  });

  after(async () => {
    await kubelet?.stop();
    await kubeRequest(app.cp, 'DELETE', `/api/v1/namespaces/${ns}`).catch(() => undefined);
    await app?.close();
  });

  test('kubectl debug -it: the container is added with its target, runs, and the terminal reaches it', async () => {
    // script(1) gives kubectl a terminal, so -t holds and the attach is a tty.
    const child = spawn(
      'script',
      [
        '-qec',
        `stty cols 100 rows 30; ${KUBECTL} --kubeconfig ${devFile} -n ${ns} debug -it box --image=busybox:1.36 --target=app`,
        '/dev/null',
      ],
      { env: { ...process.env, HOME: join(app.dir, 'home'), KUBECONFIG: '' } },
    );
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    const exited = new Promise<number | null>((resolve) => child.on('exit', resolve));
    const until = (pattern: RegExp) =>
      waitFor(`${pattern} in ${JSON.stringify(out)}`, async () => pattern.test(out), 30_000);
    await until(/\$ $/);
    child.stdin.write('echo via-kubectl-debug\r');
    await until(/via-kubectl-debug\r\n\$ $/);
    child.stdin.write('exit 0\r');
    assert.equal(await exited, 0, out);
    const name = /Defaulting debug container name to (debugger-[a-z0-9]+)/.exec(out)?.[1];
    assert.ok(name, out);
    const pod = (await kubeRequest(app.cp, 'GET', `/api/v1/namespaces/${ns}/pods/box`)).body;
    const added = pod.spec.ephemeralContainers.find((c: { name: string }) => c.name === name);
    assert.deepEqual(
      { image: added.image, target: added.targetContainerName },
      { image: 'busybox:1.36', target: 'app' },
    );
    assert.ok(
      kubelet.requests.some((r) => r.startsWith(`/attach/${ns}/box/${name}?`)),
      'the attach reached the kubelet for the debug container',
    );
  });

  test("kubectl debug without the named grant: Forbidden with the service's reason, nothing added", async () => {
    const before =
      (await kubeRequest(app.cp, 'GET', `/api/v1/namespaces/${ns}/pods/box`)).body.spec.ephemeralContainers?.length ??
      0;
    const result = await new Promise<{ code: number; stderr: string }>((resolve) => {
      execFile(
        KUBECTL,
        ['--kubeconfig', readerFile, '-n', ns, 'debug', 'box', '--image=busybox:1.36', '--target=app'],
        { env: { ...process.env, HOME: join(app.dir, 'home'), KUBECONFIG: '' }, timeout: 30_000 },
        (error, _stdout, stderr) => resolve({ code: error ? Number(error.code ?? -1) : 0, stderr: String(stderr) }),
      );
    });
    assert.notEqual(result.code, 0);
    assert.match(result.stderr, /pods\/ephemeralcontainers/);
    const now =
      (await kubeRequest(app.cp, 'GET', `/api/v1/namespaces/${ns}/pods/box`)).body.spec.ephemeralContainers?.length ??
      0;
    assert.equal(now, before);
  });
});
