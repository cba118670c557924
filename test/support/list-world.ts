import assert from 'node:assert/strict';
import { open, stat } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  kubeRequest,
  sharedControlPlane,
  waitFor,
  type AuditEvent,
  type ControlPlane,
} from '../harness/control-plane.js';
import { startTestApp, type TestApp } from './app.js';
import { kubeconfigFor } from './clusters.js';
import { signedIn } from './factories.js';
import { request } from './http.js';
import { serviceAccountToken } from './kube.js';

const pid = process.pid;

/**
 * One test's world: its namespaces, an app with `env`, a signed-in admin, and the shared control plane
 * registered as cluster `c`, reached as a ServiceAccount of this test only, so that the cluster's
 * audit log tells this test's list-cache requests from everyone else's.
 */
export interface World {
  /** `lists-bounds=<tag>-<pid>`: the label of the test's ConfigMaps, so that `_all` pages ignore everyone else's. */
  label: string;
  cp: ControlPlane;
  t: TestApp;
  admin: string;
  clusterId: number;
  namespaces: string[];
  username: string;
  /** Where the audit log ended when the world was made: only what follows is read. */
  auditStart: number;
}

export async function startWorld(options: {
  tag: string;
  namespaces: number;
  env?: Record<string, string>;
  impersonate?: boolean;
}): Promise<World> {
  const cp = await sharedControlPlane('a');
  const auditStart = (await stat(cp.auditLogPath)).size;
  const namespaces = Array.from({ length: options.namespaces }, (_, i) => `lb-${options.tag}-${i}-${pid}`);
  for (const name of namespaces) {
    const made = await kubeRequest(cp, 'POST', '/api/v1/namespaces', { metadata: { name } });
    assert.equal(made.status, 201, JSON.stringify(made.body));
  }
  const sa = await serviceAccountToken(cp, namespaces[0], 'cas');
  const t = await startTestApp({ env: options.env });
  const admin = (await signedIn(t, 'admin')).token;
  const res = await request(t.app, 'POST', '/api/v1/admin/clusters', {
    token: admin,
    body: { name: 'c', config: kubeconfigFor(cp, { token: sa.token }), impersonate: options.impersonate ?? false },
  });
  assert.equal(res.status, 201, res.text);
  const label = `lists-bounds=${options.tag}-${pid}`;
  return { label, cp, t, admin, clusterId: res.body.id, namespaces, username: sa.username, auditStart };
}

export async function stopWorld(w: World | undefined): Promise<void> {
  if (!w) return;
  await w.t.close();
  await kubeRequest(w.cp, 'DELETE', `/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/${w.namespaces[0]}-cas`);
  for (const ns of w.namespaces) await kubeRequest(w.cp, 'DELETE', `/api/v1/namespaces/${ns}`);
}

/** The audit events the cluster wrote since the world was made. */
export async function auditOf(w: World): Promise<AuditEvent[]> {
  const file = await open(w.cp.auditLogPath, 'r');
  try {
    const { size } = await file.stat();
    const buffer = Buffer.alloc(size - w.auditStart);
    await file.read(buffer, 0, buffer.length, w.auditStart);
    const events: AuditEvent[] = [];
    for (const line of buffer.toString('utf8').split('\n')) {
      if (!line.trim()) continue;
      try {
        const event = JSON.parse(line) as AuditEvent;
        if (event.user?.username === w.username) events.push(event);
      } catch {
        /* a line being written right now */
      }
    }
    return events;
  } finally {
    await file.close();
  }
}

/**
 * What the cluster saw of the list caches of `resource` (its plural): how many of their watches ended
 * (the apiserver writes a watch's events when it ends) and how many full lists (pages of 250; the
 * freshness probes ask for 1) were made.
 */
export async function upstream(w: World, resource: string): Promise<{ ended: number; lists: number }> {
  const events = (await auditOf(w)).filter((e) => e.objectRef?.resource === resource);
  return {
    ended: events.filter((e) => e.verb === 'watch' && e.stage === 'ResponseComplete').length,
    lists: events.filter((e) => e.verb === 'list' && /[?&]limit=250\b/.test(e.requestURI)).length,
  };
}

/** Waits until `count` watches of `resource` have ended. */
export async function ended(w: World, resource: string, count: number, withinMs: number): Promise<void> {
  await waitFor(
    `${count} watches of ${resource} to end`,
    async () => (await upstream(w, resource)).ended >= count,
    withinMs,
    200,
  );
}

export function page(w: World, route: string, q: Record<string, string | number>, token = w.admin) {
  const query: Record<string, string> = {};
  for (const [k, v] of Object.entries(q)) query[k] = String(v);
  return request(w.t.app, 'GET', `/api/v1/${route}`, { token, headers: { 'x-cluster-name': 'c' }, query });
}

export const names = (body: { items: Array<{ metadata: { namespace?: string; name: string } }> }) =>
  body.items.map((o) => `${o.metadata.namespace}/${o.metadata.name}`);

/** The test's own ConfigMaps (labelled), or with `labelled: false` others to fill the cluster. */
export async function configmaps(w: World, namespace: string, prefix: string, count: number, labelled = true) {
  const made: string[] = [];
  const [key, value] = w.label.split('=');
  for (let i = 0; i < count; i++) {
    const name = `${prefix}-${i}`;
    const res = await kubeRequest(w.cp, 'POST', `/api/v1/namespaces/${namespace}/configmaps`, {
      metadata: { name, labels: labelled ? { [key]: value } : {} },
    });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    made.push(`${namespace}/${name}`);
  }
  return made;
}

/** The app's address, listening on loopback from the first call on. */
export async function baseOf(w: World): Promise<string> {
  const server = w.t.app.getHttpServer();
  if (!server.listening) await w.t.app.listen({ port: 0, host: '127.0.0.1' });
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

/** One event of a paged watch, with the time it arrived and, in SSE, its frame's `event:` and `id:`. */
export interface Notice {
  at: number;
  type: string;
  total?: number;
  resourceVersion?: string;
  object?: { code?: number; message?: string };
  event?: string;
  id?: string;
}

/** An open paged watch (`watch=true` on a paged query) as a console reads it. */
export interface Notices {
  status: number;
  /** The body when the answer was not a stream. */
  text: string;
  events: Notice[];
  /** Resolves when the service ends the stream. */
  done: Promise<void>;
  close(): void;
}

/** Opens a paged watch on `route` (`configmaps/_all`), newline-delimited JSON or with `sse` Server-Sent Events. */
export async function openNotices(
  base: string,
  route: string,
  query: Record<string, string>,
  options: { token: string; cluster?: string; sse?: boolean; headers?: Record<string, string> },
): Promise<Notices> {
  const url = `${base}/api/v1/${route}?${new URLSearchParams({ ...query, watch: 'true' })}`;
  const req = http.get(url, {
    headers: {
      authorization: `Bearer ${options.token}`,
      'x-cluster-name': options.cluster ?? 'c',
      ...(options.sse ? { accept: 'text/event-stream' } : {}),
      ...options.headers,
    },
  });
  const res = await new Promise<http.IncomingMessage>((resolve, reject) =>
    req.once('response', resolve).once('error', reject),
  );
  const events: Notice[] = [];
  let text = '';
  const done = new Promise<void>((resolve) => res.once('end', resolve).once('close', resolve));
  res.setEncoding('utf8').on('data', (chunk: string) => {
    text += chunk;
    if (res.statusCode !== 200) return;
    const separator = options.sse ? '\n\n' : '\n';
    for (let at = text.indexOf(separator); at >= 0; at = text.indexOf(separator)) {
      const frame = text.slice(0, at);
      text = text.slice(at + separator.length);
      if (!options.sse) {
        events.push({ at: Date.now(), ...JSON.parse(frame) });
        continue;
      }
      const fields: Record<string, string> = {};
      for (const line of frame.split('\n')) {
        const colon = line.indexOf(':');
        if (colon > 0) fields[line.slice(0, colon)] = line.slice(colon + 1).trimStart();
      }
      if (fields.data) events.push({ at: Date.now(), event: fields.event, id: fields.id, ...JSON.parse(fields.data) });
    }
  });
  if (res.statusCode !== 200) await done;
  return { status: res.statusCode ?? 0, text, events, done, close: () => req.destroy() };
}
