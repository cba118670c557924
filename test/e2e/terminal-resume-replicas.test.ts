// Database: runs on PostgreSQL too: the replicas find each other's addresses in the shared database.
// Resumable terminal sessions across two replicas (real processes on one database, no stickiness): a
// counter cut ten times, half of the resumptions landing on the replica that does not hold the session
// and forwarded to the one that does; another user refused by the holder; the holder killed with
// SIGKILL: "session lost" at once.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { WebSocket } from 'ws';
import { kubeRequest, sharedControlPlane, waitFor, type ControlPlane } from '../harness/control-plane.js';
import { startKubelet, type Kubelet } from '../harness/kubelet.js';
import { createPostgresDatabase, onPostgres } from '../support/app.js';
import { kubeconfigFor } from '../support/clusters.js';
import { closedPort } from '../support/kubeconfigs.js';
import { startServiceProcess, type ServiceProcess } from '../support/service-process.js';
import { podOnNode } from '../support/kube.js';

/** A console's state across its sockets: the session id and the bytes of output counted. */
interface Screen {
  id: string;
  bytes: number;
  out: string;
  status: string;
}

type Opened = { ok: true; ws: WebSocket; closed: Promise<number> } | { ok: false; status: number; body: string };

function connect(url: string, screen: Screen, token?: string): Promise<Opened> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, ['v4.channel.k8s.io'], {
      headers: token ? { authorization: `Bearer ${token}` } : {},
      perMessageDeflate: false,
    });
    ws.on('unexpected-response', (_req, res) => {
      let body = '';
      res.on('data', (c: Buffer) => (body += c.toString()));
      res.on('end', () => resolve({ ok: false, status: res.statusCode ?? 0, body }));
    });
    ws.on('error', reject);
    ws.on('message', (raw: Buffer, isBinary: boolean) => {
      if (!isBinary) return void (screen.id = (JSON.parse(raw.toString()) as { session: string }).session);
      if (raw[0] === 1 || raw[0] === 2) {
        screen.bytes += raw.length - 1;
        // Stderr marked (its lines never follow each other here, so each comes as a message of its own).
        screen.out += (raw[0] === 2 ? '!' : '') + raw.subarray(1).toString();
      } else if (raw[0] === 3) screen.status += raw.subarray(1).toString();
    });
    const closed = new Promise<number>((done) => ws.on('close', (code) => done(code)));
    ws.on('open', () => resolve({ ok: true, ws, closed }));
  });
}

function opened(result: Opened): { ws: WebSocket; closed: Promise<number> } {
  assert.ok(result.ok, result.ok ? '' : `refused: ${result.status} ${result.body}`);
  return result;
}

describe('resumable terminal sessions on two replicas', () => {
  const ns = `term-resume-rep-${process.pid}`;
  const nodeName = `term-resume-rep-node-${process.pid}`;
  let cp: ControlPlane;
  let kubelet: Kubelet;
  let dataDir: string;
  let drop: (() => Promise<void>) | undefined;
  let a: ServiceProcess;
  let b: ServiceProcess;
  let token: string;
  let otherToken: string;

  const url = (service: ServiceProcess, query: string) =>
    `${service.base.replace(/^http/, 'ws')}/api/v1/pods/${ns}/box/exec?cluster=alpha&${query}`;
  const execs = () => kubelet.requests.filter((r) => r.startsWith('/exec/')).length;

  before(async () => {
    cp = await sharedControlPlane('a');
    dataDir = await mkdtemp(join(tmpdir(), 'cas-term-resume-rep-'));
    let databaseUrl = `sqlite:${join(dataDir, 'cas.sqlite')}`;
    if (onPostgres) ({ url: databaseUrl, drop } = await createPostgresDatabase());
    const env = {
      CAS_DATA_DIR: dataDir,
      DATABASE_URL: databaseUrl,
      CAS_ENCRYPTION_KEY: randomBytes(32).toString('base64'),
      CAS_BOOTSTRAP_USERNAME: 'admin',
      CAS_BOOTSTRAP_PASSWORD: 'admin-password-1',
      CAS_REPLICA_SECRET: randomBytes(32).toString('base64url'),
      CAS_SESSION_RESUME_SECONDS: '30',
    };
    const [portA, portB] = [await closedPort(), await closedPort()];
    a = await startServiceProcess({ ...env, CAS_REPLICA_URL: `http://127.0.0.1:${portA}` }, portA);
    b = await startServiceProcess({ ...env, CAS_REPLICA_URL: `http://127.0.0.1:${portB}` }, portB);
    const login = async (username: string, password: string) =>
      (await a.api('POST', '/api/v1/auth/login', { body: { username, password } })).body.token as string;
    token = await login('admin', 'admin-password-1');
    const registered = await a.api('POST', '/api/v1/admin/clusters', {
      token,
      body: { name: 'alpha', config: kubeconfigFor(cp) },
    });
    assert.equal(registered.status, 201);
    const other = await a.api('POST', '/api/v1/admin/users', {
      token,
      body: { username: 'other', password: 'other-password-1' },
    });
    assert.equal(other.status, 201);
    const roles = await a.api('PUT', `/api/v1/admin/users/${other.body.id}/roles`, {
      token,
      body: { roles: ['admin'] },
    });
    assert.equal(roles.status, 200);
    otherToken = await login('other', 'other-password-1');
    await kubeRequest(cp, 'POST', '/api/v1/namespaces', { metadata: { name: ns } });
    kubelet = await startKubelet(cp, nodeName);
    await podOnNode(cp, ns, 'box', nodeName);
  });

  after(async () => {
    for (const s of [a, b]) if (s?.child.exitCode === null) s.child.kill('SIGKILL');
    await kubelet?.stop();
    await kubeRequest(cp, 'DELETE', `/api/v1/namespaces/${ns}`).catch(() => undefined);
    await drop?.();
    await rm(dataDir, { recursive: true, force: true });
  });

  test('a counter cut 10 times, every other resumption on the other replica: no gap, no duplicate, one exec', async () => {
    const lines = 1000;
    const query = `command=count&command=${lines}&command=10&command=both&stdout=true&stderr=true`;
    const screen: Screen = { id: '', bytes: 0, out: '', status: '' };
    const execsBefore = execs();
    let conn = opened(await connect(url(a, `${query}&resumable=true`), screen, token));
    const latencies = { same: [] as number[], other: [] as number[] };
    for (let cut = 0; cut < 10; cut++) {
      const seen = screen.bytes;
      await waitFor('more output', async () => screen.bytes > seen + 50, 15_000, 10);
      conn.ws.terminate();
      await conn.closed;
      const onB = cut % 2 === 0;
      const startedAt = performance.now();
      conn = opened(
        await connect(url(onB ? b : a, `${query}&resume=${screen.id}&offset=${screen.bytes}`), screen, token),
      );
      (onB ? latencies.other : latencies.same).push(performance.now() - startedAt);
    }
    assert.equal(await conn.closed, 1000);
    const expected = Array.from({ length: lines }, (_, i) => `${(i + 1) % 2 === 0 ? '!' : ''}${i + 1}\n`).join('');
    assert.equal(screen.out, expected, 'every line once, in order, stdout and stderr');
    assert.equal(JSON.parse(screen.status).status, 'Success');
    assert.equal(execs(), execsBefore + 1, 'one exec at the kubelet');
    const max = (xs: number[]) => Math.round(Math.max(...xs));
    console.log(
      `resume latency: same replica max ${max(latencies.same)} ms, other replica max ${max(latencies.other)} ms`,
    );
    // The session's rows are one session's, on the replica holding it.
    const rows = await waitFor('the end row', async () => {
      const res = await a.api('GET', '/api/v1/admin/audit?operation=execPod&size=100', { token });
      const mine = (res.body.events as Array<{ detail: Record<string, unknown>; requestId: string }>).filter(
        (e) =>
          e.detail?.resumed === 10 ||
          (e.detail?.event === 'start' && (e.detail.command as string[])?.[1] === String(lines)),
      );
      return mine.some((e) => e.detail.event === 'end') ? mine : undefined;
    });
    const end = rows.find((e) => e.detail.event === 'end')!;
    assert.equal(end.detail.reason, 'the command ended');
    assert.equal(rows.filter((e) => e.requestId === end.requestId).length, 2, 'a start row and an end row');
  });

  test('through the other replica, another user is refused by the holder (403) and nobody anonymous gets in', async () => {
    const screen: Screen = { id: '', bytes: 0, out: '', status: '' };
    const query = 'command=sh&stdin=true&stdout=true';
    const conn = opened(await connect(url(a, `${query}&resumable=true`), screen, token));
    conn.ws.send(Buffer.concat([Buffer.from([0]), Buffer.from('echo mine\n')]));
    await waitFor('the output', async () => screen.out === 'mine\n', 10_000, 10);
    conn.ws.terminate();
    await conn.closed;
    const resume = `${query}&resume=${screen.id}&offset=${screen.bytes}`;
    const theirs = await connect(url(b, resume), { ...screen }, otherToken);
    assert.ok(!theirs.ok);
    assert.equal(theirs.status, 403);
    assert.match(theirs.body, /is another user's/);
    const anonymous = await connect(url(b, resume), { ...screen });
    assert.ok(!anonymous.ok);
    assert.equal(anonymous.status, 401);
    const back = opened(await connect(url(b, resume), screen, token));
    back.ws.send(Buffer.concat([Buffer.from([0]), Buffer.from('echo still-mine\n')]));
    await waitFor('the output', async () => screen.out === 'mine\nstill-mine\n', 10_000, 10);
    back.ws.close(1000);
    await back.closed;
  });

  test('the holder killed with SIGKILL: resuming on the other replica is "session lost" at once, and audited', async () => {
    const screen: Screen = { id: '', bytes: 0, out: '', status: '' };
    const query = 'command=sh&stdin=true&stdout=true';
    const conn = opened(await connect(url(a, `${query}&resumable=true`), screen, token));
    conn.ws.send(Buffer.concat([Buffer.from([0]), Buffer.from('echo hi\n')]));
    await waitFor('the output', async () => screen.out === 'hi\n', 10_000, 10);
    conn.ws.terminate();
    await conn.closed;
    a.child.kill('SIGKILL');
    await a.exited;
    const startedAt = Date.now();
    const lost = await connect(url(b, `${query}&resume=${screen.id}&offset=${screen.bytes}`), screen, token);
    const elapsed = Date.now() - startedAt;
    assert.ok(!lost.ok);
    assert.equal(lost.status, 410);
    assert.match(lost.body, /is lost: the replica holding it does not answer/);
    assert.ok(elapsed < 3000, `answered after ${elapsed} ms`);
    await waitFor('a row saying the session was lost', async () => {
      const res = await b.api('GET', '/api/v1/admin/audit?operation=execPod&size=100', { token });
      return (res.body.events as Array<{ detail: Record<string, unknown> }>).some(
        (e) => e.detail?.event === 'lost' && e.detail.session === screen.id,
      );
    });
  });
});
