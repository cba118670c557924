// Issue 43: ephemeral debug containers. POST /api/v1/pods/<ns>/<pod>/debug adds one through the real
// apiserver's pods/ephemeralcontainers subresource (EphemeralContainers on v1.20, the harness runs the
// feature gate), the test kubelet runs it, and the terminal's attach route reaches it on both protocols.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { kubeRequest, waitFor } from '../harness/control-plane.js';
import { startKubelet, type Kubelet } from '../harness/kubelet.js';
import { startClusterApp, type ClusterApp } from '../support/cluster-app.js';
import { createUser, login } from '../support/factories.js';
import { request } from '../support/http.js';
import { podOnNode } from '../support/kube.js';
import { openTerminal, type Opened, type TerminalClient } from '../support/terminal.js';

const UNPULLABLE = 'example.invalid/no-such-debugger:1';

function opened(result: Opened): TerminalClient {
  assert.ok(result.ok, `the upgrade was refused: ${result.ok ? '' : `${result.status} ${result.body}`}`);
  return result.client;
}

describe('debug containers: added to the pod, run by the kubelet, attached through the terminal', () => {
  const ns = `dbg-${process.pid}`;
  const nodeName = `dbg-node-${process.pid}`;
  let app: ClusterApp;
  let kubelet: Kubelet;
  let dev: { id: number; token: string; username: string };
  let star: string;
  let reader: string;

  const debug = (token: string, body: unknown, pod = 'box') =>
    request(app.t.app, 'POST', `/api/v1/pods/${ns}/${pod}/debug`, {
      token,
      headers: { 'x-cluster-name': 'alpha' },
      body,
    });
  const ephemeral = async (pod = 'box') =>
    ((await kubeRequest(app.cp, 'GET', `/api/v1/namespaces/${ns}/pods/${pod}`)).body.spec.ephemeralContainers ??
      []) as Array<Record<string, unknown>>;

  before(async () => {
    app = await startClusterApp({
      cluster: 'alpha',
      namespace: ns,
      listen: true,
      env: { CAS_EXEC_RECORDING: 'output', CAS_DEBUG_START_SECONDS: '10' },
    });
    kubelet = await startKubelet(app.cp, nodeName, { runPods: { unpullable: [UNPULLABLE] } });
    await podOnNode(app.cp, ns, 'box', nodeName);
    const admin = (path: string, body: unknown) => request(app.t.app, 'POST', path, { token: app.admin, body });
    const role = async (name: string, rules: unknown[]) =>
      assert.equal((await admin('/api/v1/admin/roles', { name, rules })).status, 201);
    const on = { clusters: ['alpha'], namespaces: [ns] };
    await role('dbg-dev', [
      { ...on, resources: ['pods'], verbs: ['get', 'attach'] },
      { ...on, resources: ['pods/ephemeralcontainers'], verbs: ['update'] },
    ]);
    await role('dbg-star', [{ clusters: ['*'], namespaces: ['*'], resources: ['*'], verbs: ['*'] }]);
    await role('dbg-reader', [{ ...on, resources: ['pods'], verbs: ['get', 'attach', 'update', 'patch'] }]);
    const user = await createUser(app.t, { role: 'dbg-dev' as never });
    dev = { id: user.id, username: user.username, token: await login(app.t, user) };
    star = await login(app.t, await createUser(app.t, { role: 'dbg-star' as never }));
    reader = await login(app.t, await createUser(app.t, { role: 'dbg-reader' as never }));
    await waitFor('the pod to run', async () => kubelet.pods!.runningAt(ns, 'box', 'app') !== undefined, 20_000);
  });

  after(async () => {
    await kubelet?.stop();
    await kubeRequest(app.cp, 'DELETE', `/api/v1/namespaces/${ns}`).catch(() => undefined);
    await app?.t.close();
  });

  test('a debug container is added as the cluster shows it, runs, and attach reaches it on both protocols', async () => {
    const res = await debug(dev.token, { image: 'busybox:1.36', target: 'app' });
    assert.equal(res.status, 201, res.text);
    const name = res.body.name as string;
    assert.match(name, /^debugger-[a-z0-9]{5}$/);
    assert.deepEqual(
      { ...res.body, name: undefined },
      {
        name: undefined,
        image: 'busybox:1.36',
        target: 'app',
        pod: 'box',
        namespace: ns,
        cluster: 'alpha',
        api: 'EphemeralContainers',
        attach: `/api/v1/pods/${ns}/box/attach?container=${name}&stdin=true&stdout=true&tty=true`,
      },
    );
    const added = (await ephemeral()).find((c) => c.name === name);
    assert.ok(added, 'the pod holds the ephemeral container');
    assert.deepEqual(
      { image: added.image, targetContainerName: added.targetContainerName, stdin: added.stdin, tty: added.tty },
      { image: 'busybox:1.36', targetContainerName: 'app', stdin: true, tty: true },
    );
    const pod = (await kubeRequest(app.cp, 'GET', `/api/v1/namespaces/${ns}/pods/box`)).body;
    const status = pod.status.ephemeralContainerStatuses.find((s: { name: string }) => s.name === name);
    assert.ok(status.state.running, 'the cluster shows it running when the route answers');

    const wsBase = app.base.replace(/^http/, 'ws');
    for (const protocol of ['v4.channel.k8s.io', 'v4.base64.channel.k8s.io']) {
      const before = kubelet.requests.length;
      const client = opened(
        await openTerminal(`${wsBase}${res.body.attach}&cluster=alpha`, {
          headers: { authorization: `Bearer ${dev.token}` },
          protocols: [protocol],
        }),
      );
      assert.equal(client.protocol, protocol);
      client.send(0, `echo inside-${protocol}\r`);
      await client.waitFor(`inside-${protocol}`);
      client.ws.close();
      await client.closed;
      assert.ok(
        kubelet.requests.slice(before).some((r) => r.startsWith(`/attach/${ns}/box/${name}?`)),
        'the attach reached the kubelet for the debug container',
      );
    }

    // The audit: who added which image aimed at which container; the attach's recording holds its output.
    const rows = async (operation: string) =>
      (await request(app.t.app, 'GET', '/api/v1/admin/audit', { token: app.admin, query: { operation, size: '100' } }))
        .body.events as any[];
    const row = (await rows('debugPod')).find((e) => e.detail?.container === name);
    assert.ok(row, 'a debugPod row');
    assert.deepEqual(
      {
        actor: row.actor.id,
        status: row.statusCode,
        image: row.detail.image,
        target: row.detail.target,
        cluster: row.target.cluster,
        resource: row.target.resource,
        namespace: row.target.namespace,
        name: row.target.name,
      },
      {
        actor: dev.id,
        status: 201,
        image: 'busybox:1.36',
        target: 'app',
        cluster: 'alpha',
        resource: 'pods/ephemeralcontainers',
        namespace: ns,
        name: 'box',
      },
    );
    const end = await waitFor('the attach end rows', async () => {
      const ends = (await rows('attachPod')).filter((e) => e.detail?.event === 'end' && e.actor.id === dev.id);
      return ends.length >= 2 ? ends : undefined;
    });
    const cast = await request(app.t.app, 'GET', `/api/v1/admin/audit/${end[0].id}/recording`, { token: app.admin });
    assert.equal(cast.status, 200);
    assert.match(cast.text, /inside-v4/);
  });

  test('the name and command asked for are used; the command is an argv, never a shell line', async () => {
    const res = await debug(dev.token, {
      image: 'busybox:1.36',
      name: 'dbg-named',
      command: ['sh', '-c', 'echo $HOME; id'],
    });
    assert.equal(res.status, 201, res.text);
    const added = (await ephemeral()).find((c) => c.name === 'dbg-named');
    assert.deepEqual(added?.command, ['sh', '-c', 'echo $HOME; id']);
    assert.equal(added?.targetContainerName, undefined);
    const again = await debug(dev.token, { image: 'busybox:1.36', name: 'dbg-named' });
    assert.equal(again.status, 409);
    assert.match(again.body.message, /already has a container named 'dbg-named'/);
    const app2 = await debug(dev.token, { image: 'busybox:1.36', name: 'app' });
    assert.equal(app2.status, 409, 'the name of a regular container is taken too');
  });

  test("without the named grant: 403 and nothing added — a '*' does not cover it, nor does update on pods", async () => {
    const count = (await ephemeral()).length;
    for (const token of [star, reader]) {
      const res = await debug(token, { image: 'busybox:1.36', target: 'app' });
      assert.equal(res.status, 403, res.text);
      assert.match(res.body.message, /pods\/ephemeralcontainers/);
    }
    // Both refusals are audited with what was asked (rows are written a moment after the answer).
    await waitFor('the refused rows', async () => {
      const refused = await request(app.t.app, 'GET', '/api/v1/admin/audit', {
        token: app.admin,
        query: { operation: 'debugPod', size: '100' },
      });
      const rows = (refused.body.events as any[]).filter((e) => e.statusCode === 403);
      return rows.length >= 2 && rows.every((e) => e.detail?.image === 'busybox:1.36' && e.detail?.target === 'app');
    });
    assert.equal((await ephemeral()).length, count, 'nothing was added');
  });

  test('bad input: a 400 naming the field, before the cluster is asked', async () => {
    const count = (await ephemeral()).length;
    const cases: Array<[unknown, RegExp]> = [
      [{}, /image/],
      [{ image: 'busybox; rm -rf /' }, /image must be an image reference/],
      [{ image: '$(curl evil)' }, /image must be an image reference/],
      [{ image: 'x'.repeat(600) }, /image must be at most 512/],
      [{ image: 'busybox', name: 'Bad_Name' }, /name must be a container name/],
      [{ image: 'busybox', name: 'a'.repeat(64) }, /name must be at most 63/],
      [{ image: 'busybox', target: 'app;id' }, /target must be a container name/],
      [{ image: 'busybox', command: 'sh -c id' }, /command must be a non-empty array/],
      [{ image: 'busybox', command: ['sh', 'a\u0000b'] }, /command\[1\] must not contain control characters/],
      [{ image: 'busybox', command: Array(65).fill('x') }, /at most 64 arguments/],
      [{ image: 'busybox', tty: false }, /property tty should not exist/],
      [{ image: 'busybox', target: 'nope' }, /target 'nope' is not a container of pod 'box' \(it has: app\)/],
    ];
    for (const [body, message] of cases) {
      const res = await debug(dev.token, body);
      assert.equal(res.status, 400, `${JSON.stringify(body).slice(0, 80)} → ${res.status} ${res.text}`);
      assert.match(JSON.stringify(res.body.message), message);
    }
    assert.equal((await ephemeral()).length, count, 'nothing was added');
    const missing = await debug(dev.token, { image: 'busybox' }, 'no-such-pod');
    assert.equal(missing.status, 404);
    assert.match(missing.body.message, /no-such-pod/);
  });

  test("an image the kubelet cannot pull: 422 with the kubelet's reason", async () => {
    const res = await debug(dev.token, { image: UNPULLABLE, name: 'dbg-unpullable' });
    assert.equal(res.status, 422, res.text);
    assert.match(
      res.body.message,
      /debug container 'dbg-unpullable' .* cannot start: ErrImagePull: .*no-such-debugger/,
    );
  });

  test('node shells are off unless CAS_NODE_SHELL_NAMESPACE is set: 404 saying so', async () => {
    const refused = await openTerminal(
      `${app.base.replace(/^http/, 'ws')}/api/v1/nodes/_all/${nodeName}/shell?cluster=alpha`,
      { headers: { authorization: `Bearer ${app.admin}` } },
    );
    assert.ok(!refused.ok);
    assert.equal(refused.status, 404);
    assert.match(JSON.parse(refused.body).message, /node shells are off .*CAS_NODE_SHELL_NAMESPACE/);
  });
});
