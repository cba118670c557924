// One list-and-watch loop per collection: a console that both pages and watches a collection costs the cluster one
// watch request, and each view sees every change.
import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { kubeRequest, readAudit, sharedControlPlane, waitFor, type ControlPlane } from '../harness/control-plane.js';
import { startTestApp, type TestApp } from '../support/app.js';
import { kubeconfigFor, registerCluster } from '../support/clusters.js';
import { signedIn } from '../support/factories.js';
import { request } from '../support/http.js';
import { serviceAccountToken } from '../support/kube.js';
import { Reflectors } from '../../src/watch/reflectors.js';
import { openWatch, type WatchClient } from './watch-client.js';

describe('one reflector under the shared watch and the list cache', () => {
  let cp: ControlPlane;
  let t: TestApp;
  let base: string;
  let token: string;
  let sa: { token: string; username: string };
  const ns = `reflector-${process.pid}`;
  const clients: WatchClient[] = [];

  before(async () => {
    cp = await sharedControlPlane('a');
    await kubeRequest(cp, 'POST', '/api/v1/namespaces', { metadata: { name: ns } });
    // The service talks to the cluster as a ServiceAccount of this test only: its requests are picked out of the
    // shared control plane's audit log by it.
    sa = await serviceAccountToken(cp, ns, 'cas-reflector');
    t = await startTestApp({ env: { CAS_WATCH_LINGER_SECONDS: '1', CAS_LIST_CACHE_IDLE_SECONDS: '1' } });
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    base = `http://127.0.0.1:${(t.app.getHttpServer().address() as AddressInfo).port}`;
    token = (await signedIn(t, 'admin')).token;
    await registerCluster(t, token, 'alpha', kubeconfigFor(cp, { token: sa.token }));
  });
  after(async () => {
    for (const client of clients) client.close();
    await t.close();
    await kubeRequest(cp, 'DELETE', `/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/${ns}-cas-reflector`);
    await kubeRequest(cp, 'DELETE', `/api/v1/namespaces/${ns}`);
  });

  const page = (query: Record<string, string>) =>
    request(t.app, 'GET', '/api/v1/configmaps/_all', { token, headers: { 'x-cluster-name': 'alpha' }, query });

  test('a collection paged and watched at once: one upstream watch (the audit log), and both see every change', async () => {
    const since = Date.now() - 1;
    const first = await page({ page: '1', size: '500', search: ns });
    assert.equal(first.status, 200, first.text);
    const watch = await openWatch(
      base,
      `/api/v1/configmaps/_all?watch=true&resourceVersion=${first.body.metadata.resourceVersion}`,
      {
        token,
        sse: true,
      },
    );
    clients.push(watch);
    assert.equal(watch.status, 200);
    const paged = await openWatch(base, `/api/v1/configmaps/_all?page=1&search=${ns}&watch=true`, { token });
    clients.push(paged);
    assert.equal(paged.status, 200);

    for (let i = 0; i < 5; i++) {
      const res = await kubeRequest(cp, 'POST', `/api/v1/namespaces/${ns}/configmaps`, {
        metadata: { name: `cm${i}` },
      });
      assert.equal(res.status, 201);
    }
    await watch.until(
      (events) => events.filter((e) => e.object?.metadata?.namespace === ns).length >= 5,
      15_000,
      'the five ConfigMaps on the watch',
    );
    await paged.until((events) => events.some((e) => e.type === 'CHANGED'), 15_000, 'a CHANGED notice');
    const now = await page({ page: '1', size: '500', search: ns });
    assert.deepEqual(
      now.body.items
        .map((i: { metadata: { name: string } }) => i.metadata.name)
        .filter((name: string) => name.startsWith('cm'))
        .sort(),
      ['cm0', 'cm1', 'cm2', 'cm3', 'cm4'],
    );
    assert.equal(t.app.get(Reflectors).size, 1, 'one loop serves both');

    // The cluster logs a watch request once it has ended: the clients leave, the cache idles out, the loop ends.
    watch.close();
    paged.close();
    await waitFor('the loop to end', async () => t.app.get(Reflectors).size === 0, 20_000);
    const all = await waitFor(
      'the watch request in the audit log',
      async () => {
        const found = (await readAudit(cp)).filter(
          (e) =>
            e.verb === 'watch' &&
            e.user.username === sa.username &&
            e.objectRef?.resource === 'configmaps' &&
            Date.parse(e.requestReceivedTimestamp) >= since,
        );
        return found.length > 0 ? found : undefined;
      },
      10_000,
    );
    assert.equal(
      new Set(all.map((e) => e.auditID)).size,
      1,
      `watch requests on the cluster: ${all.map((e) => e.requestURI).join(', ')}`,
    );
    assert.ok(all[0].objectRef?.namespace === undefined, 'the collection across all namespaces');
  });
});
