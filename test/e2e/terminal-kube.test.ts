// Issue 31 on the Kubernetes path: @kubernetes/client-node's Exec and PortForward
// through a generated kubeconfig, decided by the service's rules; kubectl 1.20's exec and port-forward
// over SPDY/3.1, relayed to the test kubelet's SPDY endpoints behind the real apiserver.
import * as k8s from '@kubernetes/client-node';
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { PassThrough, Readable } from 'node:stream';
import { after, before, describe, test } from 'node:test';
import { kubeBinDir } from '../harness/binaries.js';
import { kubeRequest, waitFor, waitForAudit } from '../harness/control-plane.js';
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
  let readerFile: string;
  let devName: string;
  let echoServer: net.Server;
  let echoPort: number;

  before(async () => {
    app = await startKubeApiApp({ cluster: 'alpha', namespace: ns });
    kubelet = await startKubelet(app.cp, nodeName);
    const rule = (verbs: string[]) => ({ clusters: ['alpha'], namespaces: [ns], resources: ['pods'], verbs });
    for (const [name, verbs] of [
      ['kube-term-dev', ['get', 'list', 'exec', 'attach', 'portforward']],
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
    const devUser = await createUser(app.t, { role: 'kube-term-dev' as never });
    devName = devUser.username;
    const devYaml = await app.mint(await login(app.t, devUser));
    dev = new k8s.KubeConfig();
    dev.loadFromString(devYaml);
    devFile = join(app.dir, 'dev.yaml');
    await writeFile(devFile, devYaml);
    reader = new k8s.KubeConfig();
    const readerYaml = await app.mint(
      await login(app.t, await createUser(app.t, { role: 'kube-term-reader' as never })),
    );
    reader.loadFromString(readerYaml);
    readerFile = join(app.dir, 'reader.yaml');
    await writeFile(readerFile, readerYaml);
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

  test('kubectl exec and attach (SPDY/3.1): the same output and exit codes as against the cluster directly', async () => {
    const direct = join(app.cp.dir, 'kubeconfig');
    for (const [args, input] of [
      [['exec', 'shell', '--', 'echo', 'hello', 'over', 'spdy'], undefined],
      [['exec', '-i', 'shell', '--', 'sh'], 'echo typed-in\nexit 3\n'],
      [['exec', '-i', 'shell', '-c', 'app', '--', 'cat'], 'line one\nline two\n'],
      [['exec', 'shell', '--', 'no-such-command'], undefined],
      [['attach', '-i', 'shell', '-c', 'app'], 'echo attached\nexit 2\n'],
    ] as const) {
      const through = await kubectl(devFile, [...args], input);
      const straight = await kubectl(direct, [...args], input);
      assert.deepEqual(through, straight, `kubectl ${args.join(' ')}`);
    }
    const echo = await kubectl(devFile, ['exec', 'shell', '--', 'echo', 'hello', 'over', 'spdy']);
    assert.deepEqual(echo, { code: 0, stdout: 'hello over spdy\n', stderr: '' });
    const shell = await kubectl(devFile, ['exec', '-i', 'shell', '--', 'sh'], 'echo typed-in\nexit 3\n');
    assert.deepEqual(shell, { code: 3, stdout: 'typed-in\n', stderr: 'command terminated with exit code 3\n' });
    const attached = await kubectl(devFile, ['attach', '-i', 'shell', '-c', 'app'], 'echo attached\nexit 2\n');
    assert.equal(attached.stdout, 'attached\n');
    assert.equal(attached.code, 2);
  });

  test('kubectl exec -it (a terminal from script(1)): keys echoed, its size reaches the container, the exit code', async () => {
    // script(1) gives kubectl a pseudo-terminal of 100×30, so kubectl sends tty=true and its size on the resize stream.
    const session = async (file: string) => {
      const child = spawn(
        'script',
        ['-qec', `stty cols 100 rows 30; ${KUBECTL} --kubeconfig ${file} -n ${ns} exec -it shell -- sh`, '/dev/null'],
        { env: { ...process.env, HOME: join(app.dir, 'home'), KUBECONFIG: '' } },
      );
      let out = '';
      child.stdout.on('data', (d: Buffer) => (out += d.toString()));
      const exited = new Promise<number | null>((resolve) => child.on('exit', resolve));
      const until = (pattern: RegExp) =>
        waitFor(`${pattern} in ${JSON.stringify(out)}`, async () => pattern.test(out), 15_000);
      await until(/\$ $/);
      child.stdin.write('size\r');
      await until(/\d+x\d+\r\n\$ $/);
      child.stdin.write('echo hi\r');
      await until(/hi\r\n\$ $/);
      child.stdin.write('exit 6\r');
      return { code: await exited, out };
    };
    const through = await session(devFile);
    assert.equal(
      through.out,
      '$ size\r\n100x30\r\n$ echo hi\r\nhi\r\n$ exit 6\r\ncommand terminated with exit code 6\r\n',
    );
    assert.equal(through.code, 6);
    assert.deepEqual(await session(join(app.cp.dir, 'kubeconfig')), through);
  });

  test('kubectl exec without a rule naming exec: Forbidden with the service reason, nothing sent to the cluster', async () => {
    const before = kubelet.requests.length;
    const result = await kubectl(readerFile, ['exec', 'shell', '--', 'echo', 'x']);
    assert.equal(result.code, 1);
    assert.match(result.stderr, /Forbidden/);
    assert.match(result.stderr, /exec on pods/);
    assert.equal(kubelet.requests.length, before);
  });

  test('kubectl port-forward (SPDY/3.1): TCP connections to the pod port and back, one after another', async () => {
    const pod = await kubeRequest(app.cp, 'GET', `/api/v1/namespaces/${ns}/pods/shell`);
    const running = { ...(pod.body as object), status: { phase: 'Running' } };
    // kubectl port-forward asks the pod first and refuses one that is not running.
    assert.equal((await kubeRequest(app.cp, 'PUT', `/api/v1/namespaces/${ns}/pods/shell/status`, running)).status, 200);
    const child = spawn(KUBECTL, ['--kubeconfig', devFile, '-n', ns, 'port-forward', 'pod/shell', `:${echoPort}`], {
      env: { ...process.env, HOME: join(app.dir, 'home'), KUBECONFIG: '' },
    });
    let printed = '';
    child.stdout.on('data', (d: Buffer) => (printed += d.toString()));
    child.stderr.on('data', (d: Buffer) => (printed += d.toString()));
    try {
      const local = await waitFor(
        'kubectl to listen',
        async () => {
          assert.equal(child.exitCode, null, `kubectl port-forward exited: ${printed}`);
          return /Forwarding from 127\.0\.0\.1:(\d+)/.exec(printed)?.[1];
        },
        15_000,
      );
      for (const text of ['first connection', 'second connection']) {
        const answer = await new Promise<string>((resolve, reject) => {
          const socket = net.connect(Number(local), '127.0.0.1', () => socket.write(text));
          let got = '';
          socket.on('data', (d: Buffer) => {
            got += d.toString();
            if (got.length >= text.length) socket.end();
          });
          socket.on('close', () => resolve(got));
          socket.on('error', reject);
        });
        assert.equal(answer, text);
      }
    } finally {
      child.kill();
    }
    const rows = await waitFor('the end row of the SPDY port-forward', async () => {
      const all = await auditRows('portForwardPod');
      return all.some((e) => e.detail?.event === 'end' && e.detail.protocol === 'SPDY/3.1') ? all : undefined;
    });
    const end = rows.find((e) => e.detail?.event === 'end' && e.detail.protocol === 'SPDY/3.1');
    assert.ok(
      rows.some((e) => e.requestId === end.requestId && e.detail?.event === 'start'),
      'its start row',
    );
    // SPDY names the ports per stream, so the end row lists those forwarded.
    assert.deepEqual(end.detail.ports, [echoPort]);
    assert.ok(end.detail.bytesIn > 0 && end.detail.bytesOut > 0);
  });

  test('a kubectl exec session has start and end rows in the audit log, marked SPDY/3.1', async () => {
    const marker = `audited-${Date.now()}`;
    assert.equal((await kubectl(devFile, ['exec', 'shell', '--', 'echo', marker])).stdout, `${marker}\n`);
    const rows = await waitFor('the start and end rows', async () => {
      const all = await auditRows('execPod');
      const begun = all.find((e) => e.detail?.event === 'start' && e.detail.command?.includes(marker));
      return begun && all.some((e) => e.requestId === begun.requestId && e.detail?.event === 'end') ? all : undefined;
    });
    const start = rows.find((e) => e.detail?.event === 'start' && e.detail.command?.includes(marker));
    assert.equal(start.detail.protocol, 'SPDY/3.1');
    assert.match(start.actor.name, new RegExp(devName));
    const end = rows.find((e) => e.requestId === start.requestId && e.detail?.event === 'end');
    assert.ok(end && end.detail.bytesOut > 0 && end.detail.durationMs >= 0, JSON.stringify(end));
    assert.equal(end.detail.exitCode, 0);
  });

  test('re-authorization: a kubectl exec session ends within 5 s of losing its rule', async () => {
    const user = await createUser(app.t, { role: 'kube-term-dev' as never });
    const file = join(app.dir, 'revoked.yaml');
    await writeFile(file, await app.mint(await login(app.t, user)));
    const child = spawn(KUBECTL, ['--kubeconfig', file, '-n', ns, 'exec', '-i', 'shell', '--', 'sh'], {
      env: { ...process.env, HOME: join(app.dir, 'home'), KUBECONFIG: '' },
    });
    let out = '';
    let err = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    child.stdin.write('echo before\n');
    await waitFor('the shell to answer', async () => out.includes('before'));
    const res = await app.t.app.inject({
      method: 'PUT',
      url: `/api/v1/admin/users/${user.id}/roles`,
      headers: { authorization: `Bearer ${app.adminToken}`, 'content-type': 'application/json' },
      payload: JSON.stringify({ roles: ['viewer'] }),
    });
    assert.equal(res.statusCode, 200, res.body);
    const startedAt = Date.now();
    const code = await Promise.race([exited, new Promise((r) => setTimeout(() => r('still running'), 10_000))]);
    child.kill();
    assert.notEqual(code, 'still running');
    // The service's Status on the error stream: kubectl prints it and exits non-zero.
    assert.notEqual(code, 0);
    assert.match(err, /the stream has ended/);
    assert.ok(Date.now() - startedAt <= 7000, `ended after ${Date.now() - startedAt} ms`);
  });

  test('with CAS_EXEC_RECORDING=output a kubectl session is recorded: the output, never the input', async () => {
    const recorded = await startKubeApiApp({
      cluster: 'alpha',
      namespace: `${ns}-rec`,
      env: { CAS_EXEC_RECORDING: 'output' },
    });
    try {
      const res = await recorded.t.app.inject({
        method: 'POST',
        url: '/api/v1/admin/roles',
        headers: { authorization: `Bearer ${recorded.adminToken}`, 'content-type': 'application/json' },
        payload: JSON.stringify({
          name: 'rec-dev',
          rules: [{ clusters: ['alpha'], namespaces: [ns], resources: ['pods'], verbs: ['get', 'exec'] }],
        }),
      });
      assert.equal(res.statusCode, 201, res.body);
      const file = join(recorded.dir, 'rec.yaml');
      await writeFile(
        file,
        await recorded.mint(await login(recorded.t, await createUser(recorded.t, { role: 'rec-dev' as never }))),
      );
      const result = await kubectl(
        file,
        ['exec', '-i', 'shell', '--', 'sh'],
        'write secret.txt typed-secret-value\necho shown-on-screen\nexit 4\n',
        recorded.dir,
      );
      assert.deepEqual(result, {
        code: 4,
        stdout: 'shown-on-screen\n',
        stderr: 'command terminated with exit code 4\n',
      });
      const end = await waitFor('the end row', async () => {
        const rows = await recorded.t.app.inject({
          method: 'GET',
          url: '/api/v1/admin/audit?operation=execPod&size=100',
          headers: { authorization: `Bearer ${recorded.adminToken}` },
        });
        return (JSON.parse(rows.body) as { events: any[] }).events.find((e) => e.detail?.event === 'end');
      });
      assert.equal(end.detail.exitCode, 4);
      assert.equal(end.detail.recording, true);
      const cast = await recorded.t.app.inject({
        method: 'GET',
        url: `/api/v1/admin/audit/${end.id}/recording`,
        headers: { authorization: `Bearer ${recorded.adminToken}` },
      });
      assert.equal(cast.statusCode, 200, cast.body);
      const events = cast.body
        .trim()
        .split('\n')
        .slice(1)
        .map((line) => JSON.parse(line) as [number, string, string]);
      assert.ok(
        events.every((e) => e[1] === 'o' || e[1] === 'r'),
        'output and resizes only',
      );
      const output = events.map((e) => e[2]).join('');
      assert.match(output, /shown-on-screen/);
      assert.doesNotMatch(output, /typed-secret-value|echo shown/);
    } finally {
      await recorded.close();
    }
  });

  test('on an impersonating cluster a kubectl exec is the person in the apiserver audit log', async () => {
    const imp = await startKubeApiApp({ cluster: 'alpha', namespace: `${ns}-imp`, impersonate: true });
    try {
      const res = await imp.t.app.inject({
        method: 'POST',
        url: '/api/v1/admin/roles',
        headers: { authorization: `Bearer ${imp.adminToken}`, 'content-type': 'application/json' },
        payload: JSON.stringify({
          name: 'imp-dev',
          rules: [{ clusters: ['alpha'], namespaces: [ns], resources: ['pods'], verbs: ['get', 'exec'] }],
        }),
      });
      assert.equal(res.statusCode, 201, res.body);
      const user = await createUser(imp.t, { role: 'imp-dev' as never });
      const file = join(imp.dir, 'imp.yaml');
      await writeFile(file, await imp.mint(await login(imp.t, user)));
      // The person needs the cluster's own permission too.
      const rbac = '/apis/rbac.authorization.k8s.io/v1/namespaces/' + ns;
      await kubeRequest(app.cp, 'POST', `${rbac}/roles`, {
        metadata: { name: 'imp-exec' },
        rules: [{ apiGroups: [''], resources: ['pods', 'pods/exec'], verbs: ['get', 'create'] }],
      });
      await kubeRequest(app.cp, 'POST', `${rbac}/rolebindings`, {
        metadata: { name: 'imp-exec' },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'imp-exec' },
        subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'Group', name: 'cas:role:imp-dev' }],
      });
      const marker = `as-person-${Date.now()}`;
      // A RoleBinding takes a moment to reach the apiserver's authorizer.
      await waitFor('the exec as the person', async () => {
        const result = await kubectl(file, ['exec', 'shell', '--', 'echo', marker], undefined, imp.dir);
        return result.code === 0 && result.stdout === `${marker}\n`;
      });
      const events = await waitForAudit(
        app.cp,
        (e) =>
          e.requestURI.includes(`/pods/shell/exec?command=echo&command=${marker}`) && e.stage === 'ResponseStarted',
      );
      assert.ok(events.length > 0, 'the exec is in the apiserver audit log');
      assert.equal(events[0].impersonatedUser?.username, `cas:${user.username}`);
      assert.ok(events[0].impersonatedUser?.groups?.includes('cas:role:imp-dev'));
    } finally {
      await imp.close();
    }
  });

  async function kubectl(
    file: string,
    args: string[],
    input?: string,
    home = app.dir,
  ): Promise<{ code: number; stdout: string; stderr: string }> {
    return new Promise((resolve) => {
      const child = execFile(
        KUBECTL,
        ['--kubeconfig', file, '-n', ns, ...args],
        { env: { ...process.env, HOME: join(home, 'home'), KUBECONFIG: '' }, timeout: 30_000 },
        (error, stdout, stderr) =>
          resolve({ code: error ? Number(error.code ?? -1) : 0, stdout: String(stdout), stderr: String(stderr) }),
      );
      child.stdin?.end(input ?? '');
    });
  }

  async function auditRows(operation: string): Promise<any[]> {
    const res = await app.t.app.inject({
      method: 'GET',
      url: `/api/v1/admin/audit?operation=${operation}&size=100`,
      headers: { authorization: `Bearer ${app.adminToken}` },
    });
    assert.equal(res.statusCode, 200, res.body);
    return (JSON.parse(res.body) as { events: any[] }).events;
  }
});
