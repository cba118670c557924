import assert from 'node:assert/strict';
import { type AddressInfo, Socket } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { kubeRequest, readAudit, sharedControlPlane, waitFor, type ControlPlane } from '../harness/control-plane.js';
import { startTestApp, type TestApp } from '../support/app.js';
import { kubeconfigFor, registerCluster } from '../support/clusters.js';
import { signedIn } from '../support/factories.js';
import { serviceAccountToken } from '../support/kube.js';
import { request } from '../support/http.js';
import { ClusterClientFactory } from '../../src/clusters/cluster-client.factory.js';
import { StreamOwner } from '../../src/streams/stream-owner.js';
import { WatchHub } from '../../src/watch/watch-hub.js';
import { openWatch, type WatchClient } from './watch-client.js';

function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

describe('one upstream watch shared by many subscribers', () => {
  let cp: ControlPlane;
  let t: TestApp;
  let base: string;
  let token: string;
  let sa: { token: string; username: string };
  const ns = `fanout-${process.pid}`;
  const clients: WatchClient[] = [];

  before(async () => {
    cp = await sharedControlPlane('a');
    await kubeRequest(cp, 'POST', '/api/v1/namespaces', { metadata: { name: ns } });
    // The service talks to the cluster as a ServiceAccount of this test only: its requests can be
    // picked out of the shared control plane's audit log.
    sa = await serviceAccountToken(cp, ns, 'cas-fanout');
    t = await startTestApp({
      env: {
        CAS_WATCH_LINGER_SECONDS: '1',
        CAS_WATCH_MAX_STREAMS_PER_CALLER: '1000',
        CAS_WATCH_SUBSCRIBER_BUFFER_BYTES: '1048576',
      },
    });
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    base = `http://127.0.0.1:${(t.app.getHttpServer().address() as AddressInfo).port}`;
    token = (await signedIn(t, 'admin')).token;
    await registerCluster(t, token, 'alpha', kubeconfigFor(cp, { token: sa.token }));
  });
  after(async () => {
    for (const client of clients) client.close();
    await t.close();
    await kubeRequest(cp, 'DELETE', `/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/${ns}-cas-fanout`);
    await kubeRequest(cp, 'DELETE', `/api/v1/namespaces/${ns}`);
  });

  const listVersion = async (selector: string) => {
    const list = await request(t.app, 'GET', `/api/v1/configmaps/${ns}`, {
      token,
      headers: { 'x-cluster-name': 'alpha' },
      query: { labelSelector: selector },
    });
    assert.equal(list.status, 200, list.text);
    return list.body.metadata.resourceVersion as string;
  };

  /** Creates `count` ConfigMaps one after the other; returns when each create was sent. */
  const burst = async (label: string, count: number, bytes: number) => {
    const createdAt: number[] = [];
    for (let i = 0; i < count; i++) {
      createdAt.push(Date.now());
      const res = await kubeRequest(cp, 'POST', `/api/v1/namespaces/${ns}/configmaps`, {
        metadata: { name: `${label}-${String(i).padStart(3, '0')}`, labels: { case: label } },
        data: { payload: 'x'.repeat(bytes) },
      });
      assert.equal(res.status, 201, JSON.stringify(res.body).slice(0, 300));
    }
    return createdAt;
  };

  /**
   * The watch requests of this namespace's ConfigMaps the cluster received since `since` (ms): the
   * shared watch is one per collection, whatever the subscribers' label selectors, so the time tells
   * this test's from the others'.
   */
  const watchesSince = async (since: number) => {
    const events = await readAudit(cp);
    return new Set(
      events
        .filter(
          (e) =>
            e.verb === 'watch' &&
            e.user.username === sa.username &&
            e.objectRef?.namespace === ns &&
            e.objectRef?.resource === 'configmaps' &&
            Date.parse(e.requestReceivedTimestamp) >= since,
        )
        .map((e) => e.auditID),
    );
  };

  test('200 subscribers: 1 watch request on the cluster; each receives all 50 events of a burst, in order', async () => {
    // The audit log's timestamps have a resolution of microseconds, as Date has of milliseconds.
    const since = Date.now() - 1;
    const rv = await listVersion('case=burst');
    const path = `/api/v1/configmaps/${ns}?watch=true&resourceVersion=${rv}&labelSelector=case%3Dburst`;
    const subscribers = await Promise.all(
      Array.from({ length: 200 }, (_, i) => openWatch(base, path, { token, sse: i % 2 === 1 })),
    );
    clients.push(...subscribers);
    assert.deepEqual(new Set(subscribers.map((s) => s.status)), new Set([200]));

    const createdAt = await burst('burst', 50, 100);
    const expected = Array.from({ length: 50 }, (_, i) => `burst-${String(i).padStart(3, '0')}`);
    await Promise.all(subscribers.map((s) => s.until((e) => e.length >= 50, 30_000, 'the burst')));
    for (const s of subscribers) {
      assert.deepEqual(
        s.events.map((e) => `${e.type}:${e.object.metadata.name}`),
        expected.map((n) => `ADDED:${n}`),
      );
    }
    const delays = subscribers.flatMap((s) => s.events.map((e, i) => e.at - createdAt[i]));
    console.log(
      `# 200 subscribers x 50 events: delivery after the create was sent p50 ${percentile(delays, 50)} ms, ` +
        `p99 ${percentile(delays, 99)} ms, max ${Math.max(...delays)} ms`,
    );

    // The last subscriber leaves: after the linger the shared watch ends, and the cluster logs its whole life.
    const hub = t.app.get(WatchHub);
    for (const s of subscribers) s.close();
    await waitFor('the shared watch to end after its linger', async () => hub.size === 0, 10_000);
    await waitFor('the watch in the audit log', async () => (await watchesSince(since)).size > 0, 10_000);
    await new Promise((r) => setTimeout(r, 500));
    const watches = await watchesSince(since);
    assert.equal(watches.size, 1, `watch requests on the cluster for 200 subscribers: ${watches.size}`);
  });

  test('a subscriber that reads nothing is cut off; the others get every event without waiting for it', async () => {
    const rv = await listVersion('case=slow');
    const path = `/api/v1/configmaps/${ns}?watch=true&resourceVersion=${rv}&labelSelector=case%3Dslow`;
    const registry = t.app.get(StreamOwner);
    const before = registry.size;
    const stalled = await openWatch(base, path, { token, paused: true });
    const readers = await Promise.all(Array.from({ length: 20 }, () => openWatch(base, path, { token })));
    clients.push(stalled, ...readers);
    assert.equal(registry.size, before + 21);

    // 40 ConfigMaps of 256 KiB: 10 MiB, far more than the socket buffers and the 1 MiB allowance hold.
    const started = Date.now();
    const createdAt = await burst('slow', 40, 256 * 1024);
    await Promise.all(readers.map((s) => s.until((e) => e.length >= 40, 60_000, 'the large burst')));
    const finished = Date.now();
    for (const s of readers) {
      assert.deepEqual(
        s.events.map((e) => e.object.metadata.name),
        Array.from({ length: 40 }, (_, i) => `slow-${String(i).padStart(3, '0')}`),
      );
    }
    await waitFor('the stalled subscriber to be dropped', async () => registry.size === before + 20, 5000);
    const delays = readers.flatMap((s) => s.events.map((e, i) => e.at - createdAt[i]));
    const lastDelay = Math.max(...readers.map((s) => s.events[39].at)) - createdAt[39];
    console.log(
      `# 20 readers + 1 stalled subscriber, 40 x 256 KiB: burst took ${finished - started} ms; delivery after the ` +
        `create was sent p50 ${percentile(delays, 50)} ms, p99 ${percentile(delays, 99)} ms, last event ${lastDelay} ms`,
    );
    // Generous bound (shared machine): the readers never wait for the stalled one, which would be forever.
    assert.ok(lastDelay < 10_000, `the last event reached every reader ${lastDelay} ms after it was created`);

    stalled.res!.resume();
    stalled.res!.socket.resume();
    const clean = await stalled.ended;
    assert.equal(clean, false, 'the stalled subscriber was cut off, not ended cleanly');
    assert.ok(stalled.events.length < 40, `the stalled subscriber got ${stalled.events.length} events`);
    for (const s of readers) s.close();
  });

  test('the cluster ends the shared watch (its time-out): it resumes from the last version, nothing lost or repeated', async () => {
    // The watches of the tests before have ended: every watch of the namespace from now on is this test's.
    await waitFor('the earlier shared watches to end', async () => t.app.get(WatchHub).size === 0, 10_000);
    const since = Date.now() - 1;
    const short = await startTestApp({ env: { CAS_WATCH_UPSTREAM_TIMEOUT_SECONDS: '1' } });
    try {
      await short.app.listen({ port: 0, host: '127.0.0.1' });
      const url = `http://127.0.0.1:${(short.app.getHttpServer().address() as AddressInfo).port}`;
      const admin = (await signedIn(short, 'admin')).token;
      await registerCluster(short, admin, 'alpha', kubeconfigFor(cp, { token: sa.token }));
      const client = await openWatch(url, `/api/v1/configmaps/${ns}?watch=true&labelSelector=case%3Dresumed`, {
        token: admin,
      });
      clients.push(client);
      assert.equal(client.status, 200);
      const names: string[] = [];
      for (let i = 0; i < 8; i++) {
        names.push(`resumed-${i}`);
        await kubeRequest(cp, 'POST', `/api/v1/namespaces/${ns}/configmaps`, {
          metadata: { name: `resumed-${i}`, labels: { case: 'resumed' } },
        });
        await new Promise((r) => setTimeout(r, 600));
      }
      await client.until((e) => e.length >= 8, 10_000, 'eight events across upstream restarts');
      await new Promise((r) => setTimeout(r, 1500));
      assert.deepEqual(
        client.events.map((e) => `${e.type}:${e.object.metadata.name}`),
        names.map((n) => `ADDED:${n}`),
      );
      const watches = (await readAudit(cp)).filter(
        (e) =>
          e.verb === 'watch' &&
          e.stage === 'ResponseComplete' &&
          e.user.username === sa.username &&
          e.objectRef?.namespace === ns &&
          Date.parse(e.requestReceivedTimestamp) >= since,
      );
      const versions = watches.map((e) =>
        Number(new URL(e.requestURI, 'http://x').searchParams.get('resourceVersion')),
      );
      console.log(
        `# one client stream over ${watches.length} upstream watches, resumed from versions ${versions.join(', ')}`,
      );
      assert.ok(watches.length >= 3, `the cluster ended the watch ${watches.length} times`);
      assert.ok(
        versions.every((v, i) => i === 0 || v >= versions[i - 1]),
        'each upstream watch resumed from the last version seen',
      );
      assert.equal(client.endedAt, undefined, 'the client stream never noticed');
      client.close();
    } finally {
      await short.close();
    }
  });

  test('the connection to the cluster breaks: the shared watch reconnects from the last version, nothing lost or repeated', async () => {
    const since = Date.now() - 1;
    const client = await openWatch(base, `/api/v1/configmaps/${ns}?watch=true&labelSelector=case%3Dbroken`, { token });
    clients.push(client);
    assert.equal(client.status, 200);
    const create = (name: string) =>
      kubeRequest(cp, 'POST', `/api/v1/namespaces/${ns}/configmaps`, {
        metadata: { name, labels: { case: 'broken' } },
      });
    await create('broken-1');
    await client.until((e) => e.length >= 1);
    // Cut every connection the service holds to the cluster (the shared watch's among them).
    const conn = await t.app.get(ClusterClientFactory).forName('alpha');
    let cut = 0;
    const apiserverPort = Number(conn.server.port);
    for (const handle of (process as unknown as { _getActiveHandles(): unknown[] })._getActiveHandles()) {
      if (handle instanceof Socket && handle.remotePort === apiserverPort && handle.localPort !== apiserverPort) {
        handle.destroy();
        cut++;
      }
    }
    assert.ok(cut >= 1, 'at least the watch connection was open');
    await create('broken-2');
    await create('broken-3');
    await client.until((e) => e.length >= 3, 15_000, 'the events after the break');
    await new Promise((r) => setTimeout(r, 500));
    assert.deepEqual(
      client.events.map((e) => `${e.type}:${e.object.metadata.name}`),
      ['ADDED:broken-1', 'ADDED:broken-2', 'ADDED:broken-3'],
    );
    assert.equal(client.endedAt, undefined, 'the client stream never noticed');
    // Once the shared watch has ended, the cluster has logged both watch requests.
    client.close();
    await waitFor('the shared watch to end', async () => t.app.get(WatchHub).size === 0, 10_000);
    const watches = await waitFor(
      'both watch requests in the audit log',
      async () => {
        const found = (await readAudit(cp)).filter(
          (e) =>
            e.verb === 'watch' &&
            e.user.username === sa.username &&
            e.objectRef?.namespace === ns &&
            Date.parse(e.requestReceivedTimestamp) >= since,
        );
        return new Set(found.map((e) => e.auditID)).size >= 2 ? found : undefined;
      },
      10_000,
    );
    const versions = [
      ...new Set(watches.map((e) => new URL(e.requestURI, 'http://x').searchParams.get('resourceVersion'))),
    ];
    console.log(`# after the break the watch resumed: upstream watches from versions ${versions.join(', ')}`);
  });
});
