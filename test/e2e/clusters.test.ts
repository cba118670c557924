// Database: runs on PostgreSQL too: the cluster registry is stored.
import assert from 'node:assert/strict';
import net from 'node:net';
import { after, before, describe, test } from 'node:test';
import { sharedControlPlane, waitFor, type ControlPlane } from '../harness/control-plane.js';
import { startTestApp, type TestApp } from '../support/app.js';
import { signedIn } from '../support/factories.js';
import { client, type Response } from '../support/http.js';
import { b64, closedPort, contextFor, kubeconfigYaml } from '../support/kubeconfigs.js';

const PROBE_TIMEOUT_MS = 1000;
const ENV = { CAS_CLUSTER_HEALTH_INTERVAL_SECONDS: '1', CAS_CLUSTER_PROBE_TIMEOUT_MS: String(PROBE_TIMEOUT_MS) };

/** Accepts TCP connections on 127.0.0.1:port and pipes them to the target (a real API server). */
async function tcpProxy(port: number, target: string): Promise<{ close(): Promise<void> }> {
  const { hostname, port: targetPort } = new URL(target);
  const sockets = new Set<net.Socket>();
  const server = net.createServer((socket) => {
    const upstream = net.connect(Number(targetPort), hostname);
    for (const s of [socket, upstream]) {
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
      s.on('error', () => {
        socket.destroy();
        upstream.destroy();
      });
    }
    socket.pipe(upstream).pipe(socket);
  });
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  return {
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}

/** Accepts TCP connections and never says a word: a cluster that hangs. */
async function silentServer(): Promise<{ port: number; close(): Promise<void> }> {
  const sockets = new Set<net.Socket>();
  const server = net.createServer((socket) => {
    sockets.add(socket);
    socket.on('error', () => undefined);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as net.AddressInfo).port,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}

describe('cluster registry against real control planes', () => {
  let a: ControlPlane;
  let b: ControlPlane;
  let t: TestApp;
  let admin: ReturnType<typeof client>;
  /** Every response the tests saw: none may carry a credential from a kubeconfig. */
  const seen: Response[] = [];
  const record = async (res: Promise<Response>) => {
    const r = await res;
    seen.push(r);
    return r;
  };
  const list = async (): Promise<any[]> => {
    const res = await record(admin.get('/api/v1/admin/clusters'));
    assert.equal(res.status, 200);
    return res.body;
  };
  const byName = async (name: string) => (await list()).find((c) => c.name === name);
  const create = async (name: string, config: string) => {
    const res = await record(admin.post('/api/v1/admin/clusters', { body: { name, config } }));
    assert.equal(res.status, 201, res.text);
    return res.body.id as number;
  };

  before(async () => {
    [a, b] = await Promise.all([sharedControlPlane('a'), sharedControlPlane('b')]);
    t = await startTestApp({ env: ENV });
    admin = client(t.app, (await signedIn(t, 'admin')).token);
  });
  after(async () => {
    await t?.close();
  });

  test('create → 201; the list shows version v1.20.2, status ok, config "" and the server, for certificate and token credentials', async () => {
    const created = await record(
      admin.post('/api/v1/admin/clusters', {
        body: { name: 'alpha-cert', config: kubeconfigYaml([contextFor(a, { auth: 'cert' })]) },
      }),
    );
    assert.equal(created.status, 201);
    assert.deepEqual(created.body, { id: created.body.id, message: "cluster 'alpha-cert' created" });
    await create('alpha-token', kubeconfigYaml([contextFor(a, { auth: 'token' })]));

    for (const name of ['alpha-cert', 'alpha-token']) {
      const c = await byName(name);
      assert.equal(c.version, 'v1.20.2', name);
      assert.equal(c.status, 'ok', `${name}: ${c.error}`);
      assert.equal(c.error, null);
      assert.equal(c.config, '');
      assert.equal(c.server, a.server);
    }
    const viewer = client(t.app, (await signedIn(t, 'viewer')).token);
    const available = await record(viewer.get('/api/v1/clusters'));
    assert.deepEqual(
      available.body.filter((c: { name: string }) => c.name.startsWith('alpha')),
      [
        { name: 'alpha-cert', version: 'v1.20.2', isDefault: true, status: 'ok' },
        { name: 'alpha-token', version: 'v1.20.2', isDefault: false, status: 'ok' },
      ],
    );
  });

  test('credentials the cluster refuses, or a CA that does not sign its certificate → status error saying why', async () => {
    await create('bad-token', kubeconfigYaml([contextFor(a, { token: 'not-a-valid-token' })]));
    const refused = await byName('bad-token');
    assert.equal(refused.status, 'error');
    assert.match(refused.error, /the cluster refused the credentials \(HTTP 401/);

    const wrongCa = { ...contextFor(a), cluster: { server: a.server, 'certificate-authority-data': b64(b.caData) } };
    await create('wrong-ca', kubeconfigYaml([wrongCa]));
    const untrusted = await byName('wrong-ca');
    assert.equal(untrusted.status, 'error');
    assert.equal(untrusted.error, 'TLS: certificate not trusted');
  });

  test('an unreachable server can be registered (unreachable) and turns ok once it answers', async (ctx) => {
    const port = await closedPort();
    await create('late', kubeconfigYaml([contextFor(a, { server: `https://127.0.0.1:${port}` })]));
    const before = await byName('late');
    assert.equal(before.status, 'unreachable');
    assert.equal(before.error, 'unreachable: connection refused');
    assert.equal(before.version, '');

    const proxy = await tcpProxy(port, a.server);
    try {
      const started = Date.now();
      const after = await waitFor(
        'the background refresh to reach the cluster',
        async () => {
          const c = await byName('late');
          return c.status === 'ok' ? c : undefined;
        },
        15_000,
        200,
      );
      assert.equal(after.version, 'v1.20.2');
      assert.equal(after.error, null);
      ctx.diagnostic(`status ok ${Date.now() - started} ms after the server started answering (interval 1 s)`);
      assert.ok(Date.now() - started < 5000, `ok after ${Date.now() - started} ms with a 1 s interval`);
    } finally {
      await proxy.close();
    }
  });

  test('a cluster that never answers costs create at most the probe time-out and never slows the list', async (ctx) => {
    const silent = await silentServer();
    try {
      const started = Date.now();
      await create('silent', kubeconfigYaml([contextFor(a, { server: `https://127.0.0.1:${silent.port}` })]));
      const took = Date.now() - started;
      ctx.diagnostic(`create of a silent cluster took ${took} ms (probe time-out ${PROBE_TIMEOUT_MS} ms)`);
      assert.ok(took < PROBE_TIMEOUT_MS + 1500, `create took ${took} ms`);
      const c = await byName('silent');
      assert.equal(c.status, 'unreachable');
      assert.equal(c.error, 'unreachable: no answer in time');

      // Over 2.5 s the 1 s background round probes the silent cluster (1 s each) at least twice.
      const latencies: number[] = [];
      const until = Date.now() + 2500;
      while (Date.now() < until) {
        const t0 = Date.now();
        await list();
        latencies.push(Date.now() - t0);
        await new Promise((r) => setTimeout(r, 50));
      }
      const slowest = Math.max(...latencies);
      ctx.diagnostic(`${latencies.length} lists during background probes: slowest ${slowest} ms`);
      assert.ok(slowest < PROBE_TIMEOUT_MS / 2, `slowest list of ${latencies.length}: ${slowest} ms`);
    } finally {
      await silent.close();
    }
  });

  test('no response contained a credential of any kubeconfig', () => {
    const secrets = [a.adminToken, b64(a.adminKeyData), b64(a.adminCertData), a.adminKeyData.split('\n')[1]];
    assert.ok(seen.length > 10);
    for (const res of seen) for (const secret of secrets) assert.ok(!res.text.includes(secret), 'a credential leaked');
  });
});

describe('import against real control planes', () => {
  let a: ControlPlane;
  let b: ControlPlane;
  let t: TestApp;
  before(async () => {
    [a, b] = await Promise.all([sharedControlPlane('a'), sharedControlPlane('b')]);
    t = await startTestApp({ env: ENV });
  });
  after(() => t?.close());

  test('three contexts over two clusters → three clusters that answer; current-context is the default', async () => {
    const config = kubeconfigYaml(
      [
        contextFor(a, { name: 'a-admin', auth: 'cert' }),
        contextFor(b, { name: 'b-admin', auth: 'token' }),
        contextFor(a, { name: 'a-viewer', token: a.viewerToken }),
      ],
      'b-admin',
    );
    const imported = await client(t.app).post('/api/v1/admin/clusters/import', { body: { config } });
    assert.equal(imported.status, 201, imported.text);
    assert.deepEqual(
      imported.body.clusters.map((c: { name: string; isDefault: boolean }) => [c.name, c.isDefault]),
      [
        ['a-admin', false],
        ['b-admin', true],
        ['a-viewer', false],
      ],
    );
    const admin = client(t.app, (await signedIn(t, 'admin')).token);
    const listed = (await admin.get('/api/v1/admin/clusters')).body;
    assert.deepEqual(
      listed.map((c: any) => [c.name, c.server, c.status, c.version, c.isDefault]),
      [
        ['a-admin', a.server, 'ok', 'v1.20.2', false],
        ['b-admin', b.server, 'ok', 'v1.20.2', true],
        ['a-viewer', a.server, 'ok', 'v1.20.2', false],
      ],
    );
    assert.equal((await client(t.app).post('/api/v1/admin/clusters/import', { body: { config } })).status, 401);
  });
});
