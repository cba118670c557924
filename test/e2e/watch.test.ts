import assert from 'node:assert/strict';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { kubeRequest, waitFor, type ControlPlane } from '../harness/control-plane.js';
import { startTestApp, type TestApp } from '../support/app.js';
import { kubeconfigFor, registerCluster } from '../support/clusters.js';
import { createUser, login, signedIn } from '../support/factories.js';
import { request } from '../support/http.js';
import { openWatch, summary, type WatchClient } from './watch-client.js';
import { createCrd } from '../support/kube.js';
import { startClusterApp } from '../support/cluster-app.js';

/** A watch straight on the apiserver, for byte-for-byte comparison: the raw lines it sends. */
function clusterWatchLines(cp: ControlPlane, path: string): { lines: string[]; close(): void } {
  const lines: string[] = [];
  const req = https.get(
    new URL(path, cp.server),
    {
      ca: cp.caData,
      cert: cp.adminCertData,
      key: cp.adminKeyData,
      agent: false,
      headers: { accept: 'application/json' },
    },
    (res) => {
      let pending = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        pending += chunk;
        for (let nl = pending.indexOf('\n'); nl >= 0; nl = pending.indexOf('\n')) {
          lines.push(pending.slice(0, nl));
          pending = pending.slice(nl + 1);
        }
      });
    },
  );
  req.on('error', () => undefined);
  return { lines, close: () => req.destroy() };
}

describe('watch streams through the service (JSON lines and SSE), against a real control plane', () => {
  let cp: ControlPlane;
  let t: TestApp;
  let base: string;
  let admin: string;
  const ns = `watch-${process.pid}`;
  const group = `w${process.pid}.example.com`;
  const crd = `gadgets.${group}`;
  const open: WatchClient[] = [];
  const watch = async (path: string, options: Partial<Parameters<typeof openWatch>[2]> = {}) => {
    const client = await openWatch(base, `/api/v1/${path}`, { token: admin, ...options });
    open.push(client);
    return client;
  };
  const clusterPath = (kind: 'configmaps' | 'gadgets', name = '') =>
    kind === 'configmaps'
      ? `/api/v1/namespaces/${ns}/configmaps${name && `/${name}`}`
      : `/apis/${group}/v1/namespaces/${ns}/gadgets${name && `/${name}`}`;

  before(async () => {
    ({ cp, t, admin, base } = await startClusterApp({
      cluster: 'alpha',
      namespace: ns,
      listen: true,
      // A small window, so that a version older than it can be shown to give 410.
      env: { CAS_WATCH_WINDOW_EVENTS: '10', CAS_WATCH_LINGER_SECONDS: '1', CAS_WATCH_HEARTBEAT_SECONDS: '1' },
    }));
    await createCrd(cp, { group, plural: 'gadgets', kind: 'Gadget', namespace: ns });
  });
  after(async () => {
    for (const client of open) client.close();
    await kubeRequest(cp, 'DELETE', `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${crd}`);
    await kubeRequest(cp, 'DELETE', `/api/v1/namespaces/${ns}`);
    await t.close();
  });

  for (const kind of ['configmaps', 'gadgets'] as const) {
    for (const sse of [false, true]) {
      test(`${sse ? 'SSE' : 'JSON'} watch of ${kind}: ADDED, MODIFIED, DELETED, as the cluster sends them`, async () => {
        const label = `${kind}-${sse ? 'sse' : 'json'}`;
        const resource = kind === 'configmaps' ? 'configmaps' : crd;
        const client = await watch(`${resource}/${ns}?watch=true&labelSelector=case%3D${label}`, { sse });
        assert.equal(client.status, 200, JSON.stringify(client.body));
        assert.match(String(client.headers['content-type']), sse ? /^text\/event-stream/ : /^application\/json/);
        // No resourceVersion: the stream starts with the current objects (none), then its position.
        const body = (name: string) =>
          kind === 'configmaps'
            ? { metadata: { name, labels: { case: label } }, data: { v: '1' } }
            : {
                apiVersion: `${group}/v1`,
                kind: 'Gadget',
                metadata: { name, labels: { case: label } },
                spec: { v: 1 },
              };
        const name = `${label}-1`;
        assert.equal((await kubeRequest(cp, 'POST', clusterPath(kind), body(name))).status, 201);
        await kubeRequest(
          cp,
          'PATCH',
          clusterPath(kind, name),
          kind === 'configmaps' ? { data: { v: '2' } } : { spec: { v: 2 } },
          {
            contentType: 'application/merge-patch+json',
          },
        );
        await kubeRequest(cp, 'DELETE', clusterPath(kind, name));
        await client.until((e) => e.length >= 3, 10_000, 'three events');
        assert.deepEqual(summary(client.events), [`ADDED:${name}`, `MODIFIED:${name}`, `DELETED:${name}`]);
        assert.equal(client.events[1].object.data?.v ?? String(client.events[1].object.spec?.v), '2');
        for (const e of client.events) {
          assert.equal(e.object.kind, kind === 'configmaps' ? 'ConfigMap' : 'Gadget');
          if (sse) {
            assert.equal(e.event, e.type, 'the SSE event name is the watch event type');
            assert.equal(e.id, e.object.metadata.resourceVersion, 'the SSE id is the resourceVersion');
          }
        }
        assert.ok(client.headers['x-request-id'], 'a stream carries x-request-id too');
        if (sse) {
          assert.equal(client.positions.length, 1, 'one position after the (empty) initial list');
          await waitFor('a heartbeat comment (every second here)', async () => client.heartbeats > 0, 5000);
        }
      });
    }
  }

  test('_all: a namespaced resource across all namespaces, and a cluster-scoped one', async () => {
    const across = await watch(`configmaps/_all?watch=true&labelSelector=case%3Dacross`);
    const namespaces = await watch(`namespaces/_all?watch=true&labelSelector=case%3D${ns}`, { sse: true });
    assert.deepEqual([across.status, namespaces.status], [200, 200]);
    await namespaces.until(() => namespaces.positions.length === 1, 5000, 'the stream to run');
    await kubeRequest(cp, 'POST', clusterPath('configmaps'), {
      metadata: { name: 'across', labels: { case: 'across' } },
    });
    await kubeRequest(
      cp,
      'PATCH',
      `/api/v1/namespaces/${ns}`,
      { metadata: { labels: { case: ns } } },
      { contentType: 'application/merge-patch+json' },
    );
    await across.until((e) => e.length >= 1);
    await namespaces.until((e) => e.length >= 1);
    assert.deepEqual(summary(across.events), ['ADDED:across']);
    assert.equal(across.events[0].object.metadata.namespace, ns);
    // The label makes the namespace match the selector: for this watch it is ADDED, as the cluster says.
    assert.deepEqual(summary(namespaces.events), [`ADDED:${ns}`]);
    const scoped = await request(t.app, 'GET', `/api/v1/namespaces/${ns}?watch=true`, {
      token: admin,
      headers: { 'x-cluster-name': 'alpha' },
    });
    assert.equal(scoped.status, 400, 'a cluster-scoped resource needs _all');
  });

  test('JSON watch events are byte for byte what the cluster sends', async () => {
    const list = await request(t.app, 'GET', `/api/v1/configmaps/${ns}`, {
      token: admin,
      headers: { 'x-cluster-name': 'alpha' },
      query: { labelSelector: 'case=bytes' },
    });
    const rv = list.body.metadata.resourceVersion as string;
    const direct = clusterWatchLines(
      cp,
      `${clusterPath('configmaps')}?watch=true&resourceVersion=${rv}&labelSelector=case%3Dbytes`,
    );
    const client = await watch(`configmaps/${ns}?watch=true&resourceVersion=${rv}&labelSelector=case%3Dbytes`);
    try {
      await kubeRequest(cp, 'POST', clusterPath('configmaps'), {
        metadata: { name: 'bytes', labels: { case: 'bytes' } },
      });
      await kubeRequest(cp, 'DELETE', clusterPath('configmaps', 'bytes'));
      await client.until((e) => e.length >= 2);
      await waitFor('the direct watch', async () => direct.lines.length >= 2);
      assert.deepEqual(
        client.events.map((e) => e.raw),
        direct.lines.slice(0, 2),
      );
    } finally {
      direct.close();
    }
  });

  test('an SSE client that reconnects with Last-Event-ID misses nothing and sees nothing twice', async () => {
    const path = `configmaps/${ns}?watch=true&labelSelector=case%3Dresume`;
    const mk = (name: string) =>
      kubeRequest(cp, 'POST', clusterPath('configmaps'), { metadata: { name, labels: { case: 'resume' } } });
    await mk('r1');
    const first = await watch(path, { sse: true });
    await first.until((e) => e.length >= 1);
    assert.deepEqual(summary(first.events), ['ADDED:r1'], 'the existing object, as ADDED');
    assert.equal(
      first.events[0].id,
      undefined,
      'initial objects carry no id: a reconnection in the middle lists again',
    );
    await first.until(() => first.positions.length === 1, 5000, 'the position after the initial list');
    await mk('r2');
    await first.until((e) => e.length >= 2);
    const lastId = first.events[1].id!;
    assert.ok(lastId);
    first.close();
    // While disconnected: a new object, a change, a deletion.
    await mk('r3');
    await kubeRequest(
      cp,
      'PATCH',
      clusterPath('configmaps', 'r2'),
      { data: { x: 'y' } },
      {
        contentType: 'application/merge-patch+json',
      },
    );
    await kubeRequest(cp, 'DELETE', clusterPath('configmaps', 'r1'));
    const second = await watch(path, { sse: true, lastEventId: lastId });
    assert.equal(second.status, 200);
    await mk('r4');
    await second.until((e) => e.some((x) => x.object?.metadata?.name === 'r4'));
    assert.deepEqual(summary(second.events), ['ADDED:r3', 'MODIFIED:r2', 'DELETED:r1', 'ADDED:r4']);
    const ids = second.events.map((e) => BigInt(e.id!));
    assert.ok(
      ids.every((id, i) => id > BigInt(lastId) && (i === 0 || id > ids[i - 1])),
      'ids increase after Last-Event-ID',
    );
  });

  test("a too-old resourceVersion: the cluster's 410 as an ERROR event (JSON and SSE), and 410 past the window", async () => {
    // No shared watch for this selector yet: the cluster itself judges version 1.
    const json = await watch(`configmaps/${ns}?watch=true&resourceVersion=1&labelSelector=case%3Dold`);
    assert.equal(await json.ended, true);
    assert.equal(json.events.length, 1);
    assert.equal(json.events[0].type, 'ERROR');
    assert.equal(json.events[0].object.code, 410);
    assert.equal(json.events[0].object.kind, 'Status');
    const sse = await watch(`configmaps/${ns}?watch=true&labelSelector=case%3Dold2`, { sse: true, lastEventId: '1' });
    assert.equal(await sse.ended, true);
    assert.deepEqual(
      sse.events.map((e) => [e.event, e.object.code]),
      [['ERROR', 410]],
    );

    // A shared watch with a window of 10 events: a subscriber from before the window gets 410 from the service.
    const live = await watch(`configmaps/${ns}?watch=true&labelSelector=case%3Dwindow`);
    const created: string[] = [];
    for (let i = 0; i < 15; i++) {
      const res = await kubeRequest(cp, 'POST', clusterPath('configmaps'), {
        metadata: { name: `win-${i}`, labels: { case: 'window' } },
      });
      created.push(res.body.metadata.resourceVersion);
    }
    await live.until((e) => e.length >= 15);
    const late = await watch(`configmaps/${ns}?watch=true&labelSelector=case%3Dwindow&resourceVersion=${created[1]}`);
    assert.equal(await late.ended, true);
    assert.deepEqual(
      late.events.map((e) => [e.type, e.object.code, e.object.reason]),
      [['ERROR', 410, 'Expired']],
    );
    // Within the window: exactly the events after that version.
    const recent = await watch(
      `configmaps/${ns}?watch=true&labelSelector=case%3Dwindow&resourceVersion=${created[10]}`,
    );
    await recent.until((e) => e.length >= 4);
    await new Promise((r) => setTimeout(r, 200));
    assert.deepEqual(summary(recent.events), ['ADDED:win-11', 'ADDED:win-12', 'ADDED:win-13', 'ADDED:win-14']);
  });

  test('a viewer may watch configmaps but not secrets (403); bad watch queries are 400', async () => {
    const viewer = await signedIn(t, 'viewer');
    const secrets = await openWatch(base, `/api/v1/secrets/${ns}?watch=true`, { token: viewer.token });
    assert.equal(secrets.status, 403);
    assert.match(secrets.body.message, /secrets/);
    assert.ok(secrets.body.requestId);
    const cms = await watch(`configmaps/${ns}?watch=true&labelSelector=case%3Dviewer`, { token: viewer.token });
    assert.equal(cms.status, 200);
    cms.close();

    for (const [query, problem] of [
      ['watch=true&limit=5', /limit cannot be used with watch=true/],
      ['watch=true&continue=x', /continue cannot be used/],
      ['allowWatchBookmarks=true', /allowWatchBookmarks needs watch=true/],
      ['watch=yes', /watch must be true or false/],
    ] as const) {
      const res = await request(t.app, 'GET', `/api/v1/configmaps/${ns}?${query}`, {
        token: admin,
        headers: { 'x-cluster-name': 'alpha' },
      });
      assert.equal(res.status, 400, query);
      assert.match(JSON.stringify(res.body.message), problem);
    }
  });

  test('disabling a watching user ends their stream within 5 s, with an ERROR event saying why', async () => {
    const user = await createUser(t, { role: 'viewer' });
    const token = await login(t, user);
    const client = await watch(`configmaps/${ns}?watch=true&labelSelector=case%3Ddisable`, { sse: true, token });
    assert.equal(client.status, 200);
    await client.until(() => client.positions.length === 1, 5000, 'the stream to run');
    const disabledAt = Date.now();
    const res = await request(t.app, 'POST', `/api/v1/admin/users/${user.id}/enable`, {
      token: admin,
      body: { enabled: false },
    });
    assert.equal(res.status, 200);
    // An event after the disable must not reach them.
    const ended = await client.ended;
    const took = client.endedAt! - disabledAt;
    console.log(`# stream of a disabled user ended ${took} ms after the disable`);
    assert.ok(took <= 5000, `ended after ${took} ms`);
    assert.equal(ended, true, 'a clean end');
    assert.deepEqual(
      client.events.map((e) => [e.event, e.object.code]),
      [['ERROR', 401]],
    );
  });

  test('a deleted API key and a changed role end their streams within 5 s (401, 403)', async () => {
    const created = await request(t.app, 'POST', '/api/v1/admin/apikeys', {
      token: admin,
      body: { name: `watcher-${process.pid}`, role: 'viewer' },
    });
    assert.equal(created.status, 201, created.text);
    const byKey = await openWatch(base, `/api/v1/configmaps/${ns}?watch=true&labelSelector=case%3Dkey`, {
      token: created.body.key,
    });
    open.push(byKey);
    assert.equal(byKey.status, 200);

    const user = await signedIn(t, 'admin');
    const secrets = await watch(`secrets/${ns}?watch=true`, { token: user.token, sse: true });
    assert.equal(secrets.status, 200, 'an admin may watch secrets');

    const changedAt = Date.now();
    assert.equal(
      (await request(t.app, 'DELETE', `/api/v1/admin/apikeys/${created.body.id}`, { token: admin })).status,
      200,
    );
    const roles = await request(t.app, 'PUT', `/api/v1/admin/users/${user.id}/roles`, {
      token: admin,
      body: { roles: ['viewer'] },
    });
    assert.equal(roles.status, 200, roles.text);
    await Promise.all([byKey.ended, secrets.ended]);
    const took = Math.max(byKey.endedAt!, secrets.endedAt!) - changedAt;
    console.log(`# deleted key and changed role: streams ended ${took} ms later`);
    assert.ok(took <= 5000, `ended after ${took} ms`);
    assert.deepEqual(
      byKey.events.map((e) => [e.type, e.object.code]),
      [['ERROR', 401]],
    );
    // (the namespace's ServiceAccount token Secret came first, as ADDED)
    const last = secrets.events[secrets.events.length - 1];
    assert.deepEqual([last.event, last.object.code], ['ERROR', 403]);
    assert.ok(secrets.events.slice(0, -1).every((e) => e.type === 'ADDED'));
    assert.match(last.object.message, /secrets/);
  });

  test('per-caller and global limits: the stream over either is 429 with Retry-After', async () => {
    const limited = await startTestApp({ env: { CAS_WATCH_MAX_STREAMS_PER_CALLER: '2', CAS_WATCH_MAX_STREAMS: '3' } });
    try {
      await limited.app.listen({ port: 0, host: '127.0.0.1' });
      const url = `http://127.0.0.1:${(limited.app.getHttpServer().address() as AddressInfo).port}`;
      const token = (await signedIn(limited, 'admin')).token;
      await registerCluster(limited, token, 'alpha', kubeconfigFor(cp));
      const path = `/api/v1/configmaps/${ns}?watch=true&labelSelector=case%3Dlimit`;
      const a = await openWatch(url, path, { token });
      const b = await openWatch(url, path, { token, sse: true });
      const c = await openWatch(url, path, { token });
      assert.deepEqual([a.status, b.status, c.status], [200, 200, 429]);
      assert.equal(c.headers['retry-after'], '5');
      assert.match(c.body.message, /too many watch streams of this user/);
      a.close();
      await waitFor('the slot to be free', async () => {
        const d = await openWatch(url, path, { token });
        d.close();
        return d.status === 200;
      });
      const a2 = await openWatch(url, path, { token });
      assert.equal(a2.status, 200);
      const other = (await signedIn(limited, 'viewer')).token;
      const e = await openWatch(url, path, { token: other });
      assert.equal(e.status, 200, 'a third stream, of another caller');
      const f = await openWatch(url, path, { token: other });
      assert.equal(f.status, 429);
      assert.match(f.body.message, /too many watch streams on this replica \(at most 3\)/);
      for (const x of [a2, b, e]) x.close();
    } finally {
      await limited.close();
    }
  });
});
