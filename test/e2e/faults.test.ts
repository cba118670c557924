// Database: runs on PostgreSQL too: a replica killed mid-write.
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import {
  kubeRequest,
  sharedControlPlane,
  startControlPlane,
  waitFor,
  type ControlPlane,
} from '../harness/control-plane.js';
import { createPostgresDatabase, onPostgres, startTestApp, type TestApp } from '../support/app.js';
import { kubeconfigFor, registerCluster } from '../support/clusters.js';
import { signedIn } from '../support/factories.js';
import { request } from '../support/http.js';
import { startServiceProcess, type ServiceProcess } from '../support/service-process.js';

// The fault suite (issue 9). A cluster that never answers (504 at the configured time-out) and one that
// refuses connections (502 at once) are in resources-upstream.test.ts; these are the faults that need a
// cluster to die, a slow cluster beside a fast one, and the service itself killed.

/** A TCP relay to a real apiserver that holds every chunk of the answer for `delayMs`: a slow cluster. */
async function slowRelay(target: URL, delayMs: number): Promise<{ port: number; close(): void }> {
  const sockets = new Set<net.Socket>();
  const server = net.createServer((client) => {
    const upstream = net.connect(Number(target.port), target.hostname);
    sockets.add(client).add(upstream);
    client.pipe(upstream);
    upstream.on('data', (chunk) => setTimeout(() => client.writable && client.write(chunk), delayMs));
    upstream.on('end', () => setTimeout(() => client.end(), delayMs));
    for (const s of [client, upstream]) {
      s.on('error', () => {
        client.destroy();
        upstream.destroy();
      });
      s.on('close', () => sockets.delete(s));
    }
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    port: (server.address() as net.AddressInfo).port,
    close: () => {
      for (const s of sockets) s.destroy();
      server.close();
    },
  };
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];

describe('faults: clusters that die or crawl', () => {
  let t: TestApp;
  let token: string;
  let shared: ControlPlane;
  let doomed: ControlPlane | undefined;
  let relay: { port: number; close(): void };
  const ns = `faults-${process.pid}`;
  const call = (cluster: string, method: string, url: string) =>
    request(t.app, method, `/api/v1/${url}`, { token, headers: { 'x-cluster-name': cluster } });

  before(async () => {
    [shared, doomed] = await Promise.all([sharedControlPlane('a'), startControlPlane(`faults-${process.pid}`)]);
    t = await startTestApp({ env: { CAS_CLUSTER_REQUEST_TIMEOUT_SECONDS: '10' } });
    token = (await signedIn(t, 'admin')).token;
    relay = await slowRelay(new URL(shared.server), 600);
    await registerCluster(t, token, 'fast', kubeconfigFor(shared));
    await registerCluster(t, token, 'slow', kubeconfigFor(shared, { server: `https://127.0.0.1:${relay.port}` }));
    await registerCluster(t, token, 'doomed', kubeconfigFor(doomed));
    await kubeRequest(shared, 'POST', '/api/v1/namespaces', { metadata: { name: ns } });
    await kubeRequest(doomed, 'POST', '/api/v1/namespaces', { metadata: { name: ns } });
  });
  after(async () => {
    relay?.close();
    await doomed?.stop();
    await kubeRequest(shared, 'DELETE', `/api/v1/namespaces/${ns}`);
    await t?.close();
  });

  test('a cluster stopped while a request waits on it → 502 within 1 s, naming the cluster', async () => {
    const cp = doomed!;
    await kubeRequest(cp, 'POST', `/api/v1/namespaces/${ns}/configmaps`, {
      metadata: { name: 'held', finalizers: ['example.com/hold'] },
    });
    // A waited delete keeps asking the cluster until the object is gone: it is mid-request when the cluster dies.
    const waited = call('doomed', 'DELETE', `configmaps/${ns}/held?timeoutSeconds=60`).then((res) => ({
      res,
      at: Date.now(),
    }));
    await waitFor(
      'the delete to reach the cluster',
      async () =>
        (await kubeRequest(cp, 'GET', `/api/v1/namespaces/${ns}/configmaps/held`)).body.metadata?.deletionTimestamp,
    );
    await cp.stop();
    const stoppedAt = Date.now();
    doomed = undefined;
    const { res, at } = await waited;
    assert.equal(res.status, 502, res.text);
    assert.match(res.body.message, /cluster 'doomed'/);
    assert.ok(at - stoppedAt < 1000, `answered ${at - stoppedAt} ms after the cluster stopped`);
    // Afterwards, calls to the stopped cluster fail fast, and the other clusters are fine.
    const started = Date.now();
    assert.equal((await call('doomed', 'GET', `configmaps/${ns}`)).status, 502);
    assert.ok(Date.now() - started < 1000);
    assert.equal((await call('fast', 'GET', `configmaps/${ns}`)).status, 200);
  });

  test('a slow cluster does not slow requests to another cluster (side by side)', async () => {
    const timeFast = async (n: number) => {
      const took: number[] = [];
      for (let i = 0; i < n; i++) {
        const started = Date.now();
        const res = await call('fast', 'GET', `configmaps/${ns}`);
        assert.equal(res.status, 200, res.text);
        took.push(Date.now() - started);
      }
      return took;
    };
    await timeFast(5); // warm the connection and discovery
    const alone = await timeFast(20);

    const slowStarted = Date.now();
    const slowCalls = Promise.all(
      Array.from({ length: 16 }, () => call('slow', 'GET', `configmaps/${ns}`).then((res) => res.status)),
    );
    await new Promise((r) => setTimeout(r, 100));
    const beside = await timeFast(20);
    const slowStatuses = await slowCalls;
    const slowTook = Date.now() - slowStarted;

    console.log(
      `fast cluster p50 alone ${median(alone)} ms, beside 16 slow calls ${median(beside)} ms ` +
        `(max ${Math.max(...beside)} ms); the slow calls took ${slowTook} ms`,
    );
    assert.deepEqual(new Set(slowStatuses), new Set([200]));
    assert.ok(slowTook >= 1000, `the slow cluster really was slow (${slowTook} ms)`);
    assert.ok(Math.max(...beside) < 1500, `no fast call waited for the slow cluster (max ${Math.max(...beside)} ms)`);
    assert.ok(
      median(beside) < Math.max(5 * median(alone), 250),
      `fast p50 ${median(beside)} ms beside the slow cluster vs ${median(alone)} ms alone`,
    );
  });
});

describe('faults: the service killed during a burst of admin writes', () => {
  let dataDir: string;
  let databaseUrl: string;
  let drop: (() => Promise<void>) | undefined;
  let service: ServiceProcess | undefined;
  const env = () => ({
    CAS_DATA_DIR: dataDir,
    DATABASE_URL: databaseUrl,
    CAS_BOOTSTRAP_USERNAME: 'admin',
    CAS_BOOTSTRAP_PASSWORD: 'admin-password-1',
    // The burst mints far more keys than one user may own by default.
    CAS_API_KEYS_PER_USER: '10000',
  });
  const login = async (s: ServiceProcess) => {
    const res = await s.api('POST', '/api/v1/auth/login', {
      body: { username: 'admin', password: 'admin-password-1' },
    });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    return res.body.token as string;
  };

  before(async () => {
    dataDir = await mkdtemp(join(tmpdir(), 'cas-kill-'));
    databaseUrl = `sqlite:${join(dataDir, 'cas.sqlite')}`;
    if (onPostgres) ({ url: databaseUrl, drop } = await createPostgresDatabase());
  });
  after(async () => {
    if (service && service.child.exitCode === null) service.child.kill('SIGKILL');
    await drop?.();
    await rm(dataDir, { recursive: true, force: true });
  });

  test('kill -9 loses no acknowledged write: every 2xx is in the database after a restart', async () => {
    service = await startServiceProcess(env());
    const first = service;
    const token = await login(first);
    const acknowledged: string[] = [];
    let attempted = 0;
    let killed = false;
    const writer = async (w: number) => {
      for (let i = 0; !killed; i++) {
        const name = `burst-${w}-${i}`;
        attempted++;
        const res = await first
          .api('POST', '/api/v1/admin/apikeys', { token, body: { name, role: 'viewer' } })
          .catch(() => undefined);
        if (res?.status === 201) acknowledged.push(name);
        else if (res && !killed) assert.fail(`write ${name} got ${res.status} ${JSON.stringify(res.body)}`);
      }
    };
    const writers = Array.from({ length: 16 }, (_, w) => writer(w));
    await waitFor('some writes to be acknowledged', async () => acknowledged.length >= 50, 30_000, 20);
    first.child.kill('SIGKILL');
    killed = true;
    await first.exited;
    await Promise.all(writers);
    const ackedBeforeKill = [...acknowledged];

    service = await startServiceProcess(env());
    const stored = await service.api('GET', '/api/v1/admin/apikeys', { token: await login(service) });
    assert.equal(stored.status, 200);
    const names = new Set((stored.body as Array<{ name: string }>).map((k) => k.name));
    const lost = ackedBeforeKill.filter((name) => !names.has(name));
    console.log(
      `${attempted} writes attempted, ${ackedBeforeKill.length} acknowledged before kill -9, ` +
        `${names.size} stored after restart, ${lost.length} lost`,
    );
    assert.deepEqual(lost, [], 'acknowledged writes missing after the restart');
  });
});
