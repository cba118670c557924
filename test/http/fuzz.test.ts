// Issue 9: a seeded, bounded fuzzer over every operation of the committed openapi.json, against
// the real app on SQLite (app.inject: the whole Fastify and Nest pipeline), plus a real-socket
// phase for what only a socket shows (oversized headers, bytes that are not HTTP).
//
// Pass: no response ≥ 500; every error in the service's shape with x-request-id (or, on resource
// routes, the cluster's own Kubernetes Status passed through); the process healthy afterwards.
// FUZZ_REQUESTS (default 4000, under a minute here) and FUZZ_SEED choose how much and which.
// With CAS_TEST_CP_A set, resource routes also reach a real control plane, writing only in a
// namespace of this run's own.
import fc from 'fast-check';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import net from 'node:net';
import { after, before, describe, test } from 'node:test';
import { kubeRequest, sharedControlPlane, type ControlPlane } from '../harness/control-plane.js';
import { onPostgres, startTestApp, type TestApp } from '../support/app.js';
import { kubeconfigFor, registerCluster } from '../support/clusters.js';
import { signedIn } from '../support/factories.js';

const REQUESTS = Number(process.env.FUZZ_REQUESTS ?? 4000);
const SEED = Number(process.env.FUZZ_SEED ?? 20261122);
const CLUSTER = 'fuzz-a';
const NAMESPACE = `fuzz-${process.pid}`;

interface Operation {
  method: string;
  path: string;
  operationId: string;
  query: string[];
  hasBody: boolean;
  bodySchema?: { properties?: Record<string, { type?: string }> };
}

function operations(): Operation[] {
  const doc = JSON.parse(readFileSync(new URL('../../../openapi.json', import.meta.url), 'utf8'));
  const ops: Operation[] = [];
  for (const [path, methods] of Object.entries<Record<string, any>>(doc.paths)) {
    for (const [method, op] of Object.entries<any>(methods)) {
      const ref: string | undefined = op.requestBody?.content?.['application/json']?.schema?.$ref;
      ops.push({
        method: method.toUpperCase(),
        path,
        operationId: op.operationId,
        query: (op.parameters ?? []).filter((p: any) => p.in === 'query').map((p: any) => p.name),
        hasBody: Boolean(op.requestBody),
        bodySchema: ref ? doc.components.schemas[ref.split('/').pop()!] : undefined,
      });
    }
  }
  return ops;
}

// ---- generators -----------------------------------------------------------------------------

const nasty = fc.constantFrom(
  '',
  '0',
  '-1',
  '1',
  '2147483648',
  '99999999999999999999',
  '1e3',
  '0x10',
  ' 1',
  '1.5',
  'NaN',
  'null',
  '..',
  '.',
  '%2e%2e',
  '%2F',
  'a%00b',
  '%00',
  '%E0%A4%A',
  '%ff',
  '_all',
  'default',
  'x'.repeat(253),
  'x'.repeat(300),
  'é',
  '𝕏',
  '\u202e',
  '<script>',
  "' OR 1=1 --",
  '__proto__',
  'constructor',
);
const segment = fc.oneof(nasty, fc.string({ maxLength: 40 }).map(encodeURIComponent), fc.integer().map(String));
const scalar = fc.oneof(
  fc.string({ maxLength: 50 }),
  fc.string({ unit: 'grapheme', maxLength: 20 }),
  fc.integer(),
  fc.double(),
  fc.boolean(),
  fc.constant(null),
  fc.constantFrom(-1, 0, 2 ** 31, 2 ** 53, -(2 ** 63), 1e308, '\u0000', 'a\u0000b', 'x'.repeat(5000)),
);
const jsonValue = fc.letrec((tie) => ({
  value: fc.oneof({ depthSize: 'small' }, scalar, tie('array'), tie('object')),
  array: fc.array(tie('value'), { maxLength: 5 }),
  object: fc.dictionary(fc.oneof(fc.string({ maxLength: 12 }), nasty), tie('value'), { maxKeys: 6 }),
})).value;

/** A body shaped like the operation's schema, with each property valid-ish, of the wrong type, or odd. */
function schemaBody(op: Operation) {
  const props = Object.entries(op.bodySchema?.properties ?? {});
  return fc
    .record(
      Object.fromEntries(
        props.map(([name, p]) => [
          name,
          fc.option(
            fc.oneof(
              p.type === 'string' ? fc.string({ maxLength: 80 }) : p.type === 'boolean' ? fc.boolean() : fc.integer(),
              scalar,
              jsonValue,
            ),
            { nil: undefined },
          ),
        ]),
      ),
    )
    .chain((record) =>
      fc
        .record({ extra: fc.option(fc.dictionary(fc.string({ maxLength: 10 }), scalar, { maxKeys: 2 })) })
        .map(({ extra }) => ({
          ...Object.fromEntries(Object.entries(record).filter(([, v]) => v !== undefined)),
          ...extra,
        })),
    );
}

const deep = fc
  .tuple(fc.integer({ min: 30, max: 3000 }), fc.boolean())
  .map(([d, arr]) => (arr ? '['.repeat(d) + ']'.repeat(d) : '{"a":'.repeat(d) + '1' + '}'.repeat(d)));

function body(op: Operation): fc.Arbitrary<string | undefined> {
  return fc.oneof(
    { weight: 4, arbitrary: schemaBody(op).map((b) => JSON.stringify(b)) },
    { weight: 2, arbitrary: jsonValue.map((v) => JSON.stringify(v)) },
    { weight: 1, arbitrary: deep },
    {
      weight: 1,
      arbitrary: fc.constantFrom('{"a":', '{"__proto__":{"isAdmin":true}}', '\ufeff{}', '{}\u0000', 'null', '[]', '""'),
    },
    { weight: 1, arbitrary: fc.string({ maxLength: 200 }) },
    { weight: 1, arbitrary: fc.constant(undefined) },
  );
}

const contentType = fc.oneof(
  { weight: 6, arbitrary: fc.constant('application/json') },
  {
    weight: 4,
    arbitrary: fc.constantFrom(
      'application/merge-patch+json',
      'application/json-patch+json',
      'application/json; charset=utf-16',
      'text/plain',
      'multipart/form-data; boundary=x',
      'application/x-www-form-urlencoded',
      'application/json, text/html',
      '',
      'garbage/*;;;',
    ),
  },
);

function query(op: Operation): fc.Arbitrary<string> {
  const known = op.query.length ? fc.constantFrom(...op.query) : fc.constant('page');
  const pair = fc.tuple(fc.oneof(known, known, fc.string({ maxLength: 12 }).map(encodeURIComponent), nasty), segment);
  return fc
    .array(pair, { maxLength: 4 })
    .map((pairs) => (pairs.length ? '?' + pairs.map(([k, v]) => `${encodeURIComponent(k)}=${v}`).join('&') : ''));
}

interface Case {
  method: string;
  url: string;
  headers: Record<string, string>;
  payload?: string;
}

function cases(ops: Operation[], credentials: { token: string; viewer: string }) {
  return fc.constantFrom(...ops).chain((op) =>
    fc
      .record({
        params: fc.array(segment, { minLength: 3, maxLength: 3 }),
        realCluster: fc.boolean(),
        query: query(op),
        body: op.hasBody || op.method !== 'GET' ? body(op) : fc.constant(undefined),
        contentType,
        auth: fc.constantFrom('admin', 'admin', 'admin', 'viewer', 'none', 'garbage', 'cookie'),
        requestId: fc.oneof(fc.constant(undefined), fc.string({ maxLength: 200 })),
        clusterHeader: fc.oneof(fc.constant(CLUSTER), nasty, fc.constant(undefined)),
        method: fc.oneof(
          { weight: 9, arbitrary: fc.constant(op.method) },
          { weight: 1, arbitrary: fc.constantFrom('OPTIONS', 'HEAD', 'TRACE', 'PROPFIND') },
        ),
      })
      .map((r): Case => {
        let i = 0;
        let path = op.path.replace(/\{(\w+)\}/g, (_m, name: string) => {
          const fuzzed = r.params[i++];
          // Writes reach the shared control plane only in this run's own namespace, on configmaps.
          if (r.realCluster && name === 'resource') return op.method === 'GET' ? fuzzed : 'configmaps';
          if (r.realCluster && name === 'namespace') return NAMESPACE;
          return fuzzed;
        });
        const write = op.method !== 'GET' && path.includes('{') === false && op.path.includes('{resource}');
        const headers: Record<string, string> = {};
        if (r.contentType && r.body !== undefined) headers['content-type'] = r.contentType;
        if (r.requestId !== undefined && /^[\x20-\x7e]*$/.test(r.requestId)) headers['x-request-id'] = r.requestId;
        const cluster = r.realCluster ? CLUSTER : (r.clusterHeader ?? undefined);
        if (cluster !== undefined && /^[\x20-\x7e]*$/.test(cluster)) {
          // A fuzzed write against the real cluster only when it is pinned to our namespace.
          headers['x-cluster-name'] = write && !r.realCluster && cluster === CLUSTER ? 'no-such-cluster' : cluster;
        }
        if (r.auth === 'admin') headers.authorization = `Bearer ${credentials.token}`;
        if (r.auth === 'viewer') headers.authorization = `Bearer ${credentials.viewer}`;
        if (r.auth === 'garbage') headers.authorization = 'Bearer cas_sess_' + 'A'.repeat(43);
        if (r.auth === 'cookie') headers.cookie = `cas_session=${credentials.token}`;
        if (op.operationId === 'logout') headers.authorization = 'none'; // keep our session
        path = path.replace(/\/+$/, '') || '/';
        const c: Case = { method: r.method, url: path + r.query, headers, payload: r.body };
        // Counterexamples print short: a 3,000-level body would fill the log.
        return Object.assign(c, {
          [fc.toStringMethod]: () =>
            JSON.stringify({
              ...c,
              payload:
                c.payload && c.payload.length > 300
                  ? `${c.payload.slice(0, 300)}… (${c.payload.length} characters)`
                  : c.payload,
            }),
        });
      }),
  );
}

// ---- checks ---------------------------------------------------------------------------------

function checkResponse(c: Case, res: { statusCode: number; headers: Record<string, unknown>; body: string }): void {
  const label = `${c.method} ${c.url.slice(0, 200)} → ${res.statusCode} ${res.body.slice(0, 300)}`;
  assert.ok(res.statusCode < 500, `a 5xx: ${label}`);
  assert.ok(res.headers['x-request-id'], `no x-request-id: ${label}`);
  if (res.statusCode < 400 || c.method === 'HEAD') return;
  let parsed: any;
  try {
    parsed = JSON.parse(res.body);
  } catch {
    assert.fail(`an error that is not JSON: ${label}`);
  }
  if (parsed?.kind === 'Status' && c.headers['x-cluster-name'] === CLUSTER) return; // the cluster's own answer
  // The Kubernetes API path answers in the Kubernetes shape, its own errors too.
  if (/^\/api\/v1\/clusters\/[^/]*\/k8s\//.test(c.url) && parsed?.kind === 'Status') {
    assert.equal(parsed.code, res.statusCode, label);
    return;
  }
  assert.deepEqual(Object.keys(parsed).sort(), ['error', 'message', 'requestId', 'statusCode'], label);
  assert.equal(parsed.statusCode, res.statusCode, label);
  assert.equal(parsed.requestId, res.headers['x-request-id'], label);
}

describe('fuzz: every operation of openapi.json', { skip: onPostgres && 'the fuzzer runs on SQLite' }, () => {
  let t: TestApp;
  let cp: ControlPlane | undefined;
  let admin: { token: string };
  let viewer: { token: string };
  before(async () => {
    t = await startTestApp({
      env: { CAS_LOGIN_MAX_FAILURES_PER_ADDRESS: '100000', CAS_CLUSTER_HEALTH_INTERVAL_SECONDS: '0' },
    });
    admin = await signedIn(t, 'admin');
    viewer = await signedIn(t, 'viewer');
    if (process.env.CAS_TEST_CP_A) {
      cp = await sharedControlPlane('a');
      await registerCluster(t, admin.token, CLUSTER, kubeconfigFor(cp));
      const ns = await kubeRequest(cp, 'POST', '/api/v1/namespaces', { metadata: { name: NAMESPACE } });
      assert.ok(ns.status === 201 || ns.status === 409, `namespace: ${ns.status}`);
    }
  });
  after(async () => {
    if (cp) await kubeRequest(cp, 'DELETE', `/api/v1/namespaces/${NAMESPACE}`);
    await t.close();
  });

  test(`${REQUESTS} fuzzed requests through the app: no 5xx, every error in the service's shape`, async (ctx) => {
    const ops = operations();
    assert.ok(ops.length >= 28, `openapi.json has ${ops.length} operations`);
    let sent = 0;
    const statuses: Record<number, number> = {};
    const seen = new Set<string>();
    // Our own session may end (a fuzzed password reset, logout or role change): sign in again.
    const refresh = async () => {
      const me = await t.app.inject({
        method: 'GET',
        url: '/api/v1/auth/me',
        headers: { authorization: `Bearer ${admin.token}` },
      });
      if (me.statusCode !== 200 || !JSON.parse(me.body).roles?.includes('admin')) admin = await signedIn(t, 'admin');
    };
    await fc.assert(
      fc.asyncProperty(
        cases(ops, {
          get token() {
            return admin.token;
          },
          get viewer() {
            return viewer.token;
          },
        }),
        async (c) => {
          const res = await t.app.inject({
            method: c.method as 'GET',
            url: c.url,
            headers: c.headers,
            payload: c.payload,
          });
          sent++;
          statuses[res.statusCode] = (statuses[res.statusCode] ?? 0) + 1;
          seen.add(c.method + ' ' + c.url.split('?')[0].split('/').slice(0, 4).join('/'));
          checkResponse(c, { statusCode: res.statusCode, headers: res.headers, body: res.body });
          if (sent % 50 === 0) await refresh();
        },
      ),
      { seed: SEED, numRuns: REQUESTS, endOnFailure: true },
    );
    const summary = `fuzz: sent ${sent} requests (seed ${SEED}, ${ops.length} operations${cp ? ', real cluster' : ''}); statuses ${JSON.stringify(statuses)}`;
    console.log(summary);
    ctx.diagnostic(summary);

    const health = await t.app.inject({ method: 'GET', url: '/healthz' });
    assert.equal(health.statusCode, 200);
    const ready = await t.app.inject({ method: 'GET', url: '/readyz' });
    assert.equal(ready.statusCode, 200);
    await refresh();
    const me = await t.app.inject({
      method: 'GET',
      url: '/api/v1/auth/me',
      headers: { authorization: `Bearer ${admin.token}` },
    });
    assert.equal(me.statusCode, 200, 'still serving signed-in callers');
  });

  test('a real socket: oversized headers and bytes that are not HTTP get service-shaped errors; healthy after', async (ctx) => {
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    const port = (t.app.getHttpServer().address() as net.AddressInfo).port;
    const exchange = (bytes: string) =>
      new Promise<string>((resolve) => {
        const socket = net.connect(port, '127.0.0.1', () => socket.write(bytes));
        let text = '';
        socket.on('data', (d) => (text += d));
        socket.on('error', () => undefined);
        socket.on('close', () => resolve(text));
        setTimeout(() => socket.destroy(), 10_000).unref();
      });
    const samples = fc.sample(
      fc.oneof(
        fc
          .integer({ min: 17_000, max: 200_000 })
          .map((n) => `GET /healthz HTTP/1.1\r\nhost: x\r\nx-big: ${'a'.repeat(n)}\r\n\r\n`),
        fc.string({ minLength: 1, maxLength: 300 }).map((s) => s + '\r\n\r\n'),
        fc.constantFrom(
          'GET / HTTP/9.9\r\n\r\n',
          'GET /healthz HTTP/1.1\r\nhost: x\r\ncontent-length: -1\r\n\r\n',
          '\u0000\u0001\u0002\r\n\r\n',
        ),
      ),
      { seed: SEED, numRuns: 60 },
    );
    let sent = 0;
    for (const bytes of samples) {
      const text = await exchange(bytes);
      sent++;
      const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1] ?? 0);
      if (status === 0) continue; // closed without an answer (not HTTP at all)
      assert.ok(status < 500, `a 5xx for ${JSON.stringify(bytes.slice(0, 80))}: ${text.slice(0, 200)}`);
      if (status >= 400) {
        const body = JSON.parse(text.slice(text.indexOf('\r\n\r\n') + 4));
        assert.deepEqual(Object.keys(body).sort(), ['error', 'message', 'requestId', 'statusCode']);
        assert.match(text, new RegExp(`x-request-id: ${body.requestId}`, 'i'));
      }
    }
    ctx.diagnostic(`fuzz: sent ${sent} raw requests over a socket`);
    console.log(`fuzz: sent ${sent} raw requests over a socket`);
    const health = await fetch(`http://127.0.0.1:${port}/healthz`);
    assert.equal(health.status, 200);
  });
});
