// Issue 29 (finding 5): one shared watch per collection, label selectors evaluated per subscriber. The
// apiserver's own watch with the same selector from the same resourceVersion is the oracle: the service
// must report the same events (ADDED when an object is relabelled into the selector, DELETED when out),
// for objects created before the watch too, and start one upstream watch for any number of selectors.
import assert from 'node:assert/strict';
import https from 'node:https';
import { after, before, describe, test } from 'node:test';
import { kubeRequest, readAudit, waitFor, type ControlPlane } from '../harness/control-plane.js';
import type { TestApp } from '../support/app.js';
import { startClusterApp } from '../support/cluster-app.js';
import { WatchHub } from '../../src/watch/watch-hub.js';
import { openWatch, type WatchClient } from './watch-client.js';

/** The apiserver's own watch: the event types and names it sends. */
function clusterWatch(cp: ControlPlane, path: string): { events: string[]; close(): void } {
  const events: string[] = [];
  const req = https.get(
    new URL(path, cp.server),
    { ca: cp.caData, cert: cp.adminCertData, key: cp.adminKeyData, agent: false },
    (res) => {
      let pending = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        pending += chunk;
        for (let nl = pending.indexOf('\n'); nl >= 0; nl = pending.indexOf('\n')) {
          const event = JSON.parse(pending.slice(0, nl));
          pending = pending.slice(nl + 1);
          if (event.type !== 'BOOKMARK') events.push(`${event.type}:${event.object.metadata.name}`);
        }
      });
    },
  );
  req.on('error', () => undefined);
  return { events, close: () => req.destroy() };
}

const SELECTORS = [
  'tier=web',
  'tier!=web',
  'tier in (web,db),env',
  'tier notin (web)',
  '!env',
  'env,tier==db',
  'rank>3',
  '',
];

describe('watch label selectors: one upstream watch per collection, filtered per subscriber as the apiserver does', () => {
  let cp: ControlPlane;
  let t: TestApp;
  let base: string;
  let admin: string;
  const ns = `watchsel2-${process.pid}`;
  const open: Array<{ close(): void }> = [];

  before(async () => {
    ({ cp, t, admin, base } = await startClusterApp({
      cluster: 'alpha',
      namespace: ns,
      listen: true,
      env: { CAS_WATCH_LINGER_SECONDS: '1' },
    }));
  });
  after(async () => {
    for (const client of open) client.close();
    await kubeRequest(cp, 'DELETE', `/api/v1/namespaces/${ns}`);
    await t.close();
  });

  const path = `/api/v1/namespaces/${ns}/configmaps`;
  const put = async (name: string, labels: Record<string, string>) => {
    const res = await kubeRequest(cp, 'PUT', `${path}/${name}`, { metadata: { name, namespace: ns, labels } });
    assert.equal(res.status, 200, JSON.stringify(res.body));
  };
  const create = async (name: string, labels: Record<string, string>) => {
    const res = await kubeRequest(cp, 'POST', path, { metadata: { name, labels } });
    assert.equal(res.status, 201, JSON.stringify(res.body));
  };

  test('relabelling into and out of selectors, objects from before the watch included: the same events as the apiserver sends', async () => {
    // Objects that exist before the watch starts: their labels must be known to the shared watch.
    await create('early-web', { tier: 'web', env: 'prod' });
    await create('early-db', { tier: 'db' });
    await create('early-none', {});
    const rv = (await kubeRequest(cp, 'GET', path)).body.metadata.resourceVersion as string;

    const ours: Array<{ selector: string; client: WatchClient }> = [];
    const theirs: Array<{ selector: string; events: string[] }> = [];
    for (const selector of SELECTORS) {
      const query = `watch=true&resourceVersion=${rv}${selector ? `&labelSelector=${encodeURIComponent(selector)}` : ''}`;
      const client = await openWatch(base, `/api/v1/configmaps/${ns}?${query}`, { token: admin });
      assert.equal(client.status, 200, JSON.stringify(client.body));
      open.push(client);
      ours.push({ selector, client });
      const direct = clusterWatch(cp, `${path}?${query}`);
      open.push(direct);
      theirs.push({ selector, events: direct.events });
    }

    await put('early-web', { tier: 'db', env: 'prod' }); // out of tier=web, still in the set-based one
    await put('early-db', { tier: 'db', env: 'dev', rank: '5' }); // into `env,tier==db` and rank>3
    await put('early-none', { tier: 'web' }); // into tier=web
    await create('late', { tier: 'cache', rank: '2' });
    await put('late', { tier: 'web', env: 'qa', rank: '9' });
    await put('late', { tier: 'web', env: 'qa', rank: '9', touched: 'yes' }); // a change within every selector
    await put('early-none', {}); // out of everything with a label
    await kubeRequest(cp, 'DELETE', `${path}/early-db`);
    await kubeRequest(cp, 'DELETE', `${path}/late`);
    await create('marker', { tier: 'web', env: 'x', rank: '7' });

    // Every selector sees `marker` last (or, for those it does not match, its events settle): compare at rest.
    await waitFor(
      'the apiserver and the service to agree',
      async () =>
        theirs.every((d, i) => d.events.length > 0 && d.events.join() === ours[i].client.events.map(show).join()),
      15_000,
      200,
    ).catch(() => undefined);
    await new Promise((r) => setTimeout(r, 500));
    for (const [i, { selector, events }] of theirs.entries()) {
      assert.deepEqual(ours[i].client.events.map(show), events, `selector '${selector}'`);
    }
    // Relabelling produced both kinds of translated events somewhere.
    const all = theirs.flatMap((d) => d.events);
    assert.ok(
      all.some((e) => e === 'ADDED:early-none'),
      'an object relabelled into a selector is ADDED',
    );
    assert.ok(
      all.some((e) => e === 'DELETED:early-web'),
      'an object relabelled out of a selector is DELETED',
    );
    for (const { client } of ours) client.close();
  });

  test('eight selectors on one collection are one watch request on the cluster', async () => {
    await waitFor('the shared watch of the test before to end', async () => t.app.get(WatchHub).size === 0, 10_000);
    const since = Date.now() - 1;
    const rv = (await kubeRequest(cp, 'GET', path)).body.metadata.resourceVersion as string;
    const clients = await Promise.all(
      SELECTORS.map((selector) =>
        openWatch(
          base,
          `/api/v1/configmaps/${ns}?watch=true&resourceVersion=${rv}&labelSelector=${encodeURIComponent(selector)}`,
          { token: admin },
        ),
      ),
    );
    open.push(...clients);
    await create('one-more', { tier: 'web', env: 'x' });
    await clients[0].until((e) => e.length >= 1, 10_000, 'the event');
    for (const c of clients) c.close();
    await waitFor(
      'the watch in the audit log',
      async () => {
        const watches = (await readAudit(cp)).filter(
          (e) =>
            e.verb === 'watch' &&
            e.objectRef?.namespace === ns &&
            e.objectRef?.resource === 'configmaps' &&
            Date.parse(e.requestReceivedTimestamp) >= since,
        );
        return new Set(watches.map((e) => e.auditID)).size >= 1;
      },
      15_000,
    );
    await new Promise((r) => setTimeout(r, 500));
    const watches = (await readAudit(cp)).filter(
      (e) =>
        e.verb === 'watch' &&
        e.objectRef?.namespace === ns &&
        e.objectRef?.resource === 'configmaps' &&
        Date.parse(e.requestReceivedTimestamp) >= since,
    );
    assert.equal(new Set(watches.map((e) => e.auditID)).size, 1, 'one upstream watch for eight selectors');
    assert.ok(!watches.some((e) => e.requestURI.includes('labelSelector')), 'the upstream watch has no label selector');
  });

  test('a label selector the apiserver refuses is a 400 naming it, before anything is opened', async () => {
    const rv = (await kubeRequest(cp, 'GET', path)).body.metadata.resourceVersion as string;
    for (const selector of ['tier in web', 'tier=', '=web', 'a b', 'rank>x']) {
      const direct = await kubeRequest(cp, 'GET', `${path}?labelSelector=${encodeURIComponent(selector)}`);
      const client = await openWatch(
        base,
        `/api/v1/configmaps/${ns}?watch=true&resourceVersion=${rv}&labelSelector=${encodeURIComponent(selector)}`,
        { token: admin },
      );
      client.close();
      if (direct.status === 400) {
        assert.equal(client.status, 400, `'${selector}': ${JSON.stringify(client.body)}`);
        assert.match(JSON.stringify(client.body), /labelSelector/);
      } else {
        assert.equal(client.status, 200, `'${selector}' is accepted by the apiserver (${direct.status})`);
      }
    }
  });
});

const show = (e: { type: string; object: any }) => `${e.type}:${e.object.metadata.name}`;
