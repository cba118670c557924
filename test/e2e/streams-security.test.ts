// Database: runs on PostgreSQL too: streams re-check credentials stored in the database.
/**
 * Security round 3, the stream findings: HEAD on a streaming route opens nothing; stream limits count
 * per user (API keys included), concurrently and in sequence; a first page larger than a client's
 * buffer reaches a slow client whole; the shared watches' memory stays bounded whatever the selectors.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { kubeRequest, sharedControlPlane, waitFor, type ControlPlane } from '../harness/control-plane.js';
import { startKubelet, type Kubelet } from '../harness/kubelet.js';
import { podOnNode } from '../support/kube.js';
import { createPostgresDatabase, onPostgres, startTestApp, type TestApp } from '../support/app.js';
import { kubeconfigFor, registerCluster } from '../support/clusters.js';
import { signedIn } from '../support/factories.js';
import { request } from '../support/http.js';
import { startServiceProcess, type ServiceProcess } from '../support/service-process.js';
import { openWatch, type WatchClient } from './watch-client.js';

const MIB = 1024 * 1024;
const pid = process.pid;

/** A GET over a real socket; resolves with the status once the head arrived. */
function open(base: string, path: string, headers: Record<string, string>) {
  return new Promise<{ status: number; res: http.IncomingMessage; close(): void }>((resolve, reject) => {
    const req = http.get(`${base}${path}`, { headers, agent: false }, (res) => {
      resolve({ status: res.statusCode ?? 0, res, close: () => req.destroy() });
    });
    req.on('error', reject);
  });
}

describe('streams under attack: HEAD, per-user limits, a first page larger than the buffer', () => {
  let cp: ControlPlane;
  let kubelet: Kubelet;
  let t: TestApp;
  let base: string;
  let admin: { id: number; token: string; username: string };
  const ns = `streamsec-${pid}`;
  const nodeName = `streamsec-node-${pid}`;
  const opened: Array<{ close(): void }> = [];

  before(async () => {
    cp = await sharedControlPlane('a');
    kubelet = await startKubelet(cp, nodeName);
    await kubeRequest(cp, 'POST', '/api/v1/namespaces', { metadata: { name: ns } });
    await podOnNode(cp, ns, 'p1', nodeName);
    kubelet.write(ns, 'p1', 'app', 'a line');
    t = await startTestApp({
      env: {
        CAS_WATCH_MAX_STREAMS_PER_CALLER: '4',
        CAS_LOG_MAX_STREAMS_PER_USER: '3',
        CAS_MAX_CONNECTIONS_PER_ADDRESS: '0',
      },
    });
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    base = `http://127.0.0.1:${(t.app.getHttpServer().address() as AddressInfo).port}`;
    admin = await signedIn(t, 'admin');
    await registerCluster(t, admin.token, 'alpha', kubeconfigFor(cp));
  });
  after(async () => {
    for (const o of opened) o.close();
    await kubeRequest(cp, 'DELETE', `/api/v1/namespaces/${ns}/pods/p1`, { gracePeriodSeconds: 0 });
    await kubeRequest(cp, 'DELETE', `/api/v1/namespaces/${ns}`);
    await kubelet?.stop();
    await t?.close();
  });

  test('HEAD on a followed log ×25 is 405 and opens nothing upstream; a GET then streams (200)', async () => {
    const key = `${ns}/p1/app`;
    for (let i = 0; i < 25; i++) {
      const head = await request(t.app, 'HEAD', `/api/v1/pods/${ns}/p1/log`, {
        token: admin.token,
        headers: { 'x-cluster-name': 'alpha' },
        query: { follow: 'true' },
      });
      assert.equal(head.status, 405, `HEAD ${i}: ${head.status}`);
    }
    const watchHead = await request(t.app, 'HEAD', `/api/v1/configmaps/${ns}`, {
      token: admin.token,
      headers: { 'x-cluster-name': 'alpha' },
      query: { watch: 'true' },
    });
    assert.equal(watchHead.status, 405);
    assert.equal(kubelet.openRequests(key), 0, 'no log request reached the kubelet');
    const get = await open(base, `/api/v1/pods/${ns}/p1/log?follow=true`, {
      authorization: `Bearer ${admin.token}`,
      'x-cluster-name': 'alpha',
    });
    opened.push(get);
    assert.equal(get.status, 200);
    await waitFor('the follow to reach the kubelet', async () => kubelet.openRequests(key) === 1);
    get.close();
    await waitFor('the follow to end at the kubelet', async () => kubelet.openRequests(key) === 0);
  });

  test('a user with 3 keys opens at most its limit of watches and logs, concurrently and in sequence', async () => {
    const user = await signedIn(t, 'admin', { username: `limits-${pid}` });
    const keys: string[] = [];
    for (let i = 0; i < 3; i++) {
      const created = await request(t.app, 'POST', '/api/v1/auth/apikeys', {
        token: user.token,
        body: { name: `limit-key-${pid}-${i}`, roles: ['admin'] },
      });
      assert.equal(created.status, 201, created.text);
      keys.push(created.body.key as string);
    }
    const credentials = [user.token, ...keys];
    const watchPath = `/api/v1/configmaps/${ns}?watch=true`;

    // Concurrently: 16 watches over 4 credentials of one user, limit 4.
    const watches = await Promise.all(
      Array.from({ length: 16 }, (_, i) =>
        openWatch(base, watchPath, { token: credentials[i % 4]!, cluster: 'alpha' }),
      ),
    );
    opened.push(...watches);
    assert.equal(watches.filter((w) => w.status === 200).length, 4, watches.map((w) => w.status).join(','));
    assert.ok(watches.filter((w) => w.status !== 200).every((w) => w.status === 429));
    for (const w of watches) w.close();
    await waitFor('the slots to be free', async () => {
      const probe = await openWatch(base, watchPath, { token: keys[2]!, cluster: 'alpha' });
      probe.close();
      return probe.status === 200;
    });
    await new Promise((r) => setTimeout(r, 200));

    // In sequence: two with the session, two with a key; a second key is then refused.
    const sequence: WatchClient[] = [];
    for (const token of [user.token, user.token, keys[0]!, keys[1]!]) {
      const w = await openWatch(base, watchPath, { token, cluster: 'alpha' });
      sequence.push(w);
      assert.equal(w.status, 200);
    }
    opened.push(...sequence);
    const refused = await openWatch(base, watchPath, { token: keys[2]!, cluster: 'alpha' });
    refused.close();
    assert.equal(refused.status, 429);
    assert.match(String(refused.body?.message), /too many watch streams of this user, API keys included \(at most 4\)/);
    for (const w of sequence) w.close();

    // Logs: 9 concurrent follows over 3 keys, limit 3.
    const logs = await Promise.all(
      Array.from({ length: 9 }, (_, i) =>
        open(base, `/api/v1/pods/${ns}/p1/log?follow=true`, {
          authorization: `Bearer ${keys[i % 3]}`,
          'x-cluster-name': 'alpha',
        }),
      ),
    );
    opened.push(...logs);
    assert.equal(logs.filter((l) => l.status === 200).length, 3, logs.map((l) => l.status).join(','));
    assert.ok(logs.filter((l) => l.status !== 200).every((l) => l.status === 429));
    for (const l of logs) l.close();
  });

  test('a 10 MiB first page reaches a client that reads it at 1 MiB/s, and the stream stays open', async () => {
    const big = `${ns}-big`;
    await kubeRequest(cp, 'POST', '/api/v1/namespaces', { metadata: { name: big } });
    try {
      const value = 'x'.repeat(105 * 1024);
      for (let i = 0; i < 100; i += 10) {
        await Promise.all(
          Array.from({ length: 10 }, (_, j) =>
            kubeRequest(cp, 'POST', `/api/v1/namespaces/${big}/configmaps`, {
              metadata: { name: `big-${i + j}` },
              data: { v: value },
            }),
          ),
        );
      }
      const watch = await open(base, `/api/v1/configmaps/${big}?watch=true`, {
        authorization: `Bearer ${admin.token}`,
        'x-cluster-name': 'alpha',
      });
      opened.push(watch);
      assert.equal(watch.status, 200);
      // Read at 1 MiB/s: pause whenever more has come than a second's allowance.
      const started = Date.now();
      let bytes = 0;
      let text = '';
      let lines = 0;
      watch.res.on('data', (chunk: Buffer) => {
        bytes += chunk.length;
        text += chunk.toString('utf8');
        let at: number;
        while ((at = text.indexOf('\n')) >= 0) {
          const line = text.slice(0, at);
          text = text.slice(at + 1);
          if (JSON.parse(line).type === 'ADDED') lines++;
        }
        const ahead = bytes / MIB - (Date.now() - started) / 1000;
        if (ahead > 0) {
          watch.res.pause();
          setTimeout(() => watch.res.resume(), ahead * 1000);
        }
      });
      let ended = false;
      watch.res.on('close', () => (ended = true));
      await waitFor('the 100 objects of the first page', async () => lines >= 100, 60_000, 200).catch((error) => {
        throw new Error(`${(error as Error).message}: ${lines} objects, ${bytes} bytes, ended: ${ended}`);
      });
      assert.ok(bytes >= 10 * MIB, `${bytes} bytes`);
      assert.ok(Date.now() - started >= 8_000, 'the client set the pace');
      assert.equal(ended, false, 'not cut off as a slow client');
      await kubeRequest(cp, 'POST', `/api/v1/namespaces/${big}/configmaps`, { metadata: { name: 'after' } });
      await waitFor('a change after the first page', async () => lines >= 101, 15_000);
      assert.equal(ended, false);
      watch.close();
    } finally {
      await kubeRequest(cp, 'DELETE', `/api/v1/namespaces/${big}`);
    }
  });
});

/** Resident memory of a process, from the kernel. */
function rssBytes(processId: number): number {
  const line = readFileSync(`/proc/${processId}/status`, 'utf8')
    .split('\n')
    .find((l) => l.startsWith('VmRSS:'));
  return Number(/(\d+)/.exec(line ?? '')?.[1] ?? 0) * 1024;
}

describe('16 watches with distinct selectors on one collection, 5 MiB of writes: memory stays bounded', () => {
  let cp: ControlPlane;
  let service: ServiceProcess;
  let dataDir: string;
  let drop: (() => Promise<void>) | undefined;
  let base: string;
  let token: string;
  const ns = `watchsel-${pid}`;
  const clients: WatchClient[] = [];

  before(async () => {
    cp = await sharedControlPlane('a');
    await kubeRequest(cp, 'POST', '/api/v1/namespaces', { metadata: { name: ns } });
    dataDir = await mkdtemp(join(tmpdir(), 'cas-watchsel-'));
    let databaseUrl = `sqlite:${join(dataDir, 'cas.sqlite')}`;
    if (onPostgres) ({ url: databaseUrl, drop } = await createPostgresDatabase());
    // As package.json's start runs it.
    service = await startServiceProcess(
      {
        GLIBC_TUNABLES: 'glibc.malloc.hugetlb=1',
        CAS_DATA_DIR: dataDir,
        DATABASE_URL: databaseUrl,
        CAS_BOOTSTRAP_USERNAME: 'admin',
        CAS_BOOTSTRAP_PASSWORD: 'admin-password-1',
      },
      undefined,
      { nodeArgs: ['--max-semi-space-size=4'] },
    );
    base = service.base;
    const login = await service.api('POST', '/api/v1/auth/login', {
      body: { username: 'admin', password: 'admin-password-1' },
    });
    token = login.body.token as string;
    const registered = await service.api('POST', '/api/v1/admin/clusters', {
      token,
      body: { name: 'alpha', config: kubeconfigFor(cp) },
    });
    assert.equal(registered.status, 201);
  });
  after(async () => {
    for (const c of clients) c.close();
    if (service?.child.exitCode === null) service.child.kill('SIGKILL');
    await kubeRequest(cp, 'DELETE', `/api/v1/namespaces/${ns}`);
    await drop?.();
    await rm(dataDir, { recursive: true, force: true });
  });

  test('RSS grows by at most 32 MiB', async () => {
    const rv = (await kubeRequest(cp, 'GET', `/api/v1/namespaces/${ns}/configmaps`)).body.metadata.resourceVersion;
    // Warm the code paths, then measure.
    const warm = await openWatch(base, `/api/v1/configmaps/${ns}?watch=true&resourceVersion=${rv}`, {
      token,
      cluster: 'alpha',
    });
    warm.close();
    await new Promise((r) => setTimeout(r, 1000));
    const baseline = rssBytes(service.child.pid!);
    // Every selector matches every object written below: each of the 16 shared watches gets all 5 MiB.
    for (let i = 0; i < 16; i++) {
      const selector = encodeURIComponent(`case=sel,other!=n${i}`);
      const c = await openWatch(
        base,
        `/api/v1/configmaps/${ns}?watch=true&resourceVersion=${rv}&labelSelector=${selector}`,
        {
          token,
          cluster: 'alpha',
        },
      );
      assert.equal(c.status, 200);
      clients.push(c);
    }
    const value = 'y'.repeat(64 * 1024);
    for (let i = 0; i < 80; i += 10) {
      await Promise.all(
        Array.from({ length: 10 }, (_, j) =>
          kubeRequest(cp, 'POST', `/api/v1/namespaces/${ns}/configmaps`, {
            metadata: { name: `sel-${i + j}`, labels: { case: 'sel' } },
            data: { v: value },
          }),
        ),
      );
    }
    await Promise.all(clients.map((c) => c.until((e) => e.length >= 80, 60_000, 'the 80 events')));
    await new Promise((r) => setTimeout(r, 2000));
    const loaded = rssBytes(service.child.pid!);
    const added = loaded - baseline;
    console.log(
      `# RSS: ${(baseline / MIB).toFixed(1)} MiB before, ${(loaded / MIB).toFixed(1)} MiB after 16 selector watches ` +
        `and 5 MiB of writes: +${(added / MIB).toFixed(1)} MiB`,
    );
    assert.ok(added <= 32 * MIB, `+${(added / MIB).toFixed(1)} MiB`);
  });
});
