// Benchmarks: prints figures, asserts nothing. Run after `npm run build:test` (uses build/):
//   node scripts/bench.mjs            (starts its own control plane; or set CAS_TEST_CP_A to a running one)
// Measures login cost, authenticated request overhead, resource reads through the service against
// the same reads straight to the cluster, and the service's memory while it streams a 16 MiB list.
import http from 'node:http';
import https from 'node:https';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createApp } from '../build/src/app.js';
import { loadConfig } from '../build/src/config/config.js';
import { kubeRequest, sharedControlPlane } from '../build/test/harness/control-plane.js';
import { kubeconfigFor } from '../build/test/support/clusters.js';

const cp = await sharedControlPlane('a');
const dataDir = await mkdtemp(join(tmpdir(), 'cas-bench-'));
const app = await createApp(loadConfig({ CAS_DATA_DIR: dataDir, LOG_LEVEL: 'silent', PORT: '0' }));
await app.listen({ port: 0, host: '127.0.0.1' });
const port = app.getHttpServer().address().port;
const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });

function call(method, path, { token, body, cluster } = {}) {
  return new Promise((resolve, reject) => {
    const payload = body === undefined ? undefined : JSON.stringify(body);
    const req = http.request(
      {
        host: '127.0.0.1', port, method, path, agent,
        headers: {
          ...(token ? { authorization: `Bearer ${token}` } : {}),
          ...(cluster ? { 'x-cluster-name': cluster } : {}),
          ...(payload ? { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) } : {}),
        },
      },
      (res) => {
        let size = 0;
        const chunks = [];
        res.on('data', (c) => { size += c.length; if (size < 1 << 20) chunks.push(c); });
        res.on('end', () => resolve({ status: res.statusCode, size, text: Buffer.concat(chunks).toString() }));
      },
    );
    req.on('error', reject);
    req.end(payload);
  });
}

const direct = new https.Agent({ keepAlive: true, ca: cp.caData, cert: cp.adminCertData, key: cp.adminKeyData, maxSockets: 64 });
function callDirect(path) {
  return new Promise((resolve, reject) => {
    https.get(new URL(path, cp.server), { agent: direct, headers: { accept: 'application/json' } }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode));
    }).on('error', reject);
  });
}

async function measure(label, count, concurrency, fn, { warmUp = Math.min(500, count) } = {}) {
  // Warm up first (JIT, connection pools), so the figures are of the steady state.
  for (let i = 0; i < warmUp; i += concurrency) await Promise.all(Array.from({ length: concurrency }, fn));
  const times = [];
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < count) {
        next++;
        const t0 = performance.now();
        await fn();
        times.push(performance.now() - t0);
      }
    }),
  );
  const total = performance.now() - started;
  times.sort((a, b) => a - b);
  const pct = (p) => times[Math.min(times.length - 1, Math.floor((p / 100) * times.length))].toFixed(2);
  console.log(`${label.padEnd(52)} ${String(Math.round((count / total) * 1000)).padStart(6)} req/s   p50 ${pct(50)} ms   p99 ${pct(99)} ms   (n=${count}, c=${concurrency})`);
}

await call('POST', '/api/v1/admin/users/create_super_user', { body: { username: 'bench', password: 'bench-password-1' } });
const login = () => call('POST', '/api/v1/auth/login', { body: { username: 'bench', password: 'bench-password-1' } });
const token = JSON.parse((await login()).text).token;
await call('POST', '/api/v1/admin/clusters', { token, body: { name: 'bench', config: kubeconfigFor(cp) } });
const ns = `bench-${process.pid}`;
await kubeRequest(cp, 'POST', '/api/v1/namespaces', { metadata: { name: ns } });
await kubeRequest(cp, 'POST', `/api/v1/namespaces/${ns}/configmaps`, { metadata: { name: 'one' }, data: { a: '1' } });

console.log(`node ${process.version}, ${(await import('node:os')).cpus().length} cores, SQLite; cluster: kube-apiserver v1.20.2 on loopback\n`);
await measure('login (argon2id verify + session)', 20, 2, login, { warmUp: 2 });
await measure('GET /api/v1/auth/me (session lookup)', 3000, 16, () => call('GET', '/api/v1/auth/me', { token }));
await measure('GET one ConfigMap, straight to the cluster', 2000, 16, () => callDirect(`/api/v1/namespaces/${ns}/configmaps/one`));
await measure('GET one ConfigMap through the service', 2000, 16, () => call('GET', `/api/v1/configmaps/${ns}/one`, { token, cluster: 'bench' }));
await measure('PATCH one ConfigMap through the service', 500, 8, () =>
  call('PATCH', `/api/v1/configmaps/${ns}/one?patchType=merge`, { token, cluster: 'bench', body: { data: { a: String(Math.random()) } } }));

// A 16 MiB list: memory of the service while it streams it.
const value = 'x'.repeat(8 * 1024);
for (let i = 0; i < 2000; i += 50) {
  await Promise.all(Array.from({ length: 50 }, (_, k) =>
    kubeRequest(cp, 'POST', `/api/v1/namespaces/${ns}/configmaps`, { metadata: { name: `big-${i + k}` }, data: { value } })));
}
global.gc?.();
const before = process.memoryUsage().rss;
let peak = before;
const sampler = setInterval(() => (peak = Math.max(peak, process.memoryUsage().rss)), 5);
const t0 = performance.now();
const list = await call('GET', `/api/v1/configmaps/${ns}`, { token, cluster: 'bench' });
const took = performance.now() - t0;
clearInterval(sampler);
console.log(`\nlist of 2,000 ConfigMaps of 8 KiB: ${(list.size / 1048576).toFixed(1)} MiB in ${took.toFixed(0)} ms; ` +
  `process RSS ${(before / 1048576).toFixed(0)} MiB before, peak +${((peak - before) / 1048576).toFixed(1)} MiB while streaming ` +
  `(bench client and service share this process)`);

await kubeRequest(cp, 'DELETE', `/api/v1/namespaces/${ns}`);
await app.close();
await rm(dataDir, { recursive: true, force: true });
agent.destroy();
direct.destroy();
await cp.stop();
process.exit(0);
