/**
 * Query booleans on the Kubernetes path, read as the apiserver reads them (only `0` and `false`, in any
 * case, are false): `watch=f` is a watch a get+list role may not open; `watch=yes`, `watch=F` and
 * `follow=yes` are streams the stream owner admits, counts against their limits and ends once the user
 * is disabled. The real apiserver and the harness's kubelet are on the other side.
 */
import assert from 'node:assert/strict';
import http from 'node:http';
import { after, before, describe, test } from 'node:test';
import { kubeRequest, waitFor } from '../harness/control-plane.js';
import { startKubelet, type Kubelet } from '../harness/kubelet.js';
import { type ClusterApp, startClusterApp } from '../support/cluster-app.js';
import { createUser, login } from '../support/factories.js';
import { request } from '../support/http.js';
import { podOnNode } from '../support/kube.js';

const pid = process.pid;

interface Opened {
  status: number;
  /** The Status of a refusal. */
  body?: any;
  /** What has arrived so far. */
  text(): string;
  /** Resolves once the answer has ended, however. */
  ended: Promise<void>;
  close(): void;
}

/** A GET over a real socket with a bearer credential; resolves once the head arrived (with the body of a refusal). */
function open(base: string, path: string, token: string): Promise<Opened> {
  return new Promise((resolve, reject) => {
    const req = http.get(`${base}${path}`, { headers: { authorization: `Bearer ${token}` }, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      const ended = new Promise<void>((done) => res.on('close', done));
      res.on('data', (c: Buffer) => chunks.push(c));
      const opened: Opened = {
        status: res.statusCode ?? 0,
        text: () => Buffer.concat(chunks).toString('utf8'),
        ended,
        close: () => req.destroy(),
      };
      if (opened.status === 200) return resolve(opened);
      res.on('end', () => resolve({ ...opened, body: JSON.parse(opened.text()) }));
    });
    req.on('error', reject);
  });
}

describe('query booleans on the Kubernetes path, as the apiserver reads them', () => {
  const ns = `kube-bool-${pid}`;
  const nodeName = `kube-bool-node-${pid}`;
  let c: ClusterApp;
  let kubelet: Kubelet;
  const opened: Opened[] = [];
  const k8s = '/api/v1/clusters/alpha/k8s';

  /** A user with one role of these rules on the namespace, signed in: its id and session token. */
  async function userWith(name: string, verbs: string[]): Promise<{ id: number; token: string }> {
    const role = await request(c.t.app, 'POST', '/api/v1/admin/roles', {
      token: c.admin,
      body: { name, rules: [{ clusters: ['alpha'], namespaces: [ns], resources: ['configmaps', 'pods'], verbs }] },
    });
    assert.equal(role.status, 201, role.text);
    const user = await createUser(c.t, { role: name as never, username: `${name}-${pid}` });
    return { id: user.id, token: await login(c.t, user) };
  }

  async function disable(id: number): Promise<void> {
    const res = await request(c.t.app, 'POST', `/api/v1/admin/users/${id}/enable`, {
      token: c.admin,
      body: { enabled: false },
    });
    assert.equal(res.status, 200, res.text);
  }

  /** Resolves true once `stream` has ended, false if it is still open after `ms`. */
  const endsWithin = (stream: Opened, ms: number) =>
    Promise.race([stream.ended.then(() => true), new Promise<boolean>((r) => setTimeout(() => r(false), ms))]);

  before(async () => {
    c = await startClusterApp({
      cluster: 'alpha',
      namespace: ns,
      listen: true,
      env: {
        CAS_WATCH_MAX_STREAMS_PER_CALLER: '2',
        CAS_LOG_MAX_STREAMS_PER_USER: '2',
        CAS_WATCH_REAUTH_SECONDS: '1',
        CAS_MAX_CONNECTIONS_PER_ADDRESS: '0',
      },
    });
    kubelet = await startKubelet(c.cp, nodeName);
    await podOnNode(c.cp, ns, 'p1', nodeName);
    kubelet.write(ns, 'p1', 'app', 'first line');
  });
  after(async () => {
    for (const o of opened) o.close();
    await kubeRequest(c.cp, 'DELETE', `/api/v1/namespaces/${ns}/pods/p1`, { gracePeriodSeconds: 0 });
    await kubeRequest(c.cp, 'DELETE', `/api/v1/namespaces/${ns}`);
    await kubelet?.stop();
    await c?.t.close();
  });

  test('watch=f, F, empty or yes is a watch: a get+list role gets 403; watch=false and watch=0 are lists', async () => {
    const { token } = await userWith('bool-lister', ['get', 'list']);
    for (const value of ['f', 'F', '', 'yes', 't']) {
      const res = await open(c.base, `${k8s}/api/v1/namespaces/${ns}/configmaps?watch=${value}`, token);
      opened.push(res);
      assert.equal(res.status, 403, `watch=${value}: ${res.text()}`);
      assert.equal(res.body.reason, 'Forbidden');
      assert.match(res.body.message, /watch/, `watch=${value}: ${res.body.message}`);
    }
    for (const value of ['false', 'FALSE', '0']) {
      const res = await open(c.base, `${k8s}/api/v1/namespaces/${ns}/configmaps?watch=${value}`, token);
      await res.ended;
      assert.equal(res.status, 200, `watch=${value}`);
      assert.equal(JSON.parse(res.text()).kind, 'ConfigMapList');
    }
  });

  test('watch=yes and watch=F count against the watch limit (429 beyond) and end once the user is disabled', async () => {
    const user = await userWith('bool-watcher', ['get', 'list', 'watch']);
    const path = (value: string) => `${k8s}/api/v1/namespaces/${ns}/configmaps?watch=${value}`;
    const watches = [await open(c.base, path('yes'), user.token), await open(c.base, path('F'), user.token)];
    opened.push(...watches);
    assert.deepEqual(
      watches.map((w) => w.status),
      [200, 200],
    );
    const third = await open(c.base, path('f'), user.token);
    opened.push(third);
    assert.equal(third.status, 429, third.text());
    assert.equal(third.body.kind, 'Status');
    assert.match(third.body.message, /too many watch streams of this user/);

    // Both are watches the apiserver runs: a change arrives on each.
    await kubeRequest(c.cp, 'POST', `/api/v1/namespaces/${ns}/configmaps`, { metadata: { name: `cm-${pid}` } });
    await waitFor('the ADDED event on both watches', async () =>
      watches.every((w) => w.text().includes(`"name":"cm-${pid}"`)),
    );

    await disable(user.id);
    const ended = await Promise.all(watches.map((w) => endsWithin(w, 8_000)));
    assert.deepEqual(ended, [true, true], 'both watches ended once the user was disabled');
  });

  test('follow=yes is a followed log: it counts against the log limit and ends once the user is disabled', async () => {
    const user = await userWith('bool-follower', ['get', 'log']);
    const key = `${ns}/p1/app`;
    const path = (value: string) => `${k8s}/api/v1/namespaces/${ns}/pods/p1/log?follow=${value}`;
    const logs = [await open(c.base, path('yes'), user.token), await open(c.base, path('F'), user.token)];
    opened.push(...logs);
    assert.deepEqual(
      logs.map((l) => l.status),
      [200, 200],
    );
    await waitFor('both follows at the kubelet', async () => kubelet.openRequests(key) === 2);
    const third = await open(c.base, path('on'), user.token);
    opened.push(third);
    assert.equal(third.status, 429, third.text());
    assert.match(third.body.message, /too many log streams of this user/);

    kubelet.write(ns, 'p1', 'app', 'second line');
    await waitFor('the new line on both follows', async () => logs.every((l) => l.text().includes('second line')));

    await disable(user.id);
    const ended = await Promise.all(logs.map((l) => endsWithin(l, 8_000)));
    assert.deepEqual(ended, [true, true], 'both follows ended once the user was disabled');
    await waitFor('the follows to end at the kubelet', async () => kubelet.openRequests(key) === 0, 5_000);
  });
});
