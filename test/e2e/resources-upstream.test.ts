import assert from 'node:assert/strict';
import net from 'node:net';
import { after, before, describe, test } from 'node:test';
import { kubeRequest, type ControlPlane } from '../harness/control-plane.js';
import type { TestApp } from '../support/app.js';
import { closedPort } from '../support/kubeconfigs.js';
import { kubeconfigFor, registerCluster } from '../support/clusters.js';
import { request } from '../support/http.js';
import { kubeGetRaw } from '../support/kube.js';
import { startClusterApp } from '../support/cluster-app.js';

describe('clusters that refuse, hang, or send a lot', () => {
  let t: TestApp;
  let cp: ControlPlane;
  let token: string;
  let silent: net.Server;
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
  });
  after(async () => {
    for (const s of sockets) s.destroy();
    silent.close();
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
    const viaService = await call('alpha', `configmaps/${ns}`, query);
    assert.equal(viaService.status, 200);
    assert.ok(pinned.body.length > 16 * 1024 * 1024, `${pinned.body.length} bytes`);
    assert.equal(Buffer.byteLength(viaService.text), pinned.body.length);
    assert.ok(Buffer.from(viaService.text, 'utf8').equals(pinned.body), 'identical bytes');
    const items = JSON.parse(viaService.text).items as Array<{ metadata: { name: string } }>;
    assert.equal(items.filter((i) => i.metadata.name.startsWith('big-')).length, 2000);
  });
});
