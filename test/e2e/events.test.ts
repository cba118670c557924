import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { kubeRequest, waitFor, type ControlPlane } from '../harness/control-plane.js';
import type { TestApp } from '../support/app.js';
import { signedIn } from '../support/factories.js';
import { request } from '../support/http.js';
import { openWatch, summary } from './watch-client.js';
import { createCrd } from '../support/kube.js';
import { startClusterApp } from '../support/cluster-app.js';

describe('events of any object, built-in or custom', () => {
  let cp: ControlPlane;
  let t: TestApp;
  let base: string;
  let admin: string;
  const ns = `events-${process.pid}`;
  const group = `ev${process.pid}.example.com`;
  const crd = `sprockets.${group}`;
  const call = (path: string, token = admin, query?: Record<string, string>) =>
    request(t.app, 'GET', `/api/v1/${path}`, { token, headers: { 'x-cluster-name': 'alpha' }, query });

  /** A core/v1 Event about `object` (uid, kind, name), written straight to the cluster. */
  const coreEvent = (name: string, object: any, reason: string, at: string) =>
    kubeRequest(cp, 'POST', `/api/v1/namespaces/${ns}/events`, {
      metadata: { name },
      involvedObject: {
        apiVersion: object.apiVersion,
        kind: object.kind,
        name: object.metadata.name,
        namespace: ns,
        uid: object.metadata.uid,
      },
      reason,
      message: `${reason} happened`,
      type: 'Normal',
      firstTimestamp: at,
      lastTimestamp: at,
      count: 1,
      source: { component: 'events-test' },
    });

  before(async () => {
    ({ cp, t, admin, base } = await startClusterApp({ cluster: 'alpha', namespace: ns, listen: true }));
    await createCrd(cp, { group, plural: 'sprockets', kind: 'Sprocket', namespace: ns });
  });
  after(async () => {
    await kubeRequest(cp, 'DELETE', `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${crd}`);
    await kubeRequest(cp, 'DELETE', `/api/v1/namespaces/${ns}`);
    await t.close();
  });

  test("a Deployment's events: what the deployment controller recorded, newest first", async () => {
    const deployment = {
      metadata: { name: 'web' },
      spec: {
        replicas: 1,
        selector: { matchLabels: { app: 'web' } },
        template: { metadata: { labels: { app: 'web' } }, spec: { containers: [{ name: 'web', image: 'nginx' }] } },
      },
    };
    const res = await request(t.app, 'POST', `/api/v1/deployments.apps/${ns}`, {
      token: admin,
      headers: { 'x-cluster-name': 'alpha' },
      body: deployment,
    });
    assert.equal(res.status, 201, res.text);
    const uid = res.body.metadata.uid;
    // A rollout restart adds a second ScalingReplicaSet event.
    const events = await waitFor(
      'the deployment controller to record an event',
      async () => {
        const list = await call(`deployments.apps/${ns}/web/events`);
        assert.equal(list.status, 200, list.text);
        return list.body.items.length >= 1 ? list.body : undefined;
      },
      30_000,
      250,
    );
    assert.equal(events.kind, 'EventList');
    for (const e of events.items) {
      assert.equal(e.involvedObject.uid, uid);
      assert.equal(e.kind, 'Event');
      assert.equal(e.apiVersion, 'v1');
    }
    assert.ok(events.items.some((e: any) => e.reason === 'ScalingReplicaSet'));
    const times = events.items.map((e: any) => Date.parse(e.lastTimestamp ?? e.eventTime));
    assert.ok(
      times.every((time: number, i: number) => i === 0 || time <= times[i - 1]),
      'newest first',
    );

    const viewer = await signedIn(t, 'viewer');
    assert.equal((await call(`deployments.apps/${ns}/web/events`, viewer.token)).status, 200);
    const secret = await call(`secrets/${ns}/whatever/events`, viewer.token);
    assert.equal(secret.status, 403, 'reading the object is needed: viewers cannot read secrets');
    const missing = await call(`deployments.apps/${ns}/nope/events`);
    assert.equal(missing.status, 404);
    assert.equal(missing.body.kind, 'Status', "the cluster's 404 passes through");
  });

  test("a custom resource's events from both event APIs, deduplicated, newest first; and streamed", async () => {
    const sprocket = (
      await kubeRequest(cp, 'POST', `/apis/${group}/v1/namespaces/${ns}/sprockets`, {
        apiVersion: `${group}/v1`,
        kind: 'Sprocket',
        metadata: { name: 's1' },
        spec: {},
      })
    ).body;
    const other = (
      await kubeRequest(cp, 'POST', `/apis/${group}/v1/namespaces/${ns}/sprockets`, {
        apiVersion: `${group}/v1`,
        kind: 'Sprocket',
        metadata: { name: 's2' },
        spec: {},
      })
    ).body;
    assert.ok(sprocket.metadata.uid && other.metadata.uid);
    const now = Date.now();
    const iso = (offsetSeconds: number) => new Date(now + offsetSeconds * 1000).toISOString().replace(/\.\d+Z$/, 'Z');
    assert.equal((await coreEvent('s1-old', sprocket, 'Older', iso(-60))).status, 201);
    assert.equal((await coreEvent('s2-noise', other, 'NotMine', iso(-30))).status, 201);
    const newer = await kubeRequest(cp, 'POST', `/apis/events.k8s.io/v1/namespaces/${ns}/events`, {
      metadata: { name: 's1-new' },
      eventTime: new Date(now).toISOString().replace('Z', '000Z'),
      reportingController: 'example.com/events-test',
      reportingInstance: 'events-test-1',
      action: 'Spin',
      reason: 'Newer',
      note: 'recorded through events.k8s.io',
      type: 'Normal',
      regarding: {
        apiVersion: `${group}/v1`,
        kind: 'Sprocket',
        name: 's1',
        namespace: ns,
        uid: sprocket.metadata.uid,
      },
    });
    assert.equal(newer.status, 201, JSON.stringify(newer.body));

    const list = await call(`${crd}/${ns}/s1/events`);
    assert.equal(list.status, 200, list.text);
    // The events.k8s.io event is the same stored object as a core/v1 one: it appears once.
    assert.deepEqual(
      list.body.items.map((e: any) => e.reason),
      ['Newer', 'Older'],
    );
    assert.equal(new Set(list.body.items.map((e: any) => e.metadata.uid)).size, 2);

    const stream = await openWatch(base, `/api/v1/${crd}/${ns}/s1/events?watch=true`, { token: admin, sse: true });
    assert.equal(stream.status, 200);
    try {
      await stream.until((e) => e.length >= 2, 10_000, 'the existing events');
      await coreEvent('s2-later', other, 'StillNotMine', iso(1));
      await coreEvent('s1-later', sprocket, 'Later', iso(2));
      await stream.until((e) => e.length >= 3, 10_000, 'the new event');
      await new Promise((r) => setTimeout(r, 300));
      assert.deepEqual(summary(stream.events).sort(), ['ADDED:s1-later', 'ADDED:s1-new', 'ADDED:s1-old']);
      assert.equal(stream.events[2].object.metadata.name, 's1-later', 'the new event comes after the existing ones');
      assert.ok(stream.events.every((e) => e.object.involvedObject.uid === sprocket.metadata.uid));
    } finally {
      stream.close();
    }
  });
});
