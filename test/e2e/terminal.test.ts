// Issue 31: exec, attach and port-forward over WebSocket on the REST route, relayed through the
// real apiserver to the test kubelet; every refusal a clear 4xx before any upstream connection.
import assert from 'node:assert/strict';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { kubeRequest, waitFor } from '../harness/control-plane.js';
import { startKubelet, type Kubelet } from '../harness/kubelet.js';
import * as kubeletStreams from '../harness/kubelet-streams.js';
import { startClusterApp, type ClusterApp } from '../support/cluster-app.js';
import { kubeconfigFor } from '../support/clusters.js';
import { createUser, login } from '../support/factories.js';
import { request } from '../support/http.js';
import { bearerProtocol, exitCodeOf, openTerminal, type Opened, type TerminalClient } from '../support/terminal.js';

function opened(result: Opened): TerminalClient {
  assert.ok(result.ok, `the upgrade was refused: ${result.ok ? '' : `${result.status} ${result.body}`}`);
  return result.client;
}

describe('the terminal: exec, attach and port-forward over WebSocket', () => {
  const ns = `term-${process.pid}`;
  const nodeName = `term-node-${process.pid}`;
  let app: ClusterApp;
  let kubelet: Kubelet;
  let wsBase: string;
  let dev: { id: number; token: string };
  let devName: string;
  let starOnly: string;
  let echoServer: net.Server;
  let echoPort: number;

  const url = (pod: string, verb: string, query: string, cluster = 'alpha') =>
    `${wsBase}/api/v1/pods/${ns}/${pod}/${verb}?${query}${cluster ? `&cluster=${cluster}` : ''}`;
  const auth = (token: string) => ({ authorization: `Bearer ${token}` });

  before(async () => {
    app = await startClusterApp({
      cluster: 'alpha',
      namespace: ns,
      viewer: true,
      listen: true,
      env: {
        CAS_EXEC_RECORDING: 'output',
        CAS_EXEC_MAX_SESSIONS_PER_CALLER: '3',
        CAS_EXEC_IDLE_SECONDS: '8',
        CAS_EXEC_PING_SECONDS: '1',
      },
    });
    wsBase = app.base.replace(/^http/, 'ws');
    kubelet = await startKubelet(app.cp, nodeName);
    for (const [name, containers] of [
      ['box', ['app']],
      ['duo', ['one', 'two']],
    ] as const) {
      const created = await kubeRequest(app.cp, 'POST', `/api/v1/namespaces/${ns}/pods`, {
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: { name, namespace: ns },
        spec: {
          nodeName,
          automountServiceAccountToken: false,
          containers: containers.map((c) => ({ name: c, image: 'example.invalid/never-pulled' })),
        },
      });
      assert.equal(created.status, 201, JSON.stringify(created.body));
    }
    const admin = (path: string, body: unknown, method = 'POST') =>
      request(app.t.app, method, path, { token: app.admin, body });
    const rule = (verbs: string[]) => ({ clusters: ['alpha', 'imp'], namespaces: [ns], resources: ['pods'], verbs });
    assert.equal(
      (
        await admin('/api/v1/admin/roles', {
          name: 'term-dev',
          rules: [rule(['get', 'exec', 'attach', 'portforward'])],
        })
      ).status,
      201,
    );
    assert.equal((await admin('/api/v1/admin/roles', { name: 'term-star', rules: [rule(['*'])] })).status, 201);
    // The same control plane once more, impersonating: the session reaches it as the person.
    assert.equal(
      (await admin('/api/v1/admin/clusters', { name: 'imp', config: kubeconfigFor(app.cp), impersonate: true })).status,
      201,
    );
    const devUser = await createUser(app.t, { role: 'term-dev' as never });
    devName = devUser.username;
    dev = { id: devUser.id, token: await login(app.t, devUser) };
    starOnly = await login(app.t, await createUser(app.t, { role: 'term-star' as never }));
    echoServer = net.createServer((socket) => socket.pipe(socket));
    await new Promise<void>((resolve) => echoServer.listen(0, '127.0.0.1', resolve));
    echoPort = (echoServer.address() as AddressInfo).port;
  });

  after(async () => {
    echoServer?.close();
    await kubelet?.stop();
    await kubeRequest(app.cp, 'DELETE', `/api/v1/namespaces/${ns}`).catch(() => undefined);
    await app?.t.close();
  });

  test('can-i, me/permissions and api-resources know the terminal verbs', async () => {
    const canI = async (token: string, verb: string) =>
      (
        await request(app.t.app, 'POST', '/api/v1/auth/can-i', {
          token,
          body: { cluster: 'alpha', resource: 'pods', namespace: ns, verb },
        })
      ).body;
    assert.equal((await canI(dev.token, 'exec')).allowed, true);
    assert.equal((await canI(dev.token, 'portforward')).allowed, true);
    assert.equal((await canI(app.viewer, 'exec')).allowed, false);
    const star = await canI(starOnly, 'attach');
    assert.equal(star.allowed, false);
    assert.match(star.reason, /names the verb 'attach'/);
    const resources = await request(app.t.app, 'GET', '/api/v1/clusters/alpha/api-resources', {
      token: dev.token,
      query: { namespace: ns },
    });
    assert.equal(resources.status, 200, resources.text);
    const pods = resources.body.resources.find((r: { id: string }) => r.id === 'pods');
    assert.deepEqual(
      pods.allowedVerbs.filter((v: string) => ['exec', 'attach', 'portforward'].includes(v)),
      ['exec', 'attach', 'portforward'],
    );
    const configmaps = resources.body.resources.find((r: { id: string }) => r.id === 'configmaps');
    assert.ok(!configmaps.allowedVerbs.includes('exec'), 'exec is a verb of pods only');
    const permissions = await request(app.t.app, 'GET', '/api/v1/auth/me/permissions', {
      token: dev.token,
      query: { cluster: 'alpha' },
    });
    assert.equal(permissions.status, 200, permissions.text);
    assert.ok(JSON.stringify(permissions.body).includes('"exec"'));
  });

  test('exec runs a command: its output on stdout, exit code 0 on the error channel, a normal close', async () => {
    const client = opened(
      await openTerminal(url('box', 'exec', 'command=echo&command=hello&stdout=true'), { headers: auth(dev.token) }),
    );
    assert.equal(client.protocol, 'v4.channel.k8s.io');
    const { code } = await client.closed;
    assert.equal(client.text(1), 'hello\n');
    assert.equal(exitCodeOf(client), 0);
    assert.equal(code, 1000);
  });

  test('a shell over the base64 protocol with the token as subprotocol: input in, output out, exit code 3', async () => {
    const client = opened(
      await openTerminal(url('box', 'exec', 'command=sh&stdin=true&stdout=true&stderr=true'), {
        protocols: [bearerProtocol(dev.token), 'v4.base64.channel.k8s.io'],
      }),
    );
    assert.equal(client.protocol, 'v4.base64.channel.k8s.io', 'the token is never the protocol answered');
    client.send(0, 'echo visible-output\n');
    await client.waitFor('visible-output');
    client.send(0, 'nosuchcmd\n');
    await client.waitFor('sh: nosuchcmd: not found', 2);
    client.send(0, 'exit 3\n');
    await client.closed;
    assert.equal(exitCodeOf(client), 3);
  });

  test('a tty: typed keys echoed, a resize reaches the container', async () => {
    const client = opened(
      await openTerminal(url('box', 'exec', 'command=sh&stdin=true&stdout=true&tty=true'), {
        headers: auth(dev.token),
      }),
    );
    client.send(4, JSON.stringify({ Width: 132, Height: 43 }));
    client.send(0, 'size\r');
    await client.waitFor('132x43');
    client.send(0, 'exit 0\r');
    await client.closed;
  });

  test('attach joins the container: stdin in, stdout out', async () => {
    const client = opened(
      await openTerminal(url('box', 'attach', 'stdin=true&stdout=true'), { headers: auth(dev.token) }),
    );
    client.send(0, 'echo attached\n');
    await client.waitFor('attached');
    client.ws.close();
    await client.closed;
  });

  test('port-forward relays a TCP stream to the pod port, with the port on both channels first', async () => {
    for (const protocol of ['portforward.k8s.io', 'v4.channel.k8s.io']) {
      const client = opened(
        await openTerminal(url('box', 'portforward', `ports=${echoPort}`), {
          headers: auth(dev.token),
          protocols: [protocol],
        }),
      );
      assert.equal(client.protocol, protocol);
      await waitFor(
        'the port headers',
        async () => client.messages(0).length >= 1 && client.messages(1).length >= 1,
        5000,
      );
      assert.equal(client.messages(0)[0].readUInt16LE(0), echoPort);
      assert.equal(client.messages(1)[0].readUInt16LE(0), echoPort);
      client.send(0, 'round trip');
      await waitFor(
        'the echo',
        async () => Buffer.concat(client.messages(0).slice(1)).toString() === 'round trip',
        5000,
      );
      client.ws.close();
      await client.closed;
    }
  });

  test('bad input: each a clear 4xx before any upstream connection', async () => {
    const before = kubelet.requests.length;
    const refused = async (u: string, options: Parameters<typeof openTerminal>[1], status: number, says: RegExp) => {
      const result = await openTerminal(u, options);
      assert.ok(!result.ok, `${u} was accepted`);
      assert.equal(result.status, status, result.body);
      const { message } = JSON.parse(result.body) as { message: string | string[] };
      assert.match(([] as string[]).concat(message).join('; '), says);
      return result;
    };
    const headers = auth(dev.token);
    // The cluster's own refusals: its Status passes through.
    await refused(url('ghost', 'exec', 'command=echo'), { headers }, 404, /pods "ghost" not found/);
    await refused(url('box', 'exec', 'command=echo&container=nope'), { headers }, 400, /container nope is not valid/);
    await refused(url('duo', 'exec', 'command=echo'), { headers }, 400, /container name must be specified/);
    // The service's own.
    await refused(
      url('box', 'exec', 'command=echo', 'nowhere'),
      { headers: auth(app.admin) },
      404,
      /cluster 'nowhere' not found/,
    );
    // A caller without rules there learns nothing about which clusters exist.
    await refused(
      url('box', 'exec', 'command=echo', 'nowhere'),
      { headers },
      403,
      /your roles grant nothing on cluster 'nowhere'/,
    );
    await refused(url('box', 'exec', 'command=echo', ''), { headers }, 400, /x-cluster-name header is required/);
    await refused(url('box', 'exec', 'command=echo'), { headers, protocols: [] }, 400, /subprotocol is required/);
    await refused(
      url('box', 'exec', 'command=echo'),
      { headers, protocols: ['chat'] },
      400,
      /offer one of v4.channel.k8s.io/,
    );
    await refused(url('box', 'exec', ''), { headers }, 400, /command is required/);
    await refused(
      url('box', 'exec', 'command=echo&shell=1'),
      { headers },
      400,
      /query parameter 'shell' is not accepted/,
    );
    await refused(url('box', 'portforward', 'ports=99999'), { headers }, 400, /ports must be port numbers/);
    await refused(url('box', 'exec', 'command=echo'), {}, 401, /authentication required/);
    await refused(url('box', 'exec', 'command=echo'), { headers: auth(app.viewer) }, 403, /do not allow exec on pods/);
    await refused(
      url('box', 'exec', 'command=echo'),
      { headers: auth(starOnly) },
      403,
      /names the verb 'exec'.*'\*' does not cover it/,
    );
    // A browser on another site sends the cookie along: refused, however valid the session.
    await refused(
      url('box', 'exec', 'command=echo'),
      { headers: { cookie: `cas_session=${dev.token}`, origin: 'https://evil.example' } },
      403,
      /origin 'https:\/\/evil.example' is not allowed/,
    );
    // The unknown pod and container were refused by the apiserver itself: the kubelet saw nothing.
    assert.equal(
      kubelet.requests.length,
      before,
      `the kubelet was reached: ${kubelet.requests.slice(before).join(', ')}`,
    );

    // A GET that is not an upgrade is told to upgrade.
    const plain = await fetch(`${app.base}/api/v1/pods/${ns}/box/exec?command=echo&cluster=alpha`, { headers });
    assert.equal(plain.status, 400);
    assert.match(await plain.text(), /exec is a WebSocket upgrade: send 'Connection: Upgrade'/);
  });

  test("the session cookie from the service's own origin works", async () => {
    const client = opened(
      await openTerminal(url('box', 'exec', 'command=echo&command=cookie-ok&stdout=true'), {
        headers: { cookie: `cas_session=${dev.token}`, origin: app.base },
      }),
    );
    await client.closed;
    assert.equal(client.text(1), 'cookie-ok\n');
  });

  test('more than the per-user limit: 429, and the sessions already open go on', async () => {
    const shells: TerminalClient[] = [];
    for (let i = 0; i < 3; i++) {
      shells.push(
        opened(
          await openTerminal(url('box', 'exec', 'command=sh&stdin=true&stdout=true'), { headers: auth(dev.token) }),
        ),
      );
    }
    const over = await openTerminal(url('box', 'exec', 'command=sh&stdin=true'), { headers: auth(dev.token) });
    assert.ok(!over.ok);
    assert.equal(over.status, 429);
    assert.match(over.body, /too many terminal sessions of this user.*at most 3/);
    shells[0].send(0, 'echo still-here\n');
    await shells[0].waitFor('still-here');
    for (const s of shells) s.ws.close();
    await Promise.all(shells.map((s) => s.closed));
  });

  test('a client upgrade that never completes leaves no session on the cluster and gives its slot back', async () => {
    const port = Number(new URL(app.base).port);
    const upgrade = (key: string) =>
      [
        `GET /api/v1/pods/${ns}/box/exec?command=sh&stdin=true&stdout=true&cluster=alpha HTTP/1.1`,
        `Host: 127.0.0.1:${port}`,
        'Connection: Upgrade',
        'Upgrade: websocket',
        'Sec-WebSocket-Version: 13',
        `Sec-WebSocket-Key: ${key}`,
        'Sec-WebSocket-Protocol: v4.channel.k8s.io',
        `Authorization: Bearer ${dev.token}`,
        '',
        '',
      ].join('\r\n');
    /** Sends the request (`leave`: and the client's FIN right behind it); resolves with all that came back. */
    const send = (text: string, leave: boolean) =>
      new Promise<string>((resolve, reject) => {
        const socket = net.connect(port, '127.0.0.1', () => (leave ? socket.end(text) : socket.write(text)));
        let answer = '';
        socket.on('data', (chunk: Buffer) => (answer += chunk.toString('latin1')));
        socket.on('error', reject);
        socket.on('close', () => resolve(answer));
      });
    // One of the caller's three slots held by a shell, so a slot kept by either attempt below shows.
    const held = opened(
      await openTerminal(url('box', 'exec', 'command=sh&stdin=true&stdout=true'), { headers: auth(dev.token) }),
    );
    await waitFor('the held shell on the kubelet', async () => kubelet.openStreams() === 1, 10_000);
    const execsBefore = kubelet.requests.filter((r) => r.startsWith('/exec/')).length;

    const execs = () => kubelet.requests.filter((r) => r.startsWith('/exec/')).length;
    // A handshake the WebSocket server would refuse is refused before the cluster runs anything.
    assert.match(await send(upgrade('not-a-key'), false), /^HTTP\/1\.1 400 [^]*Sec-WebSocket-Key/);
    assert.equal(execs(), execsBefore, 'the cluster was not asked');
    // The client leaves right after its request: the cluster opens the session, then the service
    // finds the client gone when it completes the upgrade.
    assert.equal(await send(upgrade(Buffer.alloc(16, 1).toString('base64')), true), '');
    assert.equal(execs(), execsBefore + 1, 'the cluster was asked');
    await waitFor('only the held shell left on the kubelet', async () => kubelet.openStreams() === 1, 10_000);
    // The command did start on the cluster: the audit log says so.
    await waitFor('an abandoned row', async () => {
      const res = await request(app.t.app, 'GET', '/api/v1/admin/audit', {
        token: app.admin,
        query: { operation: 'execPod', size: '100' },
      });
      return res.body.events.some((e: any) => e.detail?.event === 'abandoned' && e.actor.id === dev.id);
    });
    const more = [
      opened(await openTerminal(url('box', 'exec', 'command=sh&stdin=true&stdout=true'), { headers: auth(dev.token) })),
      opened(await openTerminal(url('box', 'exec', 'command=sh&stdin=true&stdout=true'), { headers: auth(dev.token) })),
    ];
    for (const s of [held, ...more]) {
      s.send(0, 'echo alive\n');
      await s.waitFor('alive');
      s.ws.close();
    }
    await Promise.all([held, ...more].map((s) => s.closed));
  });

  test('the audit log has a start and an end row; the recording holds the output, never the input', async () => {
    const client = opened(
      await openTerminal(url('box', 'exec', 'command=sh&stdin=true&stdout=true'), { headers: auth(dev.token) }),
    );
    client.send(0, 'write secret.txt typed-secret-value\n');
    client.send(0, 'echo shown-on-screen\n');
    await client.waitFor('shown-on-screen');
    client.send(0, 'exit 7\n');
    await client.closed;
    let end: any;
    await waitFor(
      'the end row',
      async () => {
        const res = await request(app.t.app, 'GET', '/api/v1/admin/audit', {
          token: app.admin,
          query: { operation: 'execPod', size: '100' },
        });
        end = res.body.events.find((e: any) => e.detail?.event === 'end' && e.detail.exitCode === 7);
        return end !== undefined;
      },
      10_000,
    );
    const res = await request(app.t.app, 'GET', '/api/v1/admin/audit', {
      token: app.admin,
      query: { operation: 'execPod', size: '100' },
    });
    const start = res.body.events.find((e: any) => e.requestId === end.requestId && e.detail?.event === 'start');
    assert.ok(start, 'a start row with the same request id');
    assert.deepEqual(
      {
        cluster: start.target.cluster,
        namespace: start.target.namespace,
        name: start.target.name,
        command: start.detail.command,
        tty: start.detail.tty,
      },
      { cluster: 'alpha', namespace: ns, name: 'box', command: ['sh'], tty: false },
    );
    assert.equal(end.actor.id, dev.id);
    assert.ok(end.detail.bytesIn > 0 && end.detail.bytesOut > 0 && end.detail.durationMs >= 0);
    assert.equal(end.detail.recording, true);
    const cast = await request(app.t.app, 'GET', `/api/v1/admin/audit/${end.id}/recording`, { token: app.admin });
    assert.equal(cast.status, 200);
    assert.match(String(cast.headers['content-type']), /asciicast/);
    const [header, ...events] = cast.text
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line));
    assert.equal(header.version, 2);
    assert.ok(
      events.every((e: unknown[]) => e[1] === 'o' || e[1] === 'r'),
      'output and resizes only',
    );
    const output = events.map((e: unknown[]) => e[2]).join('');
    assert.match(output, /shown-on-screen/);
    assert.doesNotMatch(output, /typed-secret-value|echo shown/);
    // Only admins read recordings.
    assert.equal(
      (await request(app.t.app, 'GET', `/api/v1/admin/audit/${end.id}/recording`, { token: dev.token })).status,
      403,
    );
  });

  test('re-authorization: losing the role ends the session within 5 s, with a Status on the error channel', async () => {
    const user = await createUser(app.t, { role: 'term-dev' as never });
    const token = await login(app.t, user);
    const client = opened(
      await openTerminal(url('box', 'exec', 'command=sh&stdin=true&stdout=true'), { headers: auth(token) }),
    );
    client.send(0, 'echo before\n');
    await client.waitFor('before');
    const res = await request(app.t.app, 'PUT', `/api/v1/admin/users/${user.id}/roles`, {
      token: app.admin,
      body: { roles: ['viewer'] },
    });
    assert.equal(res.status, 200, res.text);
    const startedAt = Date.now();
    const { code, reason } = await client.closed;
    assert.ok(Date.now() - startedAt <= 6000, `ended after ${Date.now() - startedAt} ms`);
    assert.equal(code, 4403);
    assert.match(reason, /exec on pods/);
    const status = JSON.parse(client.text(3));
    assert.equal(status.reason, 'Forbidden');
    assert.match(status.message, /the stream has ended/);
  });

  test('an idle session is pinged, then closed after CAS_EXEC_IDLE_SECONDS', async () => {
    const client = opened(
      await openTerminal(url('box', 'exec', 'command=sh&stdin=true&stdout=true'), { headers: auth(dev.token) }),
    );
    const startedAt = Date.now();
    const { code, reason } = await client.closed;
    const elapsed = Date.now() - startedAt;
    assert.ok(elapsed >= 7000 && elapsed <= 11_000, `closed after ${elapsed} ms`);
    assert.ok(client.pings() >= 3, `${client.pings()} pings`);
    assert.equal(code, 4408);
    assert.match(reason, /idle/);
    assert.match(JSON.parse(client.text(3)).message, /no traffic for 8 s/);
  });

  test('on an impersonating cluster the session is the person: refused by the cluster without RBAC, then allowed', async () => {
    const imp = url('box', 'exec', 'command=echo&command=as-person&stdout=true', 'imp');
    const refused = await openTerminal(imp, { headers: auth(dev.token) });
    assert.ok(!refused.ok);
    assert.equal(refused.status, 403);
    assert.ok(
      (JSON.parse(refused.body) as { message: string }).message.includes(
        `User "cas:${devName}" cannot get resource "pods/exec"`,
      ),
      refused.body,
    );
    const made = await kubeRequest(app.cp, 'POST', `/apis/rbac.authorization.k8s.io/v1/namespaces/${ns}/roles`, {
      metadata: { name: 'exec' },
      rules: [{ apiGroups: [''], resources: ['pods', 'pods/exec'], verbs: ['get', 'create'] }],
    });
    assert.equal(made.status, 201, JSON.stringify(made.body));
    const bound = await kubeRequest(
      app.cp,
      'POST',
      `/apis/rbac.authorization.k8s.io/v1/namespaces/${ns}/rolebindings`,
      {
        metadata: { name: 'exec' },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'exec' },
        subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'Group', name: 'cas:role:term-dev' }],
      },
    );
    assert.equal(bound.status, 201, JSON.stringify(bound.body));
    const client = await waitFor('the RoleBinding to take effect', async () => {
      const result = await openTerminal(imp, { headers: auth(dev.token) });
      return result.ok ? result.client : undefined;
    });
    await client.closed;
    assert.equal(client.text(1), 'as-person\n');
  });

  test("backpressure: a client that stops reading stalls the container's output; nothing is lost", async () => {
    const client = opened(
      await openTerminal(url('box', 'exec', 'command=sh&stdin=true&stdout=true'), { headers: auth(dev.token) }),
    );
    // Loopback TCP buffers autotune to several MiB per socket, and four sockets lie between the kubelet
    // and the client: up to ~45 MiB has been seen in flight. 128 MiB leaves the half-way bound clear of that.
    const total = 128 * 1024 * 1024;
    const start = kubeletStreams.floodedBytes;
    client.ws.pause();
    client.send(0, `flood ${total}\n`);
    await sleep(3000);
    const stalledAt = kubeletStreams.floodedBytes - start;
    await sleep(2000);
    const later = kubeletStreams.floodedBytes - start;
    assert.ok(stalledAt < total / 2, `the kubelet wrote ${stalledAt} bytes toward a client that reads nothing`);
    assert.ok(later - stalledAt < 1024 * 1024, `still flowing: ${stalledAt} → ${later}`);
    let received = 0;
    client.ws.on('message', (m: Buffer) => (received += m.length - 1));
    client.ws.resume();
    await waitFor('the whole output', async () => received >= total, 60_000);
    client.ws.close();
    await client.closed;
  });

  test('one session breaking never touches another', async () => {
    const a = opened(
      await openTerminal(url('box', 'exec', 'command=sh&stdin=true&stdout=true'), { headers: auth(dev.token) }),
    );
    const b = opened(
      await openTerminal(url('box', 'exec', 'command=sh&stdin=true&stdout=true'), { headers: auth(dev.token) }),
    );
    a.ws.terminate(); // the client vanishes without a close frame
    await sleep(300);
    b.send(0, 'echo b-alive\n');
    await b.waitFor('b-alive');
    b.ws.close();
    await b.closed;
  });
});
