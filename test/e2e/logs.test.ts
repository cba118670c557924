import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { drainOf } from '../../src/common/drain.js';
import { kubeRequest, sharedControlPlane, waitFor, type ControlPlane } from '../harness/control-plane.js';
import { startKubelet, type Kubelet } from '../harness/kubelet.js';
import { startTestApp, type TestApp } from '../support/app.js';
import { kubeconfigFor, registerCluster } from '../support/clusters.js';
import { signedIn } from '../support/factories.js';
import { request } from '../support/http.js';

/** A log read over a real socket: what has arrived so far, and whether and how it ended. */
interface LiveLog {
  status: number;
  headers: http.IncomingHttpHeaders;
  text(): string;
  bytes(): number;
  pause(): void;
  resume(): void;
  /** Resolves with how the response ended: 'end' (cleanly) or 'aborted'. */
  ended: Promise<'end' | 'aborted'>;
  close(): void;
}

function openLog(base: string, path: string, token: string, cluster = 'alpha'): Promise<LiveLog> {
  return new Promise((resolve, reject) => {
    const req = http.get(
      `${base}${path}`,
      { headers: { authorization: `Bearer ${token}`, 'x-cluster-name': cluster }, agent: false },
      (res) => {
        const chunks: Buffer[] = [];
        let bytes = 0;
        res.on('data', (c: Buffer) => {
          bytes += c.length;
          if (bytes <= 1 << 20) chunks.push(c); // the text of small logs; big ones are only counted
        });
        const ended = new Promise<'end' | 'aborted'>((done) => {
          res.on('end', () => done('end'));
          res.on('aborted', () => done('aborted'));
          res.on('error', () => done('aborted'));
        });
        resolve({
          status: res.statusCode ?? 0,
          headers: res.headers,
          text: () => Buffer.concat(chunks).toString('utf8'),
          bytes: () => bytes,
          pause: () => res.pause(),
          resume: () => res.resume(),
          ended,
          close: () => req.destroy(),
        });
      },
    );
    req.on('error', reject);
  });
}

describe('pod logs through a real apiserver and a test kubelet', () => {
  let cp: ControlPlane;
  let kubelet: Kubelet;
  let t: TestApp;
  let base: string;
  let clusterId: number;
  let admin: { id: number; token: string };
  let viewer: { id: number; token: string };
  const ns = `logs-${process.pid}`;
  const nodeName = `logs-node-${process.pid}`;
  const get = (path: string, token: string, query?: Record<string, string>) =>
    request(t.app, 'GET', `/api/v1/${path}`, { token, headers: { 'x-cluster-name': 'alpha' }, query });

  const pod = (name: string, containers: string[]) => ({
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, namespace: ns },
    spec: {
      nodeName,
      automountServiceAccountToken: false, // no wait for the new namespace's ServiceAccount token
      containers: containers.map((c) => ({ name: c, image: 'example.invalid/never-pulled' })),
    },
  });

  before(async () => {
    cp = await sharedControlPlane('a');
    kubelet = await startKubelet(cp, nodeName);
    t = await startTestApp();
    admin = await signedIn(t, 'admin');
    viewer = await signedIn(t, 'viewer');
    clusterId = await registerCluster(t, admin.token, 'alpha', kubeconfigFor(cp));
    await kubeRequest(cp, 'POST', '/api/v1/namespaces', { metadata: { name: ns } });
    for (const p of [pod('single', ['app']), pod('multi', ['app', 'sidecar']), pod('follow', ['app'])]) {
      const created = await kubeRequest(cp, 'POST', `/api/v1/namespaces/${ns}/pods`, p);
      assert.equal(created.status, 201, JSON.stringify(created.body));
    }
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    base = `http://127.0.0.1:${(t.app.getHttpServer().address() as AddressInfo).port}`;
  });
  after(async () => {
    for (const name of ['single', 'multi', 'follow']) {
      await kubeRequest(cp, 'DELETE', `/api/v1/namespaces/${ns}/pods/${name}`, { gracePeriodSeconds: 0 });
    }
    await kubeRequest(cp, 'DELETE', `/api/v1/namespaces/${ns}`);
    await kubelet?.stop();
    await t?.close();
  });

  test('a viewer reads the log as text/plain; tailLines, limitBytes and timestamps reach the kubelet', async () => {
    const t0 = new Date(Math.floor(Date.now() / 1000) * 1000 - 60_000); // whole seconds: the apiserver truncates sinceTime
    for (let i = 1; i <= 5; i++) kubelet.write(ns, 'single', 'app', `line ${i}`, new Date(t0.getTime() + i * 1000));

    const all = await get(`pods/${ns}/single/log`, viewer.token);
    assert.equal(all.status, 200, all.text);
    assert.match(String(all.headers['content-type']), /^text\/plain/);
    assert.equal(all.text, 'line 1\nline 2\nline 3\nline 4\nline 5\n');

    const tail = await get(`pods/${ns}/single/log`, viewer.token, { tailLines: '2' });
    assert.equal(tail.status, 200, tail.text);
    assert.equal(tail.text, 'line 4\nline 5\n');

    const limited = await get(`pods/${ns}/single/log`, viewer.token, { limitBytes: '9' });
    assert.equal(limited.text, 'line 1\nli');

    const stamped = await get(`pods/${ns}/single/log`, viewer.token, { tailLines: '1', timestamps: 'true' });
    const expected = new Date(t0.getTime() + 5000).toISOString().replace('Z', '000000Z');
    assert.equal(stamped.text, `${expected} line 5\n`);

    const recent = await get(`pods/${ns}/single/log`, viewer.token, {
      sinceTime: new Date(t0.getTime() + 4000).toISOString(),
    });
    assert.equal(recent.text, 'line 4\nline 5\n');
  });

  test("a pod with several containers and none named: the cluster's 400 passes through; naming one works", async () => {
    kubelet.write(ns, 'multi', 'sidecar', 'from the sidecar');
    const res = await get(`pods/${ns}/multi/log`, viewer.token);
    assert.equal(res.status, 400, res.text);
    assert.equal(res.body.kind, 'Status');
    assert.match(res.body.message, /a container name must be specified for pod multi/);
    assert.match(res.body.message, /app/);
    assert.match(res.body.message, /sidecar/);

    const named = await get(`pods/${ns}/multi/log`, viewer.token, { container: 'sidecar' });
    assert.equal(named.status, 200, named.text);
    assert.equal(named.text, 'from the sidecar\n');

    const unknown = await get(`pods/${ns}/multi/log`, viewer.token, { container: 'nope' });
    assert.equal(unknown.status, 400, unknown.text);
    assert.match(unknown.body.message, /container nope is not valid for pod multi/);

    // an error of the kubelet, through the apiserver
    const previous = await get(`pods/${ns}/multi/log`, viewer.token, { container: 'app', previous: 'true' });
    assert.equal(previous.status, 400, previous.text);
    assert.match(previous.body.message, /previous terminated container "app" in pod "multi" not found/);

    const missing = await get(`pods/${ns}/no-such-pod/log`, viewer.token);
    assert.equal(missing.status, 404, missing.text);
    assert.equal(missing.body.kind, 'Status');
  });

  test('bad input is a 400 naming it; the usual routes of pods still answer', async () => {
    const cases: Array<[string, Record<string, string> | undefined, RegExp]> = [
      [`pods/${ns}/single/log`, { tailLine: '2' }, /property tailLine should not exist/],
      [`pods/${ns}/single/log`, { tailLines: '-1' }, /tailLines must not be less than 0/],
      [`pods/${ns}/single/log`, { follow: 'yes' }, /follow must be one of/],
      [`pods/${ns}/single/log`, { sinceTime: 'yesterday' }, /sinceTime must be an RFC 3339 time/],
      [`pods/${ns}/single/log`, { sinceSeconds: '10', sinceTime: '2026-01-01T00:00:00Z' }, /exclude each other/],
      [`pods/${ns}/single/log`, { container: 'A/B' }, /container must be a container name/],
      [`pods/_all/single/log`, undefined, /pods is namespaced/],
      [`pods/${ns}/a%2F..%2Fb/log`, undefined, /name must be a single path segment/],
    ];
    for (const [path, query, message] of cases) {
      const res = await get(path, viewer.token, query);
      assert.equal(res.status, 400, `${path} ${JSON.stringify(query)}: ${res.text}`);
      assert.match(JSON.stringify(res.body.message), message, `${path} ${JSON.stringify(query)}`);
    }
    const noCluster = await request(t.app, 'GET', `/api/v1/pods/${ns}/single/log`, { token: viewer.token });
    assert.equal(noCluster.status, 400);
    const anonymous = await request(t.app, 'GET', `/api/v1/pods/${ns}/single/log`, {
      headers: { 'x-cluster-name': 'alpha' },
    });
    assert.equal(anonymous.status, 401);

    // the generic routes are untouched by the log route beside them
    const one = await get(`pods/${ns}/single`, viewer.token);
    assert.equal(one.status, 200, one.text);
    assert.equal(one.body.metadata.name, 'single');
    assert.equal((await get(`pods/${ns}`, viewer.token)).body.items.length, 3);
  });

  test('follow: lines written after the request arrive while it is open; leaving closes the upstream stream', async () => {
    const key = `${ns}/follow/app`;
    kubelet.write(ns, 'follow', 'app', 'before');
    const live = await openLog(base, `/api/v1/pods/${ns}/follow/log?follow=true`, viewer.token);
    assert.equal(live.status, 200);
    assert.match(String(live.headers['content-type']), /^text\/plain/);
    await waitFor('the history', async () => live.text() === 'before\n', 10_000, 20);
    assert.equal(kubelet.openRequests(key), 1, 'the kubelet serves one follower');

    for (const line of ['after 1', 'after 2']) {
      await new Promise((r) => setTimeout(r, 300));
      kubelet.write(ns, 'follow', 'app', line);
    }
    await waitFor('the lines written later', async () => live.text() === 'before\nafter 1\nafter 2\n', 10_000, 20);

    live.close();
    await waitFor('the kubelet to see its follower go', async () => kubelet.openRequests(key) === 0, 10_000, 50);
  });

  test('backpressure: a client that stops reading holds the stream back at the kubelet, and loses nothing', async () => {
    const key = `${ns}/multi/app`;
    const line = 'x'.repeat(1023); // 1 KiB with its newline
    const lines = 64 * 1024; // 64 MiB
    const live = await openLog(
      base,
      `/api/v1/pods/${ns}/multi/log?container=app&follow=true&tailLines=0`,
      viewer.token,
    );
    assert.equal(live.status, 200);
    live.pause();
    await waitFor('the follower at the kubelet', async () => kubelet.openRequests(key) === 1, 10_000, 20);
    for (let i = 0; i < lines; i++) kubelet.write(ns, 'multi', 'app', line);
    await new Promise((r) => setTimeout(r, 1000));
    const queued = kubelet.queuedBytes(key);
    console.log(
      `# 64 MiB written, client paused: ${(queued / 2 ** 20).toFixed(1)} MiB still queued at the kubelet (with chunk framing)`,
    );
    assert.ok(queued > 32 * 2 ** 20, `the service and the apiserver took only what their buffers hold (${queued})`);

    live.resume();
    await waitFor('every byte', async () => live.bytes() >= lines * 1024, 60_000, 100);
    assert.equal(live.bytes(), lines * 1024);
    live.close();
  });

  test('a followed log ends when the container terminates', async () => {
    kubelet.write(ns, 'single', 'app', 'last words?');
    const live = await openLog(base, `/api/v1/pods/${ns}/single/log?follow=true&tailLines=1`, viewer.token);
    await waitFor('the tail', async () => live.text() === 'last words?\n', 10_000, 20);
    kubelet.terminate(ns, 'single', 'app');
    assert.equal(await live.ended, 'end');
  });

  test("disabling the user ends their followed log within 5 s (plus the re-check's own time)", async () => {
    const user = await signedIn(t, 'viewer');
    const live = await openLog(base, `/api/v1/pods/${ns}/follow/log?follow=true&tailLines=0`, user.token);
    assert.equal(live.status, 200);
    kubelet.write(ns, 'follow', 'app', 'still allowed');
    await waitFor('a line while allowed', async () => live.text().includes('still allowed'), 10_000, 20);

    const disabled = await request(t.app, 'POST', `/api/v1/admin/users/${user.id}/enable`, {
      token: admin.token,
      body: { enabled: false },
    });
    assert.equal(disabled.status, 200, disabled.text);
    const started = Date.now();
    const how = await Promise.race([live.ended, new Promise((r) => setTimeout(() => r('still open'), 10_000))]);
    const seconds = (Date.now() - started) / 1000;
    assert.equal(how, 'end');
    console.log(`# the stream ended ${seconds.toFixed(1)} s after the user was disabled`);
    assert.ok(seconds <= 7, `ended after ${seconds} s`);
    kubelet.write(ns, 'follow', 'app', 'after disabling');
    await new Promise((r) => setTimeout(r, 200));
    assert.doesNotMatch(live.text(), /after disabling/);
    await waitFor('the upstream follower to go', async () => kubelet.openRequests(`${ns}/follow/app`) === 0, 10_000);
  });

  test('disabling the cluster ends the followed logs on it', async () => {
    const live = await openLog(base, `/api/v1/pods/${ns}/follow/log?follow=true&tailLines=0`, admin.token);
    assert.equal(live.status, 200);
    const toggle = (enabled: boolean) =>
      request(t.app, 'PUT', `/api/v1/admin/clusters/${clusterId}`, { token: admin.token, body: { enabled } });
    assert.equal((await toggle(false)).status, 200);
    try {
      const how = await Promise.race([live.ended, new Promise((r) => setTimeout(() => r('still open'), 10_000))]);
      assert.equal(how, 'end');
    } finally {
      assert.equal((await toggle(true)).status, 200);
    }
  });

  test('at most 20 log streams per caller: the 21st is a 429, and closing one makes room', async () => {
    const user = await signedIn(t, 'viewer');
    const open: LiveLog[] = [];
    for (let i = 0; i < 20; i++) {
      const live = await openLog(base, `/api/v1/pods/${ns}/follow/log?follow=true&tailLines=0`, user.token);
      assert.equal(live.status, 200, `stream ${i + 1}`);
      open.push(live);
    }
    const refused = await get(`pods/${ns}/follow/log`, user.token);
    assert.equal(refused.status, 429, refused.text);
    assert.match(refused.body.message, /too many log streams of this user, API keys included \(at most 20\)/);
    assert.equal((await get(`pods/${ns}/single/log`, viewer.token)).status, 200, 'other callers are not limited');

    open.pop()!.close();
    await waitFor(
      'room for one more',
      async () => (await get(`pods/${ns}/single/log`, user.token)).status === 200,
      10_000,
      50,
    );
    for (const live of open) live.close();
    await waitFor('the followers to go', async () => kubelet.openRequests(`${ns}/follow/app`) === 0, 10_000, 50);
  });

  test('SIGTERM (drain): followed logs end cleanly at once, so the drain does not wait for them', async () => {
    const live = await openLog(base, `/api/v1/pods/${ns}/follow/log?follow=true&tailLines=0`, admin.token);
    assert.equal(live.status, 200);
    const started = Date.now();
    const finished = await drainOf(t.app).drain(10_000);
    assert.equal(finished, true);
    assert.equal(await live.ended, 'end');
    assert.ok(Date.now() - started < 5_000, `drained after ${Date.now() - started} ms`);
    const refused = await request(t.app, 'GET', `/api/v1/pods/${ns}/follow/log`, {
      token: admin.token,
      headers: { 'x-cluster-name': 'alpha' },
    });
    assert.equal(refused.status, 503);
  });
});
