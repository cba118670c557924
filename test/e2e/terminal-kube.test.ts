// Issue 31 on the Kubernetes path (CONTRACT §11): @kubernetes/client-node's Exec and PortForward
// through a generated kubeconfig, decided by the service's rules; kubectl 1.20 speaks SPDY, which
// the service refuses with a Status saying so.
import * as k8s from '@kubernetes/client-node';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { PassThrough, Readable } from 'node:stream';
import { after, before, describe, test } from 'node:test';
import { kubeBinDir } from '../harness/binaries.js';
import { kubeRequest, waitFor } from '../harness/control-plane.js';
import { startKubelet, type Kubelet } from '../harness/kubelet.js';
import { createUser, login } from '../support/factories.js';
import { startKubeApiApp, type KubeApiApp } from '../support/kube-api.js';

const KUBECTL = process.env.KUBECTL_BIN || join(kubeBinDir(), 'kubectl');

function collect(stream: PassThrough): () => string {
  const chunks: Buffer[] = [];
  stream.on('data', (c: Buffer) => chunks.push(c));
  return () => Buffer.concat(chunks).toString('utf8');
}

describe('the terminal on the Kubernetes path: client-node Exec and PortForward', () => {
  const ns = `term-kube-${process.pid}`;
  const nodeName = `term-kube-node-${process.pid}`;
  let app: KubeApiApp;
  let kubelet: Kubelet;
  let dev: k8s.KubeConfig;
  let reader: k8s.KubeConfig;
  let devFile: string;
  let echoServer: net.Server;
  let echoPort: number;

  before(async () => {
    app = await startKubeApiApp({ cluster: 'alpha', namespace: ns });
    kubelet = await startKubelet(app.cp, nodeName);
    const rule = (verbs: string[]) => ({ clusters: ['alpha'], namespaces: [ns], resources: ['pods'], verbs });
    for (const [name, verbs] of [
      ['kube-term-dev', ['get', 'list', 'exec', 'portforward']],
      ['kube-term-reader', ['*']],
    ] as const) {
      const res = await app.t.app.inject({
        method: 'POST',
        url: '/api/v1/admin/roles',
        headers: { authorization: `Bearer ${app.adminToken}`, 'content-type': 'application/json' },
        payload: JSON.stringify({ name, rules: [rule([...verbs])] }),
      });
      assert.equal(res.statusCode, 201, res.body);
    }
    const devYaml = await app.mint(await login(app.t, await createUser(app.t, { role: 'kube-term-dev' as never })));
    dev = new k8s.KubeConfig();
    dev.loadFromString(devYaml);
    devFile = join(app.dir, 'dev.yaml');
    await writeFile(devFile, devYaml);
    reader = new k8s.KubeConfig();
    reader.loadFromString(
      await app.mint(await login(app.t, await createUser(app.t, { role: 'kube-term-reader' as never }))),
    );
    const created = await kubeRequest(app.cp, 'POST', `/api/v1/namespaces/${ns}/pods`, {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: 'shell', namespace: ns },
      spec: {
        nodeName,
        automountServiceAccountToken: false,
        containers: [{ name: 'app', image: 'example.invalid/never-pulled' }],
      },
    });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    echoServer = net.createServer((socket) => socket.pipe(socket));
    await new Promise<void>((resolve) => echoServer.listen(0, '127.0.0.1', resolve));
    echoPort = (echoServer.address() as AddressInfo).port;
  });

  after(async () => {
    echoServer?.close();
    await kubelet?.stop();
    await app?.close();
  });

  test('Exec: a command, its output and its exit status', async () => {
    const stdout = new PassThrough();
    const stderr = new PassThrough();
    const out = collect(stdout);
    const status = await new Promise<k8s.V1Status>((resolve, reject) => {
      new k8s.Exec(dev)
        .exec(ns, 'shell', 'app', ['echo', 'through', 'the', 'service'], stdout, stderr, null, false, resolve)
        .catch(reject);
    });
    assert.equal(status.status, 'Success');
    assert.equal(out(), 'through the service\n');
  });

  test('Exec with stdin: a shell, and a non-zero exit code', async () => {
    const stdout = new PassThrough();
    const out = collect(stdout);
    const stdin = new Readable({ read() {} });
    const status = await new Promise<k8s.V1Status>((resolve, reject) => {
      new k8s.Exec(dev).exec(ns, 'shell', 'app', 'sh', stdout, null, stdin, false, resolve).catch(reject);
      stdin.push('echo typed-in\n');
      stdin.push('exit 5\n');
    });
    assert.equal(status.status, 'Failure');
    assert.equal(status.details?.causes?.find((c) => c.reason === 'ExitCode')?.message, '5');
    assert.match(out(), /typed-in/);
  });

  test('Exec without a rule naming exec: a Forbidden Status before anything reaches the cluster', async () => {
    const before = kubelet.requests.length;
    await assert.rejects(
      new k8s.Exec(reader).exec(ns, 'shell', 'app', ['echo', 'x'], new PassThrough(), null, null, false),
      (error: any) => {
        assert.match(String(error.message ?? error), /403/);
        return true;
      },
    );
    assert.equal(kubelet.requests.length, before);
  });

  test('PortForward: a TCP stream to the pod port and back', async () => {
    const output = new PassThrough();
    const got = collect(output);
    const input = new Readable({ read() {} });
    const ws = await new k8s.PortForward(dev).portForward(ns, 'shell', [echoPort], output, null, input);
    input.push('hello over port-forward');
    await waitFor('the echo', async () => got() === 'hello over port-forward', 10_000);
    (ws as unknown as { close(): void }).close();
  });

  test('kubectl exec (SPDY) gets a clear refusal saying to use a WebSocket client', async () => {
    const result = await new Promise<{ code: number; stderr: string }>((resolve) => {
      execFile(
        KUBECTL,
        ['--kubeconfig', devFile, '-n', ns, 'exec', 'shell', '--', 'echo', 'hi'],
        { env: { ...process.env, HOME: join(app.dir, 'home'), KUBECONFIG: '' }, timeout: 30_000 },
        (error, _stdout, stderr) => resolve({ code: error ? Number(error.code ?? -1) : 0, stderr: String(stderr) }),
      );
    });
    assert.notEqual(result.code, 0);
    assert.match(result.stderr, /WebSocket/);
  });
});
