// Cost of the audit log on write calls: prints figures, asserts nothing. After `npm run build:test`:
//   node scripts/bench-audit.mjs        (uses CAS_TEST_CP_A when set, else starts a control plane)
// The same write calls run alternately with audit rows recorded and with recording switched off
// (AuditService.record replaced by a no-op in this process: the hook still builds the row and peeks
// at the answer, so "off" isolates the queue and the INSERTs), then the writer's own throughput.
import http from 'node:http';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createApp } from '../build/src/app.js';
import { AuditService } from '../build/src/audit/audit.service.js';
import { loadConfig } from '../build/src/config/config.js';
import { kubeRequest, sharedControlPlane } from '../build/test/harness/control-plane.js';
import { kubeconfigFor } from '../build/test/support/clusters.js';

const cp = await sharedControlPlane('a');
const dataDir = await mkdtemp(join(tmpdir(), 'cas-bench-audit-'));
const databaseUrl = process.env.BENCH_DATABASE_URL; // e.g. a postgres:// URL of an empty database
const app = await createApp(
  loadConfig({ CAS_DATA_DIR: dataDir, LOG_LEVEL: 'silent', ...(databaseUrl ? { DATABASE_URL: databaseUrl } : {}) }),
);
await app.listen({ port: 0, host: '127.0.0.1' });
const port = app.getHttpServer().address().port;
const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });
const audit = app.get(AuditService);
const record = audit.record.bind(audit);

function call(method, path, { token, body, cluster } = {}) {
  return new Promise((resolve, reject) => {
    const payload = body === undefined ? undefined : JSON.stringify(body);
    const req = http.request(
      {
        host: '127.0.0.1',
        port,
        method,
        path,
        agent,
        headers: {
          ...(token ? { authorization: `Bearer ${token}` } : {}),
          ...(cluster ? { 'x-cluster-name': cluster } : {}),
          ...(payload ? { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) } : {}),
        },
      },
      (res) => {
        const chunks = [];
        res.on('data', (c) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode, text: Buffer.concat(chunks).toString() }));
      },
    );
    req.on('error', reject);
    req.end(payload);
  });
}

async function measure(count, concurrency, fn) {
  for (let i = 0; i < 100; i += concurrency) await Promise.all(Array.from({ length: concurrency }, fn));
  const times = [];
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < count) {
        next++;
        const t0 = performance.now();
        const res = await fn();
        if (res.status >= 300) throw new Error(`${res.status} ${res.text}`);
        times.push(performance.now() - t0);
      }
    }),
  );
  const total = performance.now() - started;
  await audit.flush(); // the writer's work counts against the run that caused it
  times.sort((a, b) => a - b);
  return {
    rps: (count / (performance.now() - started)) * 1000,
    p50: times[Math.floor(times.length / 2)],
    mean: times.reduce((a, b) => a + b, 0) / times.length,
    total,
  };
}

async function compare(label, count, concurrency, fn) {
  const runs = { on: [], off: [] };
  for (const mode of ['on', 'off', 'on', 'off', 'on', 'off']) {
    audit.record = mode === 'on' ? record : () => undefined;
    runs[mode].push(await measure(count, concurrency, fn));
  }
  audit.record = record;
  const median = (xs, k) => xs.map((x) => x[k]).sort((a, b) => a - b)[1];
  const on = { rps: median(runs.on, 'rps'), p50: median(runs.on, 'p50'), mean: median(runs.on, 'mean') };
  const off = { rps: median(runs.off, 'rps'), p50: median(runs.off, 'p50'), mean: median(runs.off, 'mean') };
  console.log(
    `${label.padEnd(44)} audit on: ${on.rps.toFixed(0).padStart(5)} req/s p50 ${on.p50.toFixed(2)} ms | ` +
      `off: ${off.rps.toFixed(0).padStart(5)} req/s p50 ${off.p50.toFixed(2)} ms | ` +
      `added p50 ${(on.p50 - off.p50).toFixed(2)} ms, mean ${(on.mean - off.mean).toFixed(2)} ms (n=${count}, c=${concurrency}, median of 3)`,
  );
}

await call('POST', '/api/v1/admin/users/create_super_user', {
  body: { username: 'bench', password: 'bench-password-1' },
});
const token = JSON.parse(
  (await call('POST', '/api/v1/auth/login', { body: { username: 'bench', password: 'bench-password-1' } })).text,
).token;
await call('POST', '/api/v1/admin/clusters', { token, body: { name: 'bench', config: kubeconfigFor(cp) } });
const user = JSON.parse(
  (await call('POST', '/api/v1/admin/users', { token, body: { username: 'target', password: 'target-password-1' } }))
    .text,
);
const ns = `bench-audit-${process.pid}`;
await kubeRequest(cp, 'POST', '/api/v1/namespaces', { metadata: { name: ns } });
await kubeRequest(cp, 'POST', `/api/v1/namespaces/${ns}/configmaps`, { metadata: { name: 'one' }, data: { a: '1' } });

console.log(
  `node ${process.version}, ${(await import('node:os')).cpus().length} cores, ${databaseUrl ? 'PostgreSQL' : 'SQLite'}\n`,
);
await compare('PUT /api/v1/admin/users/:id', 600, 8, () =>
  call('PUT', `/api/v1/admin/users/${user.id}`, { token, body: { name: `n${Math.random()}` } }),
);
await compare('PATCH one ConfigMap through the service', 400, 8, () =>
  call('PATCH', `/api/v1/configmaps/${ns}/one?patchType=merge`, {
    token,
    cluster: 'bench',
    body: { data: { a: String(Math.random()) } },
  }),
);

// The writer alone: rows queued at once, stored in batches.
const row = {
  at: new Date(),
  actorKind: 'user',
  actorId: 1,
  actorName: 'bench',
  actorKey: 'bench',
  clientAddress: '127.0.0.1',
  operation: 'patchResource',
  method: 'PATCH',
  statusCode: 200,
  requestId: 'x',
  targetKind: null,
  targetId: null,
  cluster: 'bench',
  resource: 'configmaps',
  namespace: ns,
  name: 'one',
  uid: 'u',
  resourceVersion: '1',
};
const t0 = performance.now();
for (let i = 0; i < 10_000; i++) audit.record({ ...row, requestId: `bench-${i}` });
await audit.flush();
console.log(`\nwriter: 10,000 rows stored in ${(performance.now() - t0).toFixed(0)} ms`);

await kubeRequest(cp, 'DELETE', `/api/v1/namespaces/${ns}`);
await app.close();
await rm(dataDir, { recursive: true, force: true });
agent.destroy();
await cp.stop();
process.exit(0);
