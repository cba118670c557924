// The terminal's bounds on what a session's messages and headers may cost the replica, through the real
// apiserver to the test kubelet: a WebSocket message over 1 MiB either way ends the session (1009 toward
// the side that sent it), and SPDY header blocks are inflated once each and within bounds, so that one
// that inflates to 16 MiB followed by 400 tiny ones ends the session with a Status naming the bound while
// the replica goes on answering.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { kubeRequest, waitFor } from '../harness/control-plane.js';
import { startKubelet, type Kubelet } from '../harness/kubelet.js';
import { FLAG_FIN, type SpdyFrame, SpdyFrameReader } from '../../src/terminal/spdy-frames.js';
import { startClusterApp, type ClusterApp } from '../support/cluster-app.js';
import { loopHeld, within } from '../support/timing.js';
import { createUser, login } from '../support/factories.js';
import { request } from '../support/http.js';
import { HeaderCompressor, type Headers, spdyUpgrade } from '../support/spdy-client.js';
import { openTerminal, type Opened, type TerminalClient } from '../support/terminal.js';

const KIB = 1024;
const MIB = 1024 * KIB;

function opened(result: Opened): TerminalClient {
  assert.ok(result.ok, `the upgrade was refused: ${result.ok ? '' : `${result.status} ${result.body}`}`);
  return result.client;
}

describe("the terminal's bounds: WebSocket messages and SPDY header blocks", () => {
  const ns = `term-bounds-${process.pid}`;
  const nodeName = `term-bounds-node-${process.pid}`;
  let app: ClusterApp;
  let kubelet: Kubelet;
  let token: string;
  const shell = () =>
    openTerminal(
      `${app.base.replace(/^http/, 'ws')}/api/v1/pods/${ns}/box/exec?command=sh&stdin=true&stdout=true&cluster=alpha`,
      { headers: { authorization: `Bearer ${token}` } },
    );
  const endRows = async () => {
    const res = await request(app.t.app, 'GET', '/api/v1/admin/audit', {
      token: app.admin,
      query: { operation: 'execPod', size: '100' },
    });
    return (res.body.events as any[]).filter((e) => e.detail?.event === 'end');
  };

  before(async () => {
    app = await startClusterApp({ cluster: 'alpha', namespace: ns, listen: true });
    kubelet = await startKubelet(app.cp, nodeName);
    const created = await kubeRequest(app.cp, 'POST', `/api/v1/namespaces/${ns}/pods`, {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: 'box', namespace: ns },
      spec: {
        nodeName,
        automountServiceAccountToken: false,
        containers: [{ name: 'app', image: 'example.invalid/never-pulled' }],
      },
    });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const role = await request(app.t.app, 'POST', '/api/v1/admin/roles', {
      token: app.admin,
      body: {
        name: 'bounds-dev',
        rules: [{ clusters: ['alpha'], namespaces: [ns], resources: ['pods'], verbs: ['get', 'exec'] }],
      },
    });
    assert.equal(role.status, 201, role.text);
    token = await login(app.t, await createUser(app.t, { role: 'bounds-dev' as never }));
  });

  after(async () => {
    await kubelet?.stop();
    await kubeRequest(app.cp, 'DELETE', `/api/v1/namespaces/${ns}`).catch(() => undefined);
    await app?.t.close();
  });

  test('a stdin message over 1 MiB closes the session with 1009 and reaches nothing; one under it goes through', async () => {
    const client = opened(await shell());
    client.send(0, `write under.txt ${'u'.repeat(512 * KIB)}\n`);
    client.send(0, 'ls\n');
    await client.waitFor('under.txt');
    client.send(0, `write over.txt ${'o'.repeat(2 * MIB)}\n`);
    const { code } = await within('the close', 10_000, client.closed);
    assert.equal(code, 1009);
    // The shell never got the line: a new session in the same container has no such file.
    const next = opened(await shell());
    next.send(0, 'ls\n');
    await next.waitFor('under.txt');
    assert.doesNotMatch(next.text(1), /over\.txt/);
    next.ws.close();
    await next.closed;
    const end = await waitFor('the end row', async () =>
      (await endRows()).find((e) => /message over 1 MiB/.test(e.detail.reason)),
    );
    assert.equal(end.detail.reason, 'the client sent a message over 1 MiB: closed with 1009 (message too big)');
  });

  test("the cluster's message over 1 MiB ends the session with a Status; its 64 KiB ones arrive whole", async () => {
    const normal = opened(await shell());
    let received = 0;
    normal.ws.on('message', (m: Buffer) => (received += m.length - 1));
    normal.send(0, `flood ${8 * MIB}\n`);
    await waitFor('8 MiB of output', async () => received >= 8 * MIB, 30_000);
    normal.ws.close();
    await normal.closed;

    const client = opened(await shell());
    client.send(0, `flood ${2 * MIB} ${2 * MIB}\n`);
    const { code, reason } = await within('the close', 10_000, client.closed);
    assert.equal(code, 4502);
    assert.equal(reason, 'the cluster sent a message over 1 MiB; the session has ended');
    const status = JSON.parse(client.text(3)) as { reason: string; message: string };
    assert.deepEqual(
      { reason: status.reason, message: status.message },
      { reason: 'BadGateway', message: 'the cluster sent a message over 1 MiB; the session has ended' },
    );
    assert.equal(client.text(1), '', 'nothing of the message reached the client');
  });

  test('SPDY: a 16 MiB header block and 400 tiny ones end the session with a Status naming the bound; the replica goes on', async () => {
    const upgrade = await spdyUpgrade(
      new URL(
        `${app.base}/api/v1/clusters/alpha/k8s/api/v1/namespaces/${ns}/pods/box/exec?command=sh&stdin=true&stdout=true`,
      ),
      { authorization: `Bearer ${token}`, 'x-stream-protocol-version': 'v4.channel.k8s.io' },
    );
    assert.equal(upgrade.status, 101, upgrade.head);
    const { socket } = upgrade;
    const frames: SpdyFrame[] = [];
    const reader = new SpdyFrameReader();
    frames.push(...reader.push(upgrade.rest).frames);
    socket.on('data', (chunk: Buffer) => frames.push(...reader.push(chunk).frames));
    const closed = new Promise<void>((resolve) => socket.on('close', () => resolve()));
    socket.resume();

    const compressor = new HeaderCompressor();
    const opening = await compressor.synStreams([[['streamtype', 'error']], [['streamtype', 'stdin']]]);
    const attack = await compressor.synStreams(
      [
        [
          ['streamtype', 'stdout'],
          ['x', 'a'.repeat(16 * MIB)],
        ],
        ...Array.from({ length: 400 }, (_, i): Headers => [['streamtype', `s${i}`]]),
      ],
      5,
    );
    compressor.close();
    // The session is open: the kubelet has the error and stdin streams and answers on them.
    socket.write(Buffer.concat(opening));
    await waitFor('the kubelet to reply to both streams', async () => frames.length >= 2, 10_000);

    let polls = 0;
    let slowest = 0;
    const failures: string[] = [];
    let polling = true;
    const poll = (async () => {
      while (polling) {
        const started = Date.now();
        const res = await fetch(`${app.base}/healthz`).catch((e: Error) => e);
        slowest = Math.max(slowest, Date.now() - started);
        polls++;
        if (res instanceof Error || res.status !== 200) failures.push(String(res instanceof Error ? res : res.status));
        await sleep(20);
      }
    })();
    const { heldMs } = await loopHeld(async () => {
      socket.write(Buffer.concat(attack));
      await within('the end of the session', 20_000, closed);
    });
    polling = false;
    await poll;
    const line = `SPDY header attack: the loop held ${heldMs.toFixed(1)} ms at most; ${polls} /healthz answered, the slowest in ${slowest} ms`;
    console.log(line);
    assert.ok(heldMs < 100, line);
    assert.deepEqual(failures, []);
    assert.ok(polls > 0);

    const message = 'a SPDY header block inflates past 16 KiB: the session has ended';
    const last = frames.at(-1)!;
    assert.deepEqual(
      [last.control, last.streamId, last.flags & FLAG_FIN],
      [false, 1, FLAG_FIN],
      'a last DATA on the error stream',
    );
    const status = JSON.parse(last.body.toString('utf8')) as { reason: string; message: string };
    assert.deepEqual({ reason: status.reason, message: status.message }, { reason: 'BadRequest', message });
    const end = await waitFor('the end row', async () => (await endRows()).find((e) => e.detail.reason === message));
    assert.equal(end.detail.protocol, 'SPDY/3.1');
    // Nothing of the session is left open on the cluster, and the next session works.
    await waitFor('the kubelet to close the session', async () => kubelet.openStreams() === 0, 10_000);
    const next = opened(await shell());
    next.send(0, 'echo still-serving\n');
    await next.waitFor('still-serving');
    next.ws.close();
    await next.closed;
  });
});
