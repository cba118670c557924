import assert from 'node:assert/strict';
import net from 'node:net';
import { after, before, describe, test } from 'node:test';
import { kubeRequest, readAudit, waitForAudit, type ControlPlane } from '../harness/control-plane.js';
import type { TestApp } from '../support/app.js';
import { closedPort } from '../support/kubeconfigs.js';
import { kubeconfigFor, registerCluster } from '../support/clusters.js';
import { request } from '../support/http.js';
import { SMALL_ANSWER_BYTES } from '../../src/clusters/gateway/cluster-client.js';
import { kubeGetRaw } from '../support/kube.js';
import { startClusterApp } from '../support/cluster-app.js';

/**
 * A TCP relay in front of the apiserver: TLS passes through it untouched. `cutAfter(n)` lets n more bytes
 * of the apiserver's through and then ends that connection, both sides.
 */
async function breakingRelay(server: string) {
  const target = new URL(server);
  const sockets = new Set<net.Socket>();
  let remaining: number | undefined;
  const relay = net.createServer((client) => {
    const upstream = net.connect(Number(target.port), target.hostname);
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on('error', () => undefined).on('close', () => sockets.delete(s));
    }
    client.on('data', (chunk) => upstream.write(chunk)).on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
    upstream.on('data', (chunk) => {
      if (remaining === undefined || chunk.length < remaining) {
        if (remaining !== undefined) remaining -= chunk.length;
        client.write(chunk);
        return;
      }
      client.end(chunk.subarray(0, remaining));
      upstream.destroy();
      remaining = undefined;
    });
  });
  await new Promise<void>((r) => relay.listen(0, '127.0.0.1', r));
  return {
    url: `https://127.0.0.1:${(relay.address() as net.AddressInfo).port}`,
    cutAfter: (bytes: number) => (remaining = bytes),
    close: () => {
      for (const s of sockets) s.destroy();
      relay.close();
    },
  };
}

describe('clusters that refuse, hang or break off', () => {
  let t: TestApp;
  let cp: ControlPlane;
  let token: string;
  let silent: net.Server;
  let relay: Awaited<ReturnType<typeof breakingRelay>>;
  const sockets: net.Socket[] = [];
  const ns = `up-${process.pid}`;
  const call = (cluster: string, url: string, query?: Record<string, string>) =>
    request(t.app, 'GET', `/api/v1/${url}`, { token, headers: { 'x-cluster-name': cluster }, query });

  before(async () => {
    const started = await startClusterApp({
      cluster: 'alpha',
      namespace: ns,
      env: { CAS_CLUSTER_REQUEST_TIMEOUT_SECONDS: '2' },
    });
    ({ cp, t, admin: token } = started);
    await registerCluster(
      t,
      token,
      'refusing',
      kubeconfigFor(cp, { server: `https://127.0.0.1:${await closedPort()}` }),
    );
    // Accepts connections and never says a word.
    silent = net.createServer((socket) => sockets.push(socket));
    await new Promise<void>((r) => silent.listen(0, '127.0.0.1', r));
    const port = (silent.address() as net.AddressInfo).port;
    await registerCluster(t, token, 'silent', kubeconfigFor(cp, { server: `https://127.0.0.1:${port}` }));
    relay = await breakingRelay(cp.server);
    await registerCluster(t, token, 'breaking', kubeconfigFor(cp, { server: relay.url }));
  });
  after(async () => {
    for (const s of sockets) s.destroy();
    silent.close();
    relay.close();
    await kubeRequest(cp, 'DELETE', `/api/v1/namespaces/${ns}`);
    await t.close();
  });

  test('a cluster that refuses connections → 502 within a second, naming the cluster', async () => {
    const started = Date.now();
    const res = await call('refusing', 'configmaps/default');
    assert.equal(res.status, 502);
    assert.ok(Date.now() - started < 1000, `took ${Date.now() - started} ms`);
    assert.match(res.body.message, /cluster 'refusing' could not be reached/);
  });

  test('a cluster that never answers → 504 at the configured time-out; other clusters unaffected meanwhile', async () => {
    const started = Date.now();
    const hanging = call('silent', 'configmaps/default').then((res) => ({ res, took: Date.now() - started }));
    const others: number[] = [];
    for (let i = 0; i < 5; i++) {
      const s = Date.now();
      const res = await call('alpha', `configmaps/${ns}`);
      assert.equal(res.status, 200);
      others.push(Date.now() - s);
    }
    const { res, took } = await hanging;
    assert.equal(res.status, 504);
    assert.match(res.body.message, /cluster 'silent' did not answer within 2 s/);
    assert.ok(took >= 1900 && took < 4000, `took ${took} ms`);
    assert.ok(Math.max(...others) < 1500, `calls to alpha took ${others.join(', ')} ms`);
  });

  test('a write whose answer broke off midway is not sent again: 502, and the apiserver saw one update', async () => {
    const name = 'broken-off';
    const path = `configmaps/${ns}/${name}`;
    assert.equal(
      (await kubeRequest(cp, 'POST', `/api/v1/namespaces/${ns}/configmaps`, { metadata: { name } })).status,
      201,
    );
    const before = await call('breaking', path); // discovery and the connection, before the cut
    assert.equal(before.status, 200, before.text);
    const value = 'y'.repeat(56 * 1024); // the answer stays under the size the service reads whole
    // The apiserver's answer has begun (its first TLS records hold the status line) when the relay ends it.
    relay.cutAfter(24 * 1024);
    const res = await request(t.app, 'PUT', `/api/v1/${path}`, {
      token,
      headers: { 'x-cluster-name': 'breaking' },
      body: { apiVersion: 'v1', kind: 'ConfigMap', metadata: before.body.metadata, data: { value } },
    });
    // Sent again, the update would meet its own resourceVersion already spent: a 409 that is not true.
    assert.equal(res.status, 502, res.text);
    assert.match(res.body.message, /cluster 'breaking'/);
    const isUpdate = (e: { verb: string; objectRef?: { namespace?: string; name?: string } }) =>
      e.verb === 'update' && e.objectRef?.namespace === ns && e.objectRef?.name === name;
    assert.equal((await waitForAudit(cp, isUpdate)).length, 1);
    await new Promise((r) => setTimeout(r, 500));
    assert.equal((await readAudit(cp)).filter(isUpdate).length, 1, 'the apiserver saw one update');
    const stored = await kubeRequest(cp, 'GET', `/api/v1/namespaces/${ns}/configmaps/${name}`);
    assert.equal(stored.body.data.value, value, 'the one update was applied');
  });
});

// Its own app, at the default time-out: the apiserver sends nothing until it has read and encoded the
// whole 16 MiB list, which on a busy machine takes longer than the 2 s the tests above need.
describe('a cluster that sends a lot', () => {
  let t: TestApp;
  let cp: ControlPlane;
  let token: string;
  const ns = `up-big-${process.pid}`;
  const call = (url: string, query?: Record<string, string>) =>
    request(t.app, 'GET', `/api/v1/${url}`, { token, headers: { 'x-cluster-name': 'alpha' }, query });

  before(async () => {
    ({ cp, t, admin: token } = await startClusterApp({ cluster: 'alpha', namespace: ns }));
  });
  after(async () => {
    await kubeRequest(cp, 'DELETE', `/api/v1/namespaces/${ns}`);
    await t.close();
  });

  test('an answer of any size reaches the caller byte for byte: whole, with its length, up to 64 KiB; streamed past it', async () => {
    // The apiserver gives a length only to answers under 2 KiB; the rest come chunked.
    for (const kib of [1, 10, 62, 63, 64, 70, 300]) {
      const name = `size-${kib}`;
      const created = await kubeRequest(cp, 'POST', `/api/v1/namespaces/${ns}/configmaps`, {
        metadata: { name },
        data: { value: 'z'.repeat(kib * 1024) },
      });
      assert.equal(created.status, 201);
      const direct = await kubeGetRaw(cp, `/api/v1/namespaces/${ns}/configmaps/${name}`);
      const res = await call(`configmaps/${ns}/${name}`);
      assert.equal(res.status, 200, `${kib} KiB`);
      assert.ok(Buffer.from(res.text, 'utf8').equals(direct.body), `${kib} KiB: identical bytes`);
      const whole = direct.body.length <= SMALL_ANSWER_BYTES;
      assert.equal(res.headers['content-length'], whole ? String(direct.body.length) : undefined, `${kib} KiB`);
    }
  });

  test('a list of 2,000 ConfigMaps of 8 KiB is returned byte-for-byte as the cluster sends it', async () => {
    const value = 'x'.repeat(8 * 1024);
    const names = Array.from({ length: 2000 }, (_, i) => `big-${i}`);
    for (let i = 0; i < names.length; i += 25) {
      await Promise.all(
        names.slice(i, i + 25).map(async (name) => {
          const res = await kubeRequest(cp, 'POST', `/api/v1/namespaces/${ns}/configmaps`, {
            metadata: { name },
            data: { value },
          });
          assert.equal(res.status, 201);
        }),
      );
    }
    const direct = await kubeGetRaw(cp, `/api/v1/namespaces/${ns}/configmaps`);
    const rv = JSON.parse(direct.body.toString('utf8')).metadata.resourceVersion;
    const query = { resourceVersion: rv, resourceVersionMatch: 'Exact' };
    const pinned = await kubeGetRaw(cp, `/api/v1/namespaces/${ns}/configmaps?${new URLSearchParams(query)}`);
    const viaService = await call(`configmaps/${ns}`, query);
    assert.equal(viaService.status, 200, viaService.text.slice(0, 300));
    assert.ok(pinned.body.length > 16 * 1024 * 1024, `${pinned.body.length} bytes`);
    assert.equal(Buffer.byteLength(viaService.text), pinned.body.length);
    assert.ok(Buffer.from(viaService.text, 'utf8').equals(pinned.body), 'identical bytes');
    const items = JSON.parse(viaService.text).items as Array<{ metadata: { name: string } }>;
    assert.equal(items.filter((i) => i.metadata.name.startsWith('big-')).length, 2000);
  });
});
