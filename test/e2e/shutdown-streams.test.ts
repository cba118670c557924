// SIGTERM with every kind of long-lived stream open: `/readyz` answers 503 at once, each stream ends with its
// protocol's goodbye, and the process exits within the grace period plus 5 s — every time (a rolling update
// must never wait for the kill).
import assert from 'node:assert/strict';
import http from 'node:http';
import net from 'node:net';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { kubeRequest, sharedControlPlane, type ControlPlane } from '../harness/control-plane.js';
import { startKubelet, type Kubelet } from '../harness/kubelet.js';
import { kubeconfigFor } from '../support/clusters.js';
import { podOnNode } from '../support/kube.js';
import { startServiceProcess, type ServiceProcess } from '../support/service-process.js';
import { openTerminal, type TerminalClient } from '../support/terminal.js';
import { openWatch, type WatchClient } from './watch-client.js';

const pid = process.pid;
const GRACE_SECONDS = 10;

/** A followed log (or any streamed GET) over a real socket: resolves once the answer's head is in. */
function streamedGet(url: string, headers: Record<string, string>) {
  return new Promise<{ status: number; ended: Promise<{ body: string; at: number }> }>((resolve, reject) => {
    const req = http.get(url, { headers, agent: false }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (body += chunk));
      const ended = new Promise<{ body: string; at: number }>((done) =>
        res.on('close', () => done({ body, at: Date.now() })),
      );
      resolve({ status: res.statusCode ?? 0, ended });
    });
    req.on('error', reject);
  });
}

/**
 * A client that upgrades to a WebSocket exec session and then never reads again (a laptop gone to sleep): it never
 * answers the service's close frame, and nothing the service writes is taken off the socket.
 */
function silentTerminal(base: string, path: string, token: string) {
  const url = new URL(path, base);
  return new Promise<net.Socket>((resolve, reject) => {
    const socket = net.connect(Number(url.port), url.hostname, () => {
      socket.write(
        `GET ${url.pathname}${url.search} HTTP/1.1\r\nHost: ${url.host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n` +
          `Sec-WebSocket-Key: ${Buffer.from('0123456789abcdef').toString('base64')}\r\nSec-WebSocket-Version: 13\r\n` +
          `Sec-WebSocket-Protocol: v4.channel.k8s.io\r\nAuthorization: Bearer ${token}\r\n\r\n`,
      );
    });
    socket.once('data', (head: Buffer) => {
      if (!head.toString('latin1').startsWith('HTTP/1.1 101')) return reject(new Error(head.toString('latin1')));
      socket.pause();
      resolve(socket);
    });
    socket.once('error', reject);
  });
}

/** A followed log whose reader stops reading once its answer has started: the service's writes back up. */
function stalledLog(url: string, headers: Record<string, string>) {
  return new Promise<http.ClientRequest>((resolve, reject) => {
    const req = http.get(url, { headers, agent: false }, (res) => {
      res.pause();
      res.socket.pause();
      resolve(req);
    });
    req.on('error', () => undefined);
    req.once('error', reject);
  });
}

describe('SIGTERM with every kind of stream open', () => {
  let cp: ControlPlane;
  let kubelet: Kubelet;
  let dataDir: string;
  let echo: net.Server;
  let echoPort: number;
  const ns = `sigterm-${pid}`;
  const nodeName = `sigterm-node-${pid}`;
  const cluster = 'alpha';

  before(async () => {
    cp = await sharedControlPlane('a');
    kubelet = await startKubelet(cp, nodeName);
    await kubeRequest(cp, 'POST', '/api/v1/namespaces', { metadata: { name: ns } });
    await kubeRequest(cp, 'POST', `/api/v1/namespaces/${ns}/configmaps`, { metadata: { name: 'cm1' } });
    await podOnNode(cp, ns, 'p1', nodeName);
    await podOnNode(cp, ns, 'p2', nodeName);
    kubelet.write(ns, 'p1', 'app', 'first line');
    kubelet.write(ns, 'p2', 'app', 'first line');
    echo = net.createServer((socket) => socket.pipe(socket));
    await new Promise<void>((resolve) => echo.listen(0, '127.0.0.1', resolve));
    echoPort = (echo.address() as net.AddressInfo).port;
    dataDir = await mkdtemp(join(tmpdir(), 'cas-sigterm-'));
  });
  after(async () => {
    echo?.close();
    for (const pod of ['p1', 'p2']) {
      await kubeRequest(cp, 'DELETE', `/api/v1/namespaces/${ns}/pods/${pod}`, { gracePeriodSeconds: 0 });
    }
    await kubeRequest(cp, 'DELETE', `/api/v1/namespaces/${ns}`);
    await kubelet?.stop();
    await rm(dataDir, { recursive: true, force: true });
  });

  /** A service process with a cluster registered and an admin token. */
  async function start(run: number): Promise<{ service: ServiceProcess; token: string }> {
    const service = await startServiceProcess({
      CAS_DATA_DIR: join(dataDir, String(run)),
      DATABASE_URL: `sqlite:${join(dataDir, `cas-${run}.sqlite`)}`,
      CAS_BOOTSTRAP_USERNAME: 'admin',
      CAS_BOOTSTRAP_PASSWORD: 'admin-password-1',
      CAS_SHUTDOWN_GRACE_SECONDS: String(GRACE_SECONDS),
    });
    const login = await service.api('POST', '/api/v1/auth/login', {
      body: { username: 'admin', password: 'admin-password-1' },
    });
    assert.equal(login.status, 200, JSON.stringify(login.body));
    const token = login.body.token as string;
    const created = await service.api('POST', '/api/v1/admin/clusters', {
      token,
      body: { name: cluster, config: kubeconfigFor(cp) },
    });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    return { service, token };
  }

  /** Opens one stream of each kind; resolves to what each must show once the service drains. */
  async function openAll(service: ServiceProcess, token: string) {
    const base = service.base;
    const ws = base.replace('http', 'ws');
    const auth = { authorization: `Bearer ${token}` };
    const watches: Record<string, WatchClient> = {
      watch: await openWatch(base, `/api/v1/configmaps/${ns}?watch=true`, { token, cluster }),
      sse: await openWatch(base, `/api/v1/configmaps/${ns}?watch=true`, { token, cluster, sse: true }),
      notices: await openWatch(base, `/api/v1/configmaps/${ns}?page=1&watch=true`, { token, cluster }),
      kubeWatch: await openWatch(base, `/api/v1/clusters/${cluster}/k8s/api/v1/namespaces/${ns}/configmaps?watch=1`, {
        token,
        cluster,
      }),
    };
    for (const [what, w] of Object.entries(watches)) assert.equal(w.status, 200, `${what}: ${JSON.stringify(w.body)}`);
    const log = await streamedGet(`${base}/api/v1/pods/${ns}/p1/log?follow=true`, {
      ...auth,
      'x-cluster-name': cluster,
    });
    const kubeLog = await streamedGet(
      `${base}/api/v1/clusters/${cluster}/k8s/api/v1/namespaces/${ns}/pods/p1/log?follow=true`,
      auth,
    );
    // `follow=yes` is a follow to the apiserver (any value but false and 0): a stream however the service reads it.
    const kubeLogYes = await streamedGet(
      `${base}/api/v1/clusters/${cluster}/k8s/api/v1/namespaces/${ns}/pods/p1/log?follow=yes`,
      auth,
    );
    assert.equal(log.status, 200);
    assert.equal(kubeLog.status, 200);
    assert.equal(kubeLogYes.status, 200);
    const terminals: Record<string, TerminalClient> = {};
    const terminalUrls: Record<string, string> = {
      exec: `${ws}/api/v1/pods/${ns}/p1/exec?cluster=${cluster}&command=sh&stdin=true&stdout=true&stderr=true`,
      attach: `${ws}/api/v1/pods/${ns}/p1/attach?cluster=${cluster}&stdin=true&stdout=true&stderr=true`,
      portforward: `${ws}/api/v1/pods/${ns}/p1/portforward?cluster=${cluster}&ports=${echoPort}`,
      kubeExec: `${ws}/api/v1/clusters/${cluster}/k8s/api/v1/namespaces/${ns}/pods/p1/exec?command=sh&stdin=true&stdout=true`,
    };
    for (const [what, url] of Object.entries(terminalUrls)) {
      const opened = await openTerminal(url, {
        headers: auth,
        protocols: what === 'portforward' ? ['v4.channel.k8s.io'] : undefined,
      });
      assert.ok(opened.ok, `${what}: ${opened.ok ? '' : `${opened.status} ${opened.body}`}`);
      terminals[what] = opened.client;
    }
    terminals.exec.send(0, 'echo ready\n');
    await terminals.exec.waitFor('ready');
    // Clients that no longer take anything: they must not hold the process past its grace period.
    const silent = await silentTerminal(
      base,
      `/api/v1/pods/${ns}/p1/exec?cluster=${cluster}&command=sh&stdin=true&stdout=true`,
      token,
    );
    const stalled = await stalledLog(`${base}/api/v1/pods/${ns}/p2/log?follow=true`, {
      ...auth,
      'x-cluster-name': cluster,
    });
    // More than the sockets on both sides hold, so that the stalled reader's answer cannot end.
    const line = 'x'.repeat(64 * 1024);
    for (let i = 0; i < 512; i++) kubelet.write(ns, 'p2', 'app', line);
    return { watches, log, kubeLog, kubeLogYes, terminals, silent, stalled };
  }

  test('each stream ends with its goodbye, /readyz is 503 meanwhile, the process exits in time', async () => {
    const { service, token } = await start(0);
    const opened = await openAll(service, token);
    const sentAt = Date.now();
    service.child.kill('SIGTERM');
    const ready = await fetch(`${service.base}/readyz`).then(
      (res) => res.status,
      () => 0,
    );
    assert.ok(ready === 503 || ready === 0, `/readyz while draining: ${ready}`);

    const code = await service.exited;
    const tookMs = Date.now() - sentAt;
    opened.silent.destroy();
    opened.stalled.destroy();
    assert.equal(code, 0);
    console.log(`exited ${tookMs} ms after SIGTERM`);
    assert.ok(tookMs < (GRACE_SECONDS + 5) * 1000, `exited after ${tookMs} ms`);

    for (const [what, w] of Object.entries(opened.watches)) {
      await w.ended;
      if (what === 'kubeWatch') continue; // the cluster's own stream, ended cleanly: kubectl watches again
      const last = w.events.at(-1);
      assert.equal(
        last?.type,
        'ERROR',
        `${what}: the last event is an ERROR naming the shutdown: ${JSON.stringify(last)}`,
      );
      assert.match(JSON.stringify(last?.object), /shutting down|stopping/, what);
    }
    // Every stream whose client still reads ends at once, not when the grace period runs out.
    for (const [what, log] of Object.entries({
      log: opened.log,
      kubeLog: opened.kubeLog,
      kubeLogYes: opened.kubeLogYes,
    })) {
      const endedAfter = (await log.ended).at - sentAt;
      assert.ok(endedAfter < 3000, `${what} ended ${endedAfter} ms after SIGTERM`);
    }
    for (const [what, w] of Object.entries(opened.watches)) {
      assert.ok(w.endedAt! - sentAt < 3000, `${what} ended ${w.endedAt! - sentAt} ms after SIGTERM`);
    }
    for (const [what, terminal] of Object.entries(opened.terminals)) {
      const closed = await terminal.closed;
      if (what !== 'portforward') {
        assert.match(terminal.text(3), /shutting down|stopping/, `${what}: the error channel says why`);
      }
      assert.ok(closed.code === 1001 || closed.code === 1000 || closed.code === 1011, `${what}: closed ${closed.code}`);
    }
  });

  test('20 times in a row, with streams open and requests under way, the process exits within the grace + 5 s', async () => {
    const times: number[] = [];
    for (let run = 1; run <= 20; run++) {
      const { service, token } = await start(run);
      const opened = await openAll(service, token);
      // Requests in flight as the signal arrives: a few list calls in a loop.
      let loading = true;
      const load = (async () => {
        while (loading) {
          await service.api('GET', `/api/v1/configmaps/${ns}?page=1`, { token, cluster }).catch(() => undefined);
        }
      })();
      const sentAt = Date.now();
      service.child.kill('SIGTERM');
      const code = await service.exited;
      loading = false;
      await load;
      times.push(Date.now() - sentAt);
      assert.equal(code, 0, `run ${run}`);
      assert.ok(times.at(-1)! < (GRACE_SECONDS + 5) * 1000, `run ${run} exited after ${times.at(-1)} ms`);
      for (const terminal of Object.values(opened.terminals)) terminal.ws.terminate();
      opened.silent.destroy();
      opened.stalled.destroy();
    }
    console.log(`exit times after SIGTERM (ms): ${times.join(', ')}`);
  });
});
