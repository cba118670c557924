// A node for a test control plane: a real `Node` object whose kubelet endpoint is a minimal
// HTTPS server on loopback, so the real apiserver has somewhere to proxy pod logs to, and exec,
// attach and port-forward upgrades (kubelet-streams.ts: WebSocket channel protocols, harmless
// commands only, port-forward to loopback servers the test starts).
//
//   const node = await startKubelet(cp, 'node-a');        // registers Node node-a
//   create a Pod with spec.nodeName: 'node-a' through the apiserver
//   node.write('ns', 'pod', 'app', 'line one');          // the container "logs" a line
//   GET /api/v1/namespaces/ns/pods/pod/log?follow=true   → the apiserver asks this server
//   await node.stop();                                    // closes it and deletes the Node
//
// Why not kubemark's hollow node: its fake container runtime keeps no log files, so the kubelet's
// /containerLogs has nothing to read; and building it from the source tree costs minutes per
// machine. This server implements only GET /containerLogs/<ns>/<pod>/<container> with the
// kubelet's query semantics (tailLines, follow, timestamps, sinceSeconds, sinceTime, limitBytes,
// previous) over the lines a test writes. Everything in front of it — authentication,
// authorization, pod and container validation, the proxying — is the real apiserver's.
//
// TLS: the serving certificate is signed by the control plane's CA (the apiserver verifies it when
// started with --kubelet-certificate-authority, as the harness does now). When the control plane
// has an apiserver→kubelet client certificate (pki/apiserver-kubelet-client.crt), the server
// requires it; control planes started by an older harness present none and are accepted as they are.
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import type { IncomingMessage, ServerResponse } from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TLSSocket } from 'node:tls';
import { KUBELET_CLIENT_CN, makeKubeletServingCert } from './certs.js';
import { kubeRequest, type ControlPlane } from './control-plane.js';
import { runPods, type RunPodsOptions, type PodRunner } from './kubelet-pods.js';
import { serveStreams } from './kubelet-streams.js';

export interface Kubelet {
  nodeName: string;
  port: number;
  /** True when the server demands the apiserver's client certificate (the control plane has one). */
  requiresClientCert: boolean;
  /** Appends a line (without newline) to a container's log, sent at once to every follower. */
  write(namespace: string, pod: string, container: string, line: string, time?: Date): void;
  /** The container "terminates": followers get the end of their stream. */
  terminate(namespace: string, pod: string, container: string): void;
  /** Log requests in flight now (followers included), per container key `ns/pod/container`. */
  openRequests(key?: string): number;
  /** Bytes written to a container's open log responses that the reader (the apiserver) has not taken yet. */
  queuedBytes(key: string): number;
  /** Every request path (with query) received, in order. */
  readonly requests: string[];
  /** Exec, attach and port-forward sockets open now (each closes when the apiserver's side of it does). */
  openStreams(): number;
  /** WebSocket pings received on those sockets: a client's keep-alive pings, which the apiserver passes through. */
  streamPings(): number;
  /** The pod lifecycle (kubelet-pods.ts), when started with `runPods`. */
  pods?: PodRunner;
  stop(): Promise<void>;
}

interface Line {
  time: Date;
  text: string;
}

interface ContainerLog {
  lines: Line[];
  terminated: boolean;
  followers: Set<(line: Line | null) => void>;
}

const LOG_PATH = /^\/containerLogs\/([^/]+)\/([^/]+)\/([^/]+)$/;

/** RFC 3339 with nanoseconds, as the kubelet prefixes lines with `timestamps=true`. */
function rfc3339Nano(time: Date): string {
  return time.toISOString().replace(/\.(\d{3})Z$/, '.$1000000Z');
}

function intParam(params: URLSearchParams, name: string): number | undefined {
  const value = params.get(name);
  if (value === null) return undefined;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0) throw new Error(`${name} must be a non-negative integer`);
  return n;
}

export async function startKubelet(
  cp: ControlPlane,
  nodeName: string,
  options: { runPods?: RunPodsOptions } = {},
): Promise<Kubelet> {
  const pki = join(cp.dir, 'pki');
  const work = await mkdtemp(join(tmpdir(), `cas-kubelet-${nodeName}-`));
  const { cert, key } = await makeKubeletServingCert(pki, work, nodeName);
  const requiresClientCert = existsSync(join(pki, 'apiserver-kubelet-client.crt'));
  const ca = await readFile(join(pki, 'ca.crt'), 'utf8');

  const logs = new Map<string, ContainerLog>();
  const requests: string[] = [];
  const open = new Map<string, number>();
  const responses = new Map<string, Set<ServerResponse>>();
  const logOf = (key: string): ContainerLog => {
    let log = logs.get(key);
    if (!log) logs.set(key, (log = { lines: [], terminated: false, followers: new Set() }));
    return log;
  };

  const authorized = (req: IncomingMessage) => {
    if (!requiresClientCert) return true;
    const socket = req.socket as TLSSocket;
    return socket.authorized && socket.getPeerCertificate()?.subject?.CN === KUBELET_CLIENT_CN;
  };
  const handle = (req: IncomingMessage, res: ServerResponse) => {
    requests.push(req.url ?? '');
    const fail = (status: number, message: string) => {
      res.writeHead(status, { 'content-type': 'text/plain; charset=utf-8' });
      res.end(message);
    };
    if (!authorized(req)) return fail(401, 'Unauthorized');
    const url = new URL(req.url ?? '/', 'https://kubelet');
    const match = LOG_PATH.exec(url.pathname);
    if (req.method !== 'GET' || !match) return fail(404, '404 page not found');
    const [namespace, pod, container] = match.slice(1).map(decodeURIComponent) as [string, string, string];
    const key = `${namespace}/${pod}/${container}`;
    // The apiserver has checked that the pod and container exist: one that logged nothing yet has an empty log.
    const log = logOf(key);
    const params = url.searchParams;
    let tailLines: number | undefined;
    let sinceSeconds: number | undefined;
    let limitBytes: number | undefined;
    try {
      tailLines = intParam(params, 'tailLines');
      sinceSeconds = intParam(params, 'sinceSeconds');
      limitBytes = intParam(params, 'limitBytes');
    } catch (error) {
      return fail(400, (error as Error).message);
    }
    if (params.get('previous') === 'true') {
      return fail(400, `previous terminated container "${container}" in pod "${pod}" not found`);
    }
    const follow = params.get('follow') === 'true';
    const timestamps = params.get('timestamps') === 'true';
    const sinceTime = params.get('sinceTime');
    const since =
      sinceSeconds !== undefined
        ? Date.now() - sinceSeconds * 1000
        : sinceTime !== null
          ? Date.parse(sinceTime)
          : -Infinity;

    let lines = log.lines.filter((l) => l.time.getTime() >= since);
    if (tailLines !== undefined) lines = tailLines === 0 ? [] : lines.slice(-tailLines);

    open.set(key, (open.get(key) ?? 0) + 1);
    let counted = true;
    const uncount = () => {
      if (!counted) return;
      counted = false;
      open.set(key, (open.get(key) ?? 1) - 1);
    };
    res.on('close', uncount);
    if (!responses.has(key)) responses.set(key, new Set());
    responses.get(key)!.add(res);
    res.on('close', () => responses.get(key)?.delete(res));
    res.writeHead(200, { 'content-type': 'text/plain' });
    res.flushHeaders(); // as the kubelet does: a followed, still empty log has started
    let budget = limitBytes ?? Infinity;
    const send = (line: Line): boolean => {
      let bytes = Buffer.from((timestamps ? `${rfc3339Nano(line.time)} ` : '') + line.text + '\n', 'utf8');
      if (bytes.length > budget) bytes = bytes.subarray(0, budget);
      budget -= bytes.length;
      res.write(bytes);
      return budget > 0;
    };
    for (const line of lines) {
      if (!send(line)) return res.end();
    }
    if (!follow || log.terminated) return res.end();
    const follower = (line: Line | null) => {
      if (line === null || !send(line)) {
        log.followers.delete(follower);
        res.end();
      }
    };
    log.followers.add(follower);
    res.on('close', () => log.followers.delete(follower));
  };

  const server = https.createServer(
    { cert, key, ca, requestCert: requiresClientCert, rejectUnauthorized: false },
    handle,
  );
  const streams = serveStreams(server, { workDir: work, requests, authorized });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const port = (server.address() as AddressInfo).port;

  const created = await kubeRequest(cp, 'POST', '/api/v1/nodes', {
    apiVersion: 'v1',
    kind: 'Node',
    metadata: { name: nodeName, labels: { 'kubernetes.io/hostname': nodeName, 'cas-test/fake-kubelet': 'true' } },
  });
  if (created.status !== 201) {
    server.close();
    throw new Error(`registering Node ${nodeName}: HTTP ${created.status} ${JSON.stringify(created.body)}`);
  }
  const status = await kubeRequest(
    cp,
    'PATCH',
    `/api/v1/nodes/${nodeName}/status`,
    {
      status: {
        // InternalIP only: a Hostname address would make the apiserver resolve the node name
        addresses: [{ type: 'InternalIP', address: '127.0.0.1' }],
        daemonEndpoints: { kubeletEndpoint: { Port: port } },
        conditions: [
          {
            type: 'Ready',
            status: 'True',
            reason: 'KubeletReady',
            message: 'test kubelet (logs only)',
            lastHeartbeatTime: new Date().toISOString(),
            lastTransitionTime: new Date().toISOString(),
          },
        ],
      },
    },
    { contentType: 'application/merge-patch+json' },
  );
  if (status.status !== 200) {
    server.close();
    throw new Error(`setting the status of Node ${nodeName}: HTTP ${status.status} ${JSON.stringify(status.body)}`);
  }

  const pods = options.runPods ? runPods(cp, nodeName, options.runPods) : undefined;
  return {
    nodeName,
    port,
    pods,
    requiresClientCert,
    requests,
    openStreams: streams.open,
    streamPings: streams.pings,
    write(namespace, pod, container, text, time = new Date()) {
      const log = logOf(`${namespace}/${pod}/${container}`);
      const line = { time, text };
      log.lines.push(line);
      for (const follower of [...log.followers]) follower(line);
    },
    terminate(namespace, pod, container) {
      const log = logOf(`${namespace}/${pod}/${container}`);
      log.terminated = true;
      for (const follower of [...log.followers]) follower(null);
    },
    queuedBytes(key) {
      return [...(responses.get(key) ?? [])].reduce((sum, res) => sum + res.writableLength, 0);
    },
    openRequests(key) {
      if (key !== undefined) return open.get(key) ?? 0;
      return [...open.values()].reduce((a, b) => a + b, 0);
    },
    async stop() {
      await pods?.stop();
      for (const log of logs.values()) for (const follower of [...log.followers]) follower(null);
      streams.close();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await kubeRequest(cp, 'DELETE', `/api/v1/nodes/${nodeName}`).catch(() => undefined);
      await rm(work, { recursive: true, force: true });
    },
  };
}
