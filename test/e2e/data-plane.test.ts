import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import {
  type AuditEvent,
  kubeRequest,
  readAudit,
  sharedControlPlane,
  waitFor,
  type ControlPlane,
} from '../harness/control-plane.js';
import { startKubelet, type Kubelet } from '../harness/kubelet.js';
import { podOnNode } from '../support/kube.js';
import { startTestApp, type TestApp } from '../support/app.js';
import { kubeconfigFor, registerCluster } from '../support/clusters.js';
import { signedIn } from '../support/factories.js';
import { client, request } from '../support/http.js';
import { openWatch, type WatchClient } from './watch-client.js';

const pid = process.pid;

/** A followed log over a real socket: how it ended, and when. */
function followLog(base: string, path: string, token: string, cluster: string) {
  return new Promise<{ status: number; ended: Promise<number>; close(): void }>((resolve, reject) => {
    const req = http.get(
      `${base}${path}`,
      { headers: { authorization: `Bearer ${token}`, 'x-cluster-name': cluster }, agent: false },
      (res) => {
        res.resume();
        const ended = new Promise<number>((done) => {
          res.on('close', () => done(Date.now()));
        });
        resolve({ status: res.statusCode ?? 0, ended, close: () => req.destroy() });
      },
    );
    req.on('error', reject);
  });
}

describe('one data plane: every route family goes to an impersonating cluster as the person', () => {
  let cp: ControlPlane;
  let kubelet: Kubelet;
  let t: TestApp;
  let base: string;
  let person: { token: string };
  const ns = `dp-imp-${pid}`;
  const username = `dp-${pid}`;
  const role = `dp-role-${pid}`;
  const nodeName = `dp-node-${pid}`;
  const cluster = 'imp';
  const get = (path: string, query?: Record<string, string>) =>
    request(t.app, 'GET', `/api/v1/${path}`, { token: person.token, headers: { 'x-cluster-name': cluster }, query });
  /** Audit entries of the apiserver made as the person, since `from`. */
  const asPerson = async (from: number) =>
    (await readAudit(cp)).filter(
      (e: AuditEvent) =>
        e.impersonatedUser?.username === `cas:${username}` && Date.parse(e.requestReceivedTimestamp) >= from - 1000,
    );

  before(async () => {
    cp = await sharedControlPlane('a');
    kubelet = await startKubelet(cp, nodeName);
    await kubeRequest(cp, 'POST', '/api/v1/namespaces', { metadata: { name: ns } });
    await kubeRequest(cp, 'POST', `/api/v1/namespaces/${ns}/configmaps`, { metadata: { name: 'cm1' } });
    await podOnNode(cp, ns, 'p1', nodeName);
    await kubeRequest(cp, 'POST', `/apis/apps/v1/namespaces/${ns}/deployments`, {
      metadata: { name: 'd1' },
      spec: {
        replicas: 0,
        selector: { matchLabels: { app: 'd1' } },
        template: { metadata: { labels: { app: 'd1' } }, spec: { containers: [{ name: 'c', image: 'x.invalid/y' }] } },
      },
    });
    kubelet.write(ns, 'p1', 'app', 'hello from p1');
    t = await startTestApp();
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    base = `http://127.0.0.1:${(t.app.getHttpServer().address() as AddressInfo).port}`;
    const admin = client(t.app, (await signedIn(t, 'admin')).token);
    const created = await admin.post('/api/v1/admin/clusters', {
      body: { name: cluster, config: kubeconfigFor(cp), impersonate: true },
    });
    assert.equal(created.status, 201, created.text);
    const roleRes = await admin.post('/api/v1/admin/roles', {
      body: {
        name: role,
        rules: [
          {
            clusters: [cluster],
            namespaces: [ns],
            resources: ['configmaps', 'events', 'pods', 'deployments.apps'],
            verbs: ['get', 'list', 'watch', 'log'],
          },
        ],
      },
    });
    assert.equal(roleRes.status, 201, roleRes.text);
    person = await signedIn(t, role, { username });
  });
  after(async () => {
    await kubeRequest(cp, 'DELETE', `/api/v1/namespaces/${ns}/pods/p1`, { gracePeriodSeconds: 0 });
    await kubeRequest(cp, 'DELETE', `/api/v1/namespaces/${ns}`);
    await kubelet?.stop();
    await t?.close();
  });

  test('without a RoleBinding the cluster refuses the person everywhere: watch and events never answer with objects', async () => {
    assert.equal((await get(`configmaps/${ns}/cm1`)).status, 403);
    const list = await get(`configmaps/${ns}`);
    assert.equal(list.status, 403);
    const rv = (await kubeRequest(cp, 'GET', `/api/v1/namespaces/${ns}/configmaps`)).body.metadata.resourceVersion;

    for (const [path, sse] of [
      [`/api/v1/configmaps/${ns}?watch=true`, false],
      [`/api/v1/configmaps/${ns}?watch=true&resourceVersion=${rv}`, false],
      [`/api/v1/configmaps/${ns}?watch=true&resourceVersion=${rv}`, true],
      [`/api/v1/configmaps/${ns}/cm1/events?watch=true`, false],
      [`/api/v1/configmaps/${ns}/cm1/events?watch=true&resourceVersion=${rv}`, true],
    ] as const) {
      const watch = await openWatch(base, path, { token: person.token, cluster, sse });
      await new Promise((r) => setTimeout(r, 300));
      watch.close();
      assert.equal(watch.status, 403, `${path} (sse: ${sse}): ${watch.status} ${JSON.stringify(watch.body)}`);
      assert.equal(watch.events.length, 0, `${path}: no event reaches a refused person`);
    }
    const events = await get(`configmaps/${ns}/cm1/events`);
    assert.equal(events.status, 403, events.text);
  });

  test('with a RoleBinding, every route family is answered, and each request is in the audit log as cas:<username>', async () => {
    const binding = await kubeRequest(cp, 'POST', `/apis/rbac.authorization.k8s.io/v1/namespaces/${ns}/rolebindings`, {
      metadata: { name: 'dp-view' },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'view' },
      subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'Group', name: `cas:role:${role}` }],
    });
    assert.equal(binding.status, 201, JSON.stringify(binding.body));
    await waitFor('the RoleBinding to take effect', async () => (await get(`configmaps/${ns}/cm1`)).status === 200);
    // Access reviews are reused for 5 s: those of the refused test must not answer for this one.
    await new Promise((r) => setTimeout(r, 5_500));

    const seen = async (what: string, from: number, match: (e: AuditEvent) => boolean) => {
      const found = await waitFor(`${what} in the apiserver's audit log as cas:${username}`, async () =>
        (await asPerson(from)).some(match) ? true : undefined,
      );
      assert.ok(found);
    };
    const ref = (e: AuditEvent) => e.objectRef ?? {};
    const review = (e: AuditEvent) => ref(e).resource === 'selfsubjectaccessreviews' && e.verb === 'create';

    let from = Date.now();
    assert.equal((await get(`configmaps/${ns}/cm1`)).status, 200);
    await seen('get', from, (e) => e.verb === 'get' && ref(e).resource === 'configmaps' && ref(e).name === 'cm1');

    from = Date.now();
    assert.equal((await get(`configmaps/${ns}`)).body.kind, 'ConfigMapList');
    await seen('list', from, (e) => e.verb === 'list' && ref(e).resource === 'configmaps');

    const watches: WatchClient[] = [];
    try {
      from = Date.now();
      const json = await openWatch(base, `/api/v1/configmaps/${ns}?watch=true`, { token: person.token, cluster });
      watches.push(json);
      await json.until((events) => events.some((e) => e.object?.metadata?.name === 'cm1'));
      // its initial list as the person, and the cluster's review of the person's watch
      await seen('the watch (JSON)', from, (e) => e.verb === 'list' && ref(e).resource === 'configmaps');
      await seen('the review of the watch', from, review);

      const rv = (await kubeRequest(cp, 'GET', `/api/v1/namespaces/${ns}/configmaps`)).body.metadata.resourceVersion;
      const sse = await openWatch(base, `/api/v1/configmaps/${ns}?watch=true&resourceVersion=${rv}`, {
        token: person.token,
        cluster,
        sse: true,
      });
      watches.push(sse);
      assert.equal(sse.status, 200);
      await kubeRequest(cp, 'POST', `/api/v1/namespaces/${ns}/configmaps`, { metadata: { name: 'cm2' } });
      await sse.until((events) => events.some((e) => e.object?.metadata?.name === 'cm2'));

      from = Date.now();
      const events = await get(`configmaps/${ns}/cm1/events`);
      assert.equal(events.status, 200, events.text);
      assert.equal(events.body.kind, 'EventList');
      await seen('the object events', from, (e) => e.verb === 'list' && ref(e).resource === 'events');

      from = Date.now();
      const eventWatch = await openWatch(base, `/api/v1/configmaps/${ns}/cm1/events?watch=true`, {
        token: person.token,
        cluster,
      });
      watches.push(eventWatch);
      assert.equal(eventWatch.status, 200);
      await seen('the event watch', from, (e) => review(e) || (e.verb === 'list' && ref(e).resource === 'events'));
    } finally {
      for (const w of watches) w.close();
    }

    from = Date.now();
    const log = await get(`pods/${ns}/p1/log`);
    assert.equal(log.status, 200, log.text);
    assert.equal(log.text, 'hello from p1\n');
    await seen('the log', from, (e) => ref(e).resource === 'pods' && ref(e).subresource === 'log');

    from = Date.now();
    assert.equal((await get(`deployments.apps/${ns}/d1/scale`)).status, 200);
    assert.equal((await get(`deployments.apps/${ns}/d1/status`)).status, 200);
    await seen('scale', from, (e) => ref(e).resource === 'deployments' && ref(e).subresource === 'scale');
    await seen('status', from, (e) => ref(e).resource === 'deployments' && ref(e).subresource === 'status');

    from = Date.now();
    const types = await request(t.app, 'GET', `/api/v1/clusters/${cluster}/api-resources`, { token: person.token });
    assert.equal(types.status, 200, types.text);
    const schema = await request(t.app, 'GET', `/api/v1/clusters/${cluster}/api-resources/configmaps/schema`, {
      token: person.token,
    });
    assert.equal(schema.status, 200, schema.text);
    await seen('the reviews of api-resources and schema', from, review);
    const reviews = (await asPerson(from)).filter(review);
    assert.ok(reviews.length >= 2, `a review each for api-resources and the schema: ${reviews.length}`);
  });

  test("a person bound to the cluster's `view` reads an object's events although the service's rules also allow events.k8s.io", async () => {
    // `view` on v1.20 grants core events, not events.events.k8s.io: the route must not turn that into a 403.
    const wide = `${role}-wide`;
    const admin = client(t.app, (await signedIn(t, 'admin')).token);
    const created = await admin.post('/api/v1/admin/roles', {
      body: {
        name: wide,
        rules: [
          {
            clusters: [cluster],
            namespaces: [ns],
            resources: ['configmaps', 'events', 'events.events.k8s.io'],
            verbs: ['get', 'list', 'watch'],
          },
        ],
      },
    });
    assert.equal(created.status, 201, created.text);
    const viewer = await signedIn(t, wide, { username: `${username}-wide` });
    const binding = await kubeRequest(cp, 'POST', `/apis/rbac.authorization.k8s.io/v1/namespaces/${ns}/rolebindings`, {
      metadata: { name: 'dp-view-wide' },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'view' },
      subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'Group', name: `cas:role:${wide}` }],
    });
    assert.equal(binding.status, 201, JSON.stringify(binding.body));
    const event = await kubeRequest(cp, 'POST', `/api/v1/namespaces/${ns}/events`, {
      metadata: { name: `cm1-seen-${pid}` },
      involvedObject: {
        kind: 'ConfigMap',
        namespace: ns,
        name: 'cm1',
        uid: (await kubeRequest(cp, 'GET', `/api/v1/namespaces/${ns}/configmaps/cm1`)).body.metadata.uid,
      },
      reason: 'Seen',
      message: 'seen by a test',
      type: 'Normal',
      firstTimestamp: new Date().toISOString(),
      lastTimestamp: new Date().toISOString(),
    });
    assert.equal(event.status, 201, JSON.stringify(event.body));
    const events = await waitFor('the RoleBinding to take effect for the events', async () => {
      const res = await request(t.app, 'GET', `/api/v1/configmaps/${ns}/cm1/events`, {
        token: viewer.token,
        headers: { 'x-cluster-name': cluster },
      });
      return res.status === 200 ? res : undefined;
    });
    assert.equal(events.body.kind, 'EventList');
    assert.ok(
      events.body.items.some((e: { reason?: string }) => e.reason === 'Seen'),
      JSON.stringify(events.body.items.map((e: { reason?: string }) => e.reason)),
    );
  });
});

describe('one stream owner: a disabled or deleted cluster ends its open watches and logs within 5 s', () => {
  let cp: ControlPlane;
  let kubelet: Kubelet;
  let t: TestApp;
  let base: string;
  let admin: string;
  const ns = `dp-end-${pid}`;
  const nodeName = `dp-end-node-${pid}`;

  before(async () => {
    cp = await sharedControlPlane('a');
    kubelet = await startKubelet(cp, nodeName);
    await kubeRequest(cp, 'POST', '/api/v1/namespaces', { metadata: { name: ns } });
    await podOnNode(cp, ns, 'p1', nodeName);
    kubelet.write(ns, 'p1', 'app', 'first line');
    t = await startTestApp();
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    base = `http://127.0.0.1:${(t.app.getHttpServer().address() as AddressInfo).port}`;
    admin = (await signedIn(t, 'admin')).token;
  });
  after(async () => {
    await kubeRequest(cp, 'DELETE', `/api/v1/namespaces/${ns}/pods/p1`, { gracePeriodSeconds: 0 });
    await kubeRequest(cp, 'DELETE', `/api/v1/namespaces/${ns}`);
    await kubelet?.stop();
    await t?.close();
  });

  for (const change of ['disabled', 'deleted'] as const) {
    test(`${change}: the watch gets an ERROR event naming the cluster and ends, the followed log ends`, async () => {
      const name = `dp-${change}`;
      const id = await registerCluster(t, admin, name, kubeconfigFor(cp));
      const watch = await openWatch(base, `/api/v1/configmaps/${ns}?watch=true`, { token: admin, cluster: name });
      assert.equal(watch.status, 200);
      const log = await followLog(base, `/api/v1/pods/${ns}/p1/log?follow=true`, admin, name);
      assert.equal(log.status, 200);

      const changedAt = Date.now();
      const res =
        change === 'disabled'
          ? await request(t.app, 'PUT', `/api/v1/admin/clusters/${id}`, { token: admin, body: { enabled: false } })
          : await request(t.app, 'DELETE', `/api/v1/admin/clusters/${id}`, { token: admin });
      assert.ok(res.status < 300, res.text);

      const [watchClean, logEnded] = await Promise.all([watch.ended, log.ended]);
      const watchMs = watch.endedAt! - changedAt;
      const logMs = logEnded - changedAt;
      assert.ok(watchMs <= 5_000, `the watch ended ${watchMs} ms after the cluster was ${change}`);
      assert.ok(logMs <= 5_000, `the log ended ${logMs} ms after the cluster was ${change}`);
      assert.ok(watchClean, 'the watch ended cleanly, with a last event');
      const last = watch.events.at(-1);
      assert.equal(last?.type, 'ERROR');
      assert.match(String(last?.object?.message), new RegExp(`cluster '${name}'`));
    });
  }
});
