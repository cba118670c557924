// Side-by-side benchmark: prints figures, asserts nothing. `npm run bench` builds first (uses build/).
//
// The load generator (wrk, Debian's package, installed here when missing) runs in its own process; the
// service runs as its own process (build/src/main.js, SQLite, LOG_LEVEL=info to /dev/null); the same real
// kube-apiserver (the test harness's control plane: CAS_TEST_CP_A, or one started here) is measured
// directly, through `kubectl proxy` (Debian's kubectl 1.20.2) and through the service, in one run.
//
//   BENCH_SECONDS=10 (per measurement)   BENCH_USERS=100000   BENCH_SKIP_POSTGRES=1   BENCH_PROFILE=dir
//   BENCH_PARTS=resources,users (default); also lists (issue 32), apply (issue 33), terminal (issue 31),
//   helm (issue 42; BENCH_HELM_RELEASES=1000)
//   (BENCH_PROFILE: the service runs with --cpu-prof and writes its profile into dir)
import { execFileSync, fork, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import Database from 'better-sqlite3';
import { kubeRequest, sharedControlPlane } from '../build/test/harness/control-plane.js';
import { kubeconfigFor } from '../build/test/support/clusters.js';

const SECONDS = Number(process.env.BENCH_SECONDS ?? 10);
const USERS = Number(process.env.BENCH_USERS ?? 100_000);
const PG_URL = process.env.TEST_DATABASE_URL ?? 'postgres://postgres:postgres@127.0.0.1:5432/postgres';
const MIB = 1024 * 1024;
const tmp = await mkdtemp(join(os.tmpdir(), 'cas-bench-'));
const children = [];
const cleanups = [];
process.on('exit', () => children.forEach((c) => c.exitCode === null && c.kill('SIGKILL')));

function ensureWrk() {
  try {
    return execFileSync('sh', ['-c', 'command -v wrk'], { encoding: 'utf8' }).trim();
  } catch {
    console.log('installing wrk (Debian package) ...');
    const asRoot = process.getuid?.() === 0 ? [] : ['sudo'];
    execFileSync(asRoot[0] ?? 'apt-get', [...asRoot.slice(1), ...(asRoot.length ? ['apt-get'] : []), 'update', '-qq']);
    execFileSync(asRoot[0] ?? 'apt-get', [...(asRoot.length ? ['apt-get'] : []), 'install', '-y', '-qq', 'wrk'], {
      env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' },
    });
    return 'wrk';
  }
}

function freePort() {
  return new Promise((resolve) => {
    const s = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

/** CPU time (user + system) a process has used, in seconds. */
function cpuSecondsOf(pid) {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100; // clock ticks (USER_HZ)
}
const rssOf = async (pid) => Number(/VmRSS:\s+(\d+)/.exec(await readFile(`/proc/${pid}/status`, 'utf8'))[1]) * 1024;
const mib = (bytes) => `${(bytes / MIB).toFixed(0)} MiB`;
/**
 * RSS after 30 s without requests: V8 gives back the young generation grown by a burst (start-up, a
 * load) only when its memory reducer runs, some seconds into a quiet spell (about 8 s here).
 */
async function settledRss(pid) {
  await new Promise((r) => setTimeout(r, 30_000));
  return rssOf(pid);
}

/**
 * Waits until a process has finished the work a load left in flight (its CPU time grows by less than
 * 20 ms in 250 ms, at most 10 s), and says how long that took. After a login storm the service still
 * runs the password checks it had queued (up to five per username), each holding argon2's 64 MiB while
 * it runs: RSS read at that moment measures a check in progress, not what the service keeps.
 */
async function untilQuiet(pid) {
  const started = Date.now();
  for (let i = 0; i < 40; i++) {
    const before = cpuSecondsOf(pid);
    await new Promise((r) => setTimeout(r, 250));
    if (cpuSecondsOf(pid) - before < 0.02) break;
  }
  return Date.now() - started;
}

/** wrk's own percentiles are 50/75/90/99: this hook prints the p95 of the same histogram (µs). */
const P95_HOOK =
  '\ndone = function(summary, latency, requests)\n  io.write(string.format("p95 %d\\n", latency:percentile(95)))\nend\n';
let scripts = 0;

/** Runs wrk against a URL; returns req/s, p50, p95, p99 (ms) and errors. */
async function wrk(url, { connections, seconds = SECONDS, headers = {}, script } = {}) {
  const args = [`-t${Math.min(2, connections)}`, `-c${connections}`, `-d${seconds}s`, '--latency', '--timeout', '10s'];
  for (const [k, v] of Object.entries(headers)) args.push('-H', `${k}: ${v}`);
  const withHook = join(tmp, `wrk-${++scripts}.lua`);
  await writeFile(withHook, (script ? await readFile(script, 'utf8') : '') + P95_HOOK);
  args.push('-s', withHook);
  args.push(url);
  const out = await new Promise((resolve, reject) => {
    const child = spawn(WRK, args, { stdio: ['ignore', 'pipe', 'inherit'] });
    let text = '';
    child.stdout.on('data', (c) => (text += c));
    child.on('exit', (code) => (code === 0 ? resolve(text) : reject(new Error(`wrk exited ${code}: ${text}`))));
  });
  const ms = (label) => {
    const m = new RegExp(`${label}%\\s+([\\d.]+)(us|ms|s)`).exec(out);
    if (!m) return NaN;
    return Number(m[1]) * { us: 0.001, ms: 1, s: 1000 }[m[2]];
  };
  const non2xx = Number(/Non-2xx or 3xx responses: (\d+)/.exec(out)?.[1] ?? 0);
  const socketErrors = /Socket errors: (.*)/.exec(out)?.[1];
  return {
    rps: Number(/Requests\/sec:\s+([\d.]+)/.exec(out)[1]),
    p50: ms('50'),
    p95: Number(/^p95 (\d+)$/m.exec(out)?.[1] ?? NaN) / 1000,
    p99: ms('99'),
    errors: non2xx + (socketErrors ? ` (${socketErrors})` : ''),
  };
}

const rows = [];
function row(label, r, note = '') {
  rows.push({ label, ...r });
  const errors = r.errors && r.errors !== 0 ? `   errors ${r.errors}` : '';
  console.log(
    `${label.padEnd(58)} ${String(Math.round(r.rps)).padStart(7)} req/s   p50 ${r.p50.toFixed(2).padStart(6)} ms   ` +
      `p95 ${r.p95.toFixed(2).padStart(6)} ms   p99 ${r.p99.toFixed(2).padStart(7)} ms${errors}${note ? '   ' + note : ''}`,
  );
  return r;
}
const verdicts = [];
function goal(text, ok, figure) {
  verdicts.push(`${ok ? 'met    ' : 'NOT MET'}  ${text}: ${figure}`);
}

/** Starts the service as its own process and waits until it is ready. */
async function startService(env, label) {
  const port = await freePort();
  const profile = process.env.BENCH_PROFILE ? [`--cpu-prof`, `--cpu-prof-dir=${process.env.BENCH_PROFILE}`] : [];
  // As `npm start`, the Dockerfile and scripts/start.sh run it: a young generation of 4 MiB per semi-space,
  // and malloc's large blocks (password hashing's 64 MiB) in transparent huge pages.
  const child = spawn(process.execPath, ['--max-semi-space-size=4', ...profile, 'build/src/main.js'], {
    env: {
      ...process.env,
      GLIBC_TUNABLES: 'glibc.malloc.hugetlb=1',
      HOST: '127.0.0.1',
      PORT: String(port),
      LOG_LEVEL: 'info',
      ...env,
    },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  children.push(child);
  const base = `http://127.0.0.1:${port}`;
  for (let i = 0; ; i++) {
    if ((await fetch(`${base}/readyz`).catch(() => undefined))?.ok) break;
    if (i > 300 || child.exitCode !== null) throw new Error(`${label} did not start`);
    await new Promise((r) => setTimeout(r, 100));
  }
  const api = async (method, path, { token, body, cluster } = {}) => {
    const res = await fetch(base + path, {
      method,
      headers: {
        ...(token ? { authorization: `Bearer ${token}` } : {}),
        ...(cluster ? { 'x-cluster-name': cluster } : {}),
        ...(body ? { 'content-type': 'application/json' } : {}),
      },
      body: body ? JSON.stringify(body) : undefined,
    });
    const text = await res.text();
    if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${text}`);
    return text ? JSON.parse(text) : undefined;
  };
  const stop = async () => {
    child.kill('SIGTERM');
    await new Promise((r) => (child.exitCode !== null ? r() : child.once('exit', r)));
  };
  return { child, base, api, stop };
}

const WRK = ensureWrk();
const kubectl =
  process.env.KUBECTL_BIN || execFileSync('bash', ['scripts/kube/ensure-kubectl.sh'], { encoding: 'utf8' }).trim();
const cp = await sharedControlPlane('a');
const version = (await kubeRequest(cp, 'GET', '/version')).body.gitVersion;
console.log(
  `machine: ${os.cpus().length} × ${os.cpus()[0].model}, ${mib(os.totalmem())}; node ${process.version}; ` +
    `kube-apiserver ${version} on loopback; wrk -t2, ${SECONDS} s per measurement after a warm-up\n`,
);

const PARTS = new Set((process.env.BENCH_PARTS ?? 'resources,users').split(','));

async function resourcesPart() {
  // ---------------------------------------------------------------- data in the cluster
  const ns = `bench-${process.pid}`;
  const nsList = `bench-list-${process.pid}`;
  const nsBig = `bench-big-${process.pid}`;
  for (const n of [ns, nsList, nsBig]) await kubeRequest(cp, 'POST', '/api/v1/namespaces', { metadata: { name: n } });
  cleanups.push(() =>
    Promise.all([ns, nsList, nsBig].map((n) => kubeRequest(cp, 'DELETE', `/api/v1/namespaces/${n}`))),
  );
  await kubeRequest(cp, 'POST', `/api/v1/namespaces/${ns}/configmaps`, {
    metadata: { name: 'one' },
    data: { value: 'x'.repeat(1024) },
  });
  async function fill(namespace, count, size) {
    const value = 'x'.repeat(size);
    for (let i = 0; i < count; i += 50) {
      await Promise.all(
        Array.from({ length: Math.min(50, count - i) }, (_, k) =>
          kubeRequest(cp, 'POST', `/api/v1/namespaces/${namespace}/configmaps`, {
            metadata: { name: `cm-${i + k}` },
            data: { value },
          }),
        ),
      );
    }
  }
  await fill(nsList, 300, 4 * 1024);
  await fill(nsBig, 2500, 8 * 1024);

  // ---------------------------------------------------------------- the three ways in
  // All three ways in reach the apiserver as the same user with the same kind of credential, a bearer
  // token, so the apiserver does the same work for each and the comparison measures the hop alone. A
  // client certificate costs the apiserver more per request (it verifies the chain on every request:
  // ~200 µs more of its CPU per GET here); it is measured once, through both the proxy and the service.
  async function startProxy(context) {
    const port = await freePort();
    const child = spawn(
      kubectl,
      ['proxy', `--port=${port}`, '--address=127.0.0.1', `--kubeconfig=${cp.kubeconfigPath}`, `--context=${context}`],
      {
        stdio: ['ignore', 'pipe', 'ignore'], // it logs every request a load generator cancels at the end of a run
      },
    );
    children.push(child);
    await new Promise((resolve) => child.stdout.once('data', resolve));
    return { port, child };
  }
  const { port: proxyPort, child: proxy } = await startProxy('admin-token');
  const { port: certProxyPort, child: certProxy } = await startProxy('admin');

  const dataDir = join(tmp, 'sqlite');
  const service = await startService(
    { CAS_DATA_DIR: dataDir, CAS_BOOTSTRAP_USERNAME: 'bench', CAS_BOOTSTRAP_PASSWORD: 'bench-password-1' },
    'the service',
  );
  await new Promise((r) => setTimeout(r, 2000));
  const startRss = await rssOf(service.child.pid);
  const idleRss = await settledRss(service.child.pid);
  const { token } = await service.api('POST', '/api/v1/auth/login', {
    body: { username: 'bench', password: 'bench-password-1' },
  });
  await service.api('POST', '/api/v1/admin/clusters', {
    token,
    body: { name: 'bench', config: kubeconfigFor(cp, { token: cp.adminToken }) },
  });
  await service.api('POST', '/api/v1/admin/clusters', {
    token,
    body: { name: 'bench-cert', config: kubeconfigFor(cp) },
  });
  const { key } = await service.api('POST', '/api/v1/admin/apikeys', { token, body: { name: 'bench', role: 'admin' } });

  const direct = { url: cp.server, headers: { authorization: `Bearer ${cp.adminToken}`, accept: 'application/json' } };
  const viaProxy = { url: `http://127.0.0.1:${proxyPort}`, headers: { accept: 'application/json' }, pid: proxy.pid };
  const viaCertProxy = {
    url: `http://127.0.0.1:${certProxyPort}`,
    headers: { accept: 'application/json' },
    pid: certProxy.pid,
  };
  const viaKey = {
    url: `${service.base}/api/v1`,
    headers: { authorization: key, 'x-cluster-name': 'bench' },
    pid: service.child.pid,
  };
  const viaCertKey = { ...viaKey, headers: { ...viaKey.headers, 'x-cluster-name': 'bench-cert' } };
  // The Kubernetes API path (what kubectl, client-go and client-node use): the apiserver's own paths.
  const viaKube = {
    url: `${service.base}/api/v1/clusters/bench/k8s`,
    headers: { authorization: key, accept: 'application/json' },
    pid: service.child.pid,
  };
  const viaSession = {
    url: `${service.base}/api/v1`,
    headers: { authorization: `Bearer ${token}`, 'x-cluster-name': 'bench' },
    pid: service.child.pid,
  };
  const kubePath = (namespace, name) => `/api/v1/namespaces/${namespace}/configmaps${name ? '/' + name : ''}`;
  const ourPath = (namespace, name) => `/configmaps/${namespace}${name ? '/' + name : ''}`;

  const apiserverPid = JSON.parse(readFileSync(join(cp.dir, 'info.json'), 'utf8')).pids.apiserver;
  /**
   * The load; the CPU time (user + system) the apiserver spent per request; with `target.pid`, the CPU
   * time that process (the proxy, the service) spent per request.
   */
  async function measure(label, target, path, connections, seconds = SECONDS) {
    await wrk(target.url + path, { connections, seconds: 3, headers: target.headers }); // warm-up
    const before = target.pid ? cpuSecondsOf(target.pid) : 0;
    const apiserverBefore = cpuSecondsOf(apiserverPid);
    const r = await wrk(target.url + path, { connections, seconds, headers: target.headers });
    const perRequest = (cpuSeconds) => Math.round((cpuSeconds * 1e6) / (r.rps * seconds));
    r.apiserverMicros = perRequest(cpuSecondsOf(apiserverPid) - apiserverBefore);
    const notes = [`apiserver CPU ${r.apiserverMicros} µs`];
    if (target.pid) {
      r.cpuMicros = perRequest(cpuSecondsOf(target.pid) - before);
      const who = target.pid === service.child.pid ? 'service' : 'kubectl proxy';
      notes.unshift(`CPU ${r.cpuMicros} µs per request (${who})`);
    }
    return row(label, r, notes.join(', '));
  }

  /**
   * Two ways in, measured in eight alternating slices (a, b, b, a, b, a, a, b) so that a drift of the
   * machine falls on both alike; returns each one's mean req/s.
   */
  async function inSlices(label, connections, ways) {
    const [a, b] = Object.keys(ways);
    const order = [a, b, b, a, b, a, a, b];
    const slice = Math.max(2, Math.ceil(SECONDS / 4)); // wrk takes whole seconds
    const mean = { [a]: 0, [b]: 0 };
    for (const name of order) {
      const [target, path] = ways[name];
      const r = await wrk(target.url + path, { connections, seconds: slice, headers: target.headers });
      mean[name] += r.rps / (order.length / 2);
    }
    console.log(
      `${label} in ${order.length} slices of ${slice} s (${order.join(', ')}): ` +
        `${Math.round(mean[a])} and ${Math.round(mean[b])} req/s`,
    );
    return mean;
  }

  async function resourceRound(round) {
    console.log(`\n— resource routes, round ${round}`);
    const getDirect = await measure('GET one 1 KiB ConfigMap, 32 conn: direct', direct, kubePath(ns, 'one'), 32);
    const getProxy = await measure(
      'GET one 1 KiB ConfigMap, 32 conn: kubectl proxy',
      viaProxy,
      kubePath(ns, 'one'),
      32,
    );
    const getKey = await measure('GET one 1 KiB ConfigMap, 32 conn: service, API key', viaKey, ourPath(ns, 'one'), 32);
    const getSession = await measure(
      'GET one 1 KiB ConfigMap, 32 conn: service, session',
      viaSession,
      ourPath(ns, 'one'),
      32,
    );
    // API key against session: both callers come from the ≤ 1 s caller cache, so what differs is the
    // look-up of the presented secret. Two 10 s runs one after the other differ by more than 5% on this
    // shared machine whichever goes first, and so did two 5 s slices each: hence eight (`inSlices`).
    const slices = await inSlices('GET, 32 conn, API key and session', 32, {
      key: [viaKey, ourPath(ns, 'one')],
      session: [viaSession, ourPath(ns, 'one')],
    });
    // The same for the service against the proxy: the 10 s measurements above run one after another, and
    // this machine has drifted by up to a third between two of them; the goal is read from the slices.
    const getSlices = await inSlices('GET, 32 conn, kubectl proxy and service (API key)', 32, {
      proxy: [viaProxy, kubePath(ns, 'one')],
      service: [viaKey, ourPath(ns, 'one')],
    });
    if (round === 1) {
      await measure('GET, 32 conn: kubectl proxy, client certificate', viaCertProxy, kubePath(ns, 'one'), 32);
      await measure('GET, 32 conn: service, client certificate', viaCertKey, ourPath(ns, 'one'), 32);
    }
    // The latency a caller sees, with nothing queued: one connection, one request at a time.
    const oneDirect = await measure('GET one 1 KiB ConfigMap, 1 conn: direct', direct, kubePath(ns, 'one'), 1, 5);
    const oneProxy = await measure('GET, 1 conn: kubectl proxy', viaProxy, kubePath(ns, 'one'), 1, 5);
    const oneKey = await measure('GET, 1 conn: service, API key', viaKey, ourPath(ns, 'one'), 1, 5);
    const listDirect = await measure('LIST 300 × 4 KiB ConfigMaps, 8 conn: direct', direct, kubePath(nsList), 8);
    const listProxy = await measure(
      'LIST 300 × 4 KiB ConfigMaps, 8 conn: kubectl proxy',
      viaProxy,
      kubePath(nsList),
      8,
    );
    const listKey = await measure('LIST 300 × 4 KiB ConfigMaps, 8 conn: service, API key', viaKey, ourPath(nsList), 8);
    const listSlices = await inSlices('LIST 300 × 4 KiB ConfigMaps, 8 conn, direct and service (API key)', 8, {
      direct: [direct, kubePath(nsList)],
      service: [viaKey, ourPath(nsList)],
    });
    const listProxySlices = await inSlices(
      'LIST 300 × 4 KiB ConfigMaps, 8 conn, kubectl proxy and service (API key)',
      8,
      {
        proxy: [viaProxy, kubePath(nsList)],
        service: [viaKey, ourPath(nsList)],
      },
    );
    const kubeGetSlices = await inSlices('Kubernetes path: GET, 32 conn, kubectl proxy and service (API key)', 32, {
      proxy: [viaProxy, kubePath(ns, 'one')],
      service: [viaKube, kubePath(ns, 'one')],
    });
    // The issue's own measure: the Kubernetes path against the resource route, so its ratio to kubectl proxy is theirs.
    const kubeRestSlices = await inSlices('GET, 32 conn, resource route and Kubernetes path (API key)', 32, {
      rest: [viaKey, ourPath(ns, 'one')],
      kube: [viaKube, kubePath(ns, 'one')],
    });
    const kubeListSlices = await inSlices(
      'Kubernetes path: LIST 300 × 4 KiB (kubectl get cm -o json), 8 conn, kubectl proxy and service (API key)',
      8,
      { proxy: [viaProxy, kubePath(nsList)], service: [viaKube, kubePath(nsList)] },
    );
    await measure(
      'GET /healthz on the service (framework floor), 32 conn',
      { url: service.base, headers: {} },
      '/healthz',
      32,
    );
    return {
      getDirect,
      getProxy,
      getKey,
      getSession,
      slices,
      getSlices,
      listSlices,
      listProxySlices,
      kubeGetSlices,
      kubeRestSlices,
      kubeListSlices,
      oneDirect,
      oneProxy,
      oneKey,
      listDirect,
      listProxy,
      listKey,
    };
  }

  const r1 = await resourceRound(1);

  // A 20 MiB list streamed to 16 callers at once: the service's RSS while it does.
  const bigCount = (await kubeRequest(cp, 'GET', kubePath(nsBig))).body.items.length;
  const beforeBig = await rssOf(service.child.pid);
  let peakBig = beforeBig;
  const sampler = setInterval(
    async () => (peakBig = Math.max(peakBig, await rssOf(service.child.pid).catch(() => 0))),
    20,
  );
  const big = await wrk(viaKey.url + ourPath(nsBig), { connections: 16, seconds: SECONDS, headers: viaKey.headers });
  clearInterval(sampler);
  const bigSize = Buffer.byteLength(JSON.stringify((await kubeRequest(cp, 'GET', kubePath(nsBig))).body));
  row(
    `LIST ${bigCount} × 8 KiB (${(bigSize / MIB).toFixed(1)} MiB), 16 conn: service`,
    big,
    `RSS +${mib(peakBig - beforeBig)} at peak`,
  );

  const afterFirst = await rssOf(service.child.pid);
  const r2 = await resourceRound(2);
  const afterSecond = await rssOf(service.child.pid);

  // ---------------------------------------------------------------- login storm beside resource GETs
  console.log('\n— a login storm (50 concurrent argon2id logins) beside resource GETs');
  const loginScript = join(tmp, 'login.lua');
  await writeFile(
    loginScript,
    `wrk.method = "POST"\nwrk.body = '{"username":"bench","password":"bench-password-1"}'\nwrk.headers["content-type"] = "application/json"\n`,
  );
  const quietGets = await wrk(viaKey.url + ourPath(ns, 'one'), { connections: 4, seconds: 5, headers: viaKey.headers });
  row('GET one ConfigMap, 4 conn, no logins', quietGets);
  const [storm, stormGets] = await Promise.all([
    wrk(`${service.base}/api/v1/auth/login`, { connections: 50, seconds: SECONDS, script: loginScript }),
    wrk(viaKey.url + ourPath(ns, 'one'), { connections: 4, seconds: SECONDS, headers: viaKey.headers }),
  ]);
  row('login, 50 conn (argon2id)', storm, '(429/503 past the argon2 queue count as errors)');
  row('GET one ConfigMap, 4 conn, during the login storm', stormGets);
  const quietAfter = await untilQuiet(service.child.pid);
  const afterAll = await rssOf(service.child.pid);
  const afterAllSettled = await settledRss(service.child.pid);
  await service.stop();
  await rm(dataDir, { recursive: true, force: true });
  return {
    ...{ r1, r2, peakBig, beforeBig, startRss, idleRss, afterAll, afterAllSettled, afterFirst, afterSecond },
    ...{ quietAfter, stormGets, proxies: [proxy, certProxy] },
  };
}

// ---------------------------------------------------------------- the admin plane with many users
async function usersBench(label, databaseUrl, insert, explain) {
  const dir = join(tmp, label);
  const s = await startService(
    {
      CAS_DATA_DIR: dir,
      DATABASE_URL: databaseUrl,
      CAS_BOOTSTRAP_USERNAME: 'bench',
      CAS_BOOTSTRAP_PASSWORD: 'bench-password-1',
    },
    label,
  );
  const t = (await s.api('POST', '/api/v1/auth/login', { body: { username: 'bench', password: 'bench-password-1' } }))
    .token;
  const started = Date.now();
  await insert();
  console.log(`\n— ${label}: ${USERS} users inserted in ${((Date.now() - started) / 1000).toFixed(1)} s`);
  const headers = { authorization: `Bearer ${t}` };
  const queries = [
    '?search=user4242&sortBy=name&sortOrder=asc&page=1&size=20',
    '?search=er99&role=viewer&sortBy=lastLoginAt&sortOrder=desc&page=3&size=50',
    '?sortBy=username&sortOrder=asc&page=2000&size=20',
  ];
  let worst = 0;
  for (const q of queries) {
    await wrk(`${s.base}/api/v1/admin/users/${q}`, { connections: 4, seconds: 2, headers });
    const r = await wrk(`${s.base}/api/v1/admin/users/${q}`, {
      connections: 4,
      seconds: Math.max(3, SECONDS / 2),
      headers,
    });
    row(`users list ${q}`, r);
    worst = Math.max(worst, r.p95);
  }
  console.log(await explain());
  await s.stop();
  return worst;
}

async function usersPart() {
  const sqlitePath = join(tmp, 'users-sqlite', 'cas.sqlite');
  const sqliteWorst = await usersBench(
    'SQLite',
    `sqlite:${sqlitePath}`,
    async () => {
      const db = new Database(sqlitePath);
      const viewer = db.prepare(`SELECT id FROM roles WHERE name = 'viewer'`).get().id;
      const user = db.prepare(
        `INSERT INTO users (username, username_key, provider, name, enabled, last_login_at) VALUES (?, ?, 'password', ?, 1, ?)`,
      );
      const role = db.prepare(`INSERT INTO user_roles (user_id, role_id) VALUES (?, ?)`);
      db.transaction(() => {
        for (let i = 0; i < USERS; i++) {
          const name = `user${i}`;
          const { lastInsertRowid } = user.run(
            name,
            name,
            `Person ${i}`,
            i % 3 ? new Date(Date.now() - i * 1000).toISOString().replace('T', ' ').replace('Z', '') : null,
          );
          role.run(lastInsertRowid, viewer);
        }
      })();
      db.close();
    },
    async () => {
      const db = new Database(sqlitePath, { readonly: true });
      const plan = db
        .prepare(
          `EXPLAIN QUERY PLAN SELECT u.id, COUNT(*) OVER () FROM users u WHERE (lower(u.username) LIKE '%user4242%' OR lower(u.name) LIKE '%user4242%') AND u.id IN (SELECT rowid FROM users_search WHERE users_search MATCH '"user4242"') ORDER BY lower(u.name) ASC, u.id ASC LIMIT 20`,
        )
        .all();
      db.close();
      return `SQLite plan (search + sort): ${plan.map((p) => p.detail).join('; ')}`;
    },
  );

  let pgWorst = NaN;
  if (process.env.BENCH_SKIP_POSTGRES !== '1') {
    const dbName = `cas_bench_${process.pid}`;
    const admin = new pg.Client({ connectionString: PG_URL });
    await admin.connect();
    await admin.query(`CREATE DATABASE ${dbName}`);
    await admin.end();
    const url = new URL(PG_URL);
    url.pathname = `/${dbName}`;
    const withDb = async (fn) => {
      const c = new pg.Client({ connectionString: url.toString() });
      await c.connect();
      try {
        return await fn(c);
      } finally {
        await c.end();
      }
    };
    pgWorst = await usersBench(
      'PostgreSQL',
      url.toString(),
      () =>
        withDb(async (c) => {
          await c.query(
            `INSERT INTO users (username, username_key, provider, name, enabled, last_login_at)
             SELECT 'user' || i, 'user' || i, 'password', 'Person ' || i, true,
                    CASE WHEN i % 3 = 0 THEN NULL ELSE now() - i * interval '1 second' END
               FROM generate_series(0, $1 - 1) AS i`,
            [USERS],
          );
          await c.query(
            `INSERT INTO user_roles (user_id, role_id) SELECT u.id, r.id FROM users u, roles r
              WHERE r.name = 'viewer' AND u.username LIKE 'user%'`,
          );
          // What autovacuum does within a minute of a bulk insert (PostgreSQL ≥ 13 vacuums after inserts too):
          // the visibility map then lets a deep page read its ids from the sort index alone.
          await c.query('VACUUM ANALYZE');
        }),
      () =>
        withDb(async (c) => {
          // The statements the service sends (users.service.ts, listOnPostgres): page, total and roles in one.
          const columns = `u.id, u.username, u.provider, u.name, u.enabled, u.last_login_at, u.created_at,
            (SELECT COALESCE(json_agg(json_build_object('id', r.id, 'name', r.name)), '[]')
               FROM user_roles ur INNER JOIN roles r ON r.id = ur.role_id WHERE ur.user_id = u.id) AS roles_json`;
          const byLogin = `CASE WHEN u.last_login_at IS NULL THEN 1 ELSE 0 END, u.last_login_at DESC, u.id DESC`;
          const matched = `id, username_key, name, created_at, last_login_at`;
          const plan = await c.query(
            `EXPLAIN ANALYZE SELECT ${columns}, page.total FROM users u INNER JOIN (
               SELECT u.id AS id, COUNT(*) OVER () AS total
                 FROM (SELECT ${matched} FROM users WHERE username_key LIKE '%er99%'
                       UNION SELECT ${matched} FROM users WHERE LOWER(name) LIKE '%er99%') u
                WHERE EXISTS (SELECT 1 FROM user_roles ur WHERE ur.user_id = u.id
                                 AND ur.role_id = (SELECT r.id FROM roles r WHERE r.name = 'viewer'))
                ORDER BY ${byLogin} LIMIT 50 OFFSET 100) page ON page.id = u.id
              ORDER BY ${byLogin}`,
          );
          const deep = await c.query(
            `EXPLAIN ANALYZE SELECT ${columns}, (SELECT n FROM user_count) AS total FROM users u
               INNER JOIN (SELECT u.id AS id FROM users u ORDER BY u.username_key COLLATE "C" ASC, u.id ASC LIMIT 20 OFFSET 39980) page
                 ON page.id = u.id
              ORDER BY u.username_key COLLATE "C" ASC, u.id ASC`,
          );
          const lines = (result) => result.rows.map((r) => r['QUERY PLAN']).join('\n  ');
          return (
            `PostgreSQL plan (search er99 + role + sort by last login, the query the service sends):\n  ${lines(plan)}\n` +
            `PostgreSQL plan (sortBy=username, page 2000: the ids from the sort index, then 20 rows):\n  ${lines(deep)}`
          );
        }),
    );
    const drop = new pg.Client({ connectionString: PG_URL });
    await drop.connect();
    await drop.query(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`);
    await drop.end();
  }
  return { sqliteWorst, pgWorst };
}

/**
 * Issue 33: 500 mixed documents (ConfigMaps, Secrets, Services, Deployments) in one POST /api/v1/apply against
 * `kubectl apply --server-side -f` of the same YAML stream, against the cluster directly (bearer token both),
 * each into a fresh namespace of its own: the first apply (all created), the same again (all unchanged), and the
 * service's dry run of it. Wall time of the whole call, kubectl's start included.
 */
async function applyPart() {
  const [nsKubectl, nsService] = [`bench-apply-k-${process.pid}`, `bench-apply-s-${process.pid}`];
  for (const n of [nsKubectl, nsService])
    await kubeRequest(cp, 'POST', '/api/v1/namespaces', { metadata: { name: n } });
  cleanups.push(() =>
    Promise.all([nsKubectl, nsService].map((n) => kubeRequest(cp, 'DELETE', `/api/v1/namespaces/${n}`))),
  );
  const docs = [];
  for (let i = 0; i < 125; i++) {
    const labels = { app: `app-${i}` };
    docs.push(
      `apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings-${i}\n  labels: {app: app-${i}}\ndata:\n  mode: fast\n  size: "${i}"\n`,
      `apiVersion: v1\nkind: Secret\nmetadata:\n  name: creds-${i}\nstringData:\n  password: pw-${i}\n`,
      `apiVersion: v1\nkind: Service\nmetadata:\n  name: web-${i}\nspec:\n  selector: {app: app-${i}}\n  ports:\n    - port: 80\n      protocol: TCP\n`,
      [
        'apiVersion: apps/v1',
        'kind: Deployment',
        'metadata:',
        `  name: web-${i}`,
        'spec:',
        '  replicas: 1',
        `  selector: {matchLabels: ${JSON.stringify(labels)}}`,
        '  template:',
        `    metadata: {labels: ${JSON.stringify(labels)}}`,
        '    spec:',
        '      containers:',
        '        - name: web',
        '          image: example.invalid/web:1',
        '',
      ].join('\n'),
    );
  }
  const stream = docs.join('---\n');
  const file = join(tmp, 'apply-500.yaml');
  await writeFile(file, stream);

  const service = await startService(
    { CAS_DATA_DIR: join(tmp, 'apply'), CAS_BOOTSTRAP_USERNAME: 'bench', CAS_BOOTSTRAP_PASSWORD: 'bench-password-1' },
    'the service (apply)',
  );
  const { token } = await service.api('POST', '/api/v1/auth/login', {
    body: { username: 'bench', password: 'bench-password-1' },
  });
  await service.api('POST', '/api/v1/admin/clusters', {
    token,
    body: { name: 'bench', config: kubeconfigFor(cp, { token: cp.adminToken }) },
  });
  const timed = async (work) => {
    const started = performance.now();
    const out = await work();
    return { ms: performance.now() - started, out };
  };
  const byKubectl = () =>
    timed(() =>
      execFileSync(
        kubectl,
        [
          '--kubeconfig',
          cp.kubeconfigPath,
          '--context',
          'admin-token',
          'apply',
          '--server-side',
          '-n',
          nsKubectl,
          '-f',
          file,
        ],
        { encoding: 'utf8', env: { ...process.env, HOME: join(tmp, 'kubectl-home') } },
      ),
    );
  const byService = (query = '') =>
    timed(async () => {
      const res = await fetch(`${service.base}/api/v1/apply?namespace=${nsService}${query}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'x-cluster-name': 'bench', 'content-type': 'application/yaml' },
        body: stream,
      });
      const body = await res.json();
      if (res.status !== 200) throw new Error(`apply: ${res.status} ${JSON.stringify(body).slice(0, 300)}`);
      const actions = {};
      for (const r of body.results) actions[r.action] = (actions[r.action] ?? 0) + 1;
      return actions;
    });
  const kubectlFirst = await byKubectl();
  const serviceFirst = await byService();
  const kubectlAgain = await byKubectl();
  const serviceAgain = await byService();
  const serviceDry = await byService('&dryRun=All');
  const lines = (text) => text.trim().split('\n').length;
  console.log(
    `apply 500 documents (${Math.round(stream.length / 1024)} KiB of YAML): kubectl --server-side ${Math.round(kubectlFirst.ms)} ms ` +
      `(${lines(kubectlFirst.out)} lines), again ${Math.round(kubectlAgain.ms)} ms; the service ${Math.round(serviceFirst.ms)} ms ` +
      `${JSON.stringify(serviceFirst.out)}, again ${Math.round(serviceAgain.ms)} ms ${JSON.stringify(serviceAgain.out)}, ` +
      `dry run ${Math.round(serviceDry.ms)} ms ${JSON.stringify(serviceDry.out)}`,
  );
  await service.stop();
  return { kubectlFirst, serviceFirst, kubectlAgain, serviceAgain };
}

/**
 * Issue 32, lists for consoles: 20,000 ConfigMaps of ~1 KiB in 20 namespaces. A page of 50 from `_all`
 * sorted by creationTimestamp descending with a search, at 8 connections, against what a console does
 * today (a direct LIST of all 20,000, which it would then sort itself); the cache's RSS growth against
 * the JSON size of what it holds; change → page and change → CHANGED latency; search over 3 clusters.
 * `BENCH_PARTS=lists` runs it alone.
 */
async function listsPart() {
  const COUNT = Number(process.env.BENCH_LIST_OBJECTS ?? 20_000);
  const NAMESPACES = 20;
  const prefix = `bench-lists-${process.pid}`;
  const namespaces = Array.from({ length: NAMESPACES }, (_, i) => `${prefix}-${i}`);
  for (const n of namespaces) await kubeRequest(cp, 'POST', '/api/v1/namespaces', { metadata: { name: n } });
  cleanups.push(() => Promise.all(namespaces.map((n) => kubeRequest(cp, 'DELETE', `/api/v1/namespaces/${n}`))));
  const created = Date.now();
  const value = 'x'.repeat(900);
  let next = 0;
  await Promise.all(
    Array.from({ length: 16 }, async () => {
      for (let i = next++; i < COUNT; i = next++) {
        const res = await kubeRequest(cp, 'POST', `/api/v1/namespaces/${namespaces[i % NAMESPACES]}/configmaps`, {
          metadata: { name: `cm-${i}`, labels: { app: ['web', 'api', 'db', 'cache'][i % 4], shard: String(i % 10) } },
          data: { value },
        });
        if (res.status !== 201) throw new Error(`create cm-${i}: ${res.status}`);
      }
    }),
  );
  console.log(`lists: ${COUNT} ConfigMaps created in ${((Date.now() - created) / 1000).toFixed(0)} s (16 in flight)`);

  const service = await startService(
    {
      CAS_DATA_DIR: join(tmp, 'sqlite-lists'),
      CAS_BOOTSTRAP_USERNAME: 'bench',
      CAS_BOOTSTRAP_PASSWORD: 'bench-password-1',
    },
    'the service (lists)',
  );
  const { token } = await service.api('POST', '/api/v1/auth/login', {
    body: { username: 'bench', password: 'bench-password-1' },
  });
  for (const name of ['lists-1', 'lists-2', 'lists-3']) {
    await service.api('POST', '/api/v1/admin/clusters', {
      token,
      body: { name, config: kubeconfigFor(cp, { token: cp.adminToken }) },
    });
  }
  const auth = { authorization: `Bearer ${token}`, 'x-cluster-name': 'lists-1' };
  const pageQuery = 'page=1&size=50&sortBy=metadata.creationTimestamp&sortOrder=desc&search=cm-1';
  const pagePath = `/api/v1/configmaps/_all?${pageQuery}`;

  // The JSON size of what the cache holds: every object as a watch sends it (with apiVersion and kind).
  const all = await kubeRequest(cp, 'GET', '/api/v1/configmaps', undefined, { timeoutMs: 120_000 });
  let jsonBytes = 0;
  for (const item of all.body.items) {
    jsonBytes += Buffer.byteLength(JSON.stringify({ apiVersion: 'v1', kind: 'ConfigMap', ...item }));
  }
  await service.api('GET', '/api/v1/configmaps/_all?page=1&size=1', { token, cluster: 'lists-2' }); // warm the code path
  await new Promise((r) => setTimeout(r, 2000));
  const rssBefore = await settledRss(service.child.pid);
  const filled = Date.now();
  const first = await service.api('GET', pagePath, { token, cluster: 'lists-1' });
  const fillMs = Date.now() - filled;
  await service.api('GET', pagePath.replace('sortOrder=desc', 'sortOrder=asc'), { token, cluster: 'lists-1' });
  const rssAfter = await settledRss(service.child.pid);
  console.log(
    `lists: first page (list ${all.body.items.length} objects into the cache) ${fillMs} ms; total ${first.total}; ` +
      `cache JSON ${mib(jsonBytes)}, RSS ${mib(rssBefore)} → ${mib(rssAfter)} (+${mib(rssAfter - rssBefore)})`,
  );

  const direct = { authorization: `Bearer ${cp.adminToken}`, accept: 'application/json' };
  const page = row(
    'page of 50, _all sorted by creationTimestamp desc + search, 8 conn',
    await wrk(service.base + pagePath, { connections: 8, headers: auth }),
  );
  // Change → page: a label set straight on the cluster, then the page polled until it shows it.
  const changeMs = [];
  for (let i = 0; i < 200; i++) {
    const ns = namespaces[i % NAMESPACES];
    const at = Date.now();
    await kubeRequest(
      cp,
      'PATCH',
      `/api/v1/namespaces/${ns}/configmaps/cm-${i % NAMESPACES}`,
      {
        metadata: { labels: { mark: `p${process.pid}-m${i}` } },
      },
      { contentType: 'application/merge-patch+json' },
    );
    for (;;) {
      const res = await service.api(
        'GET',
        `/api/v1/configmaps/_all?page=1&size=1&labelSelector=mark%3Dp${process.pid}-m${i}`,
        {
          token,
          cluster: 'lists-1',
        },
      );
      if (res.total === 1) break;
      if (Date.now() - at > 10_000) break; // counted as 10 s
      await new Promise((r) => setTimeout(r, 5));
    }
    changeMs.push(Date.now() - at);
  }
  changeMs.sort((a, b) => a - b);
  const changeP99 = changeMs[Math.floor(changeMs.length * 0.99) - 1];
  console.log(
    `lists: change → page over 200 changes: p50 ${changeMs[100]} ms, p99 ${changeP99} ms, max ${changeMs.at(-1)} ms`,
  );

  // Change → CHANGED notice.
  const noticeMs = [];
  const controller = new AbortController();
  const res = await fetch(
    `${service.base}/api/v1/configmaps/_all?watch=true&page=1&labelSelector=notice%3Dp${process.pid}`,
    {
      headers: auth,
      signal: controller.signal,
    },
  );
  const reader = res.body.getReader();
  let waiting;
  void (async () => {
    for (;;) {
      const { done } = await reader.read().catch(() => ({ done: true }));
      if (done) return;
      waiting?.();
    }
  })();
  for (let i = 0; i < 10; i++) {
    await new Promise((r) => setTimeout(r, 1100));
    const at = Date.now();
    const seen = new Promise((resolve) => (waiting = resolve));
    // The same object in and out of the query's result: each change alters the page.
    await kubeRequest(
      cp,
      'PATCH',
      `/api/v1/namespaces/${namespaces[0]}/configmaps/cm-0`,
      {
        metadata: { labels: { notice: i % 2 ? 'no' : `p${process.pid}` } },
      },
      { contentType: 'application/merge-patch+json' },
    );
    await seen;
    noticeMs.push(Date.now() - at);
  }
  controller.abort();
  console.log(`lists: change → CHANGED over 10 changes: max ${Math.max(...noticeMs)} ms (${noticeMs.join(', ')})`);

  // Last: the direct LISTs load the apiserver for a while after (what it is still sending to wrk's closed
  // connections); the latencies above are measured before it.
  const directList = row(
    `direct LIST of all ${COUNT} ConfigMaps, 8 conn (a console today)`,
    await wrk(`${cp.server}/api/v1/configmaps`, { connections: 8, headers: direct, seconds: Math.max(SECONDS, 15) }),
  );

  // Search across 3 clusters × 6 types (the same apiserver registered three times: three sets of caches).
  const types = 'configmaps,namespaces,pods,services,secrets,serviceaccounts';
  const searchPath = `/api/v1/search?q=cm-1999&clusters=lists-1,lists-2,lists-3&resources=${types}&size=50`;
  const warm = await service.api('GET', searchPath, { token });
  const search = row(
    `search across 3 clusters × 6 types (${warm.total} matches), 8 conn`,
    await wrk(service.base + searchPath, { connections: 8, headers: { authorization: `Bearer ${token}` } }),
  );
  await service.stop();
  return { page, directList, jsonBytes, rssBefore, rssAfter, changeP99, noticeMax: Math.max(...noticeMs), search };
}

/**
 * Issue 31: 100 interactive exec sessions on one replica each echo a line (20 rounds) while another
 * session streams output; the p50/p95/p99 of the echo round trips and the service's RSS growth. Two
 * processes of their own besides the service and the control plane: the load generator
 * (scripts/bench-terminal-load.mjs: the sessions, the stream's reader, the timing) and the test kubelet
 * (scripts/bench-kubelet.mjs: the shells and the stream, behind the real apiserver); this one only keeps
 * the books (RSS, CPU, the service's event-loop delay from its /metrics).
 *
 * The stream runs from before the first echo until after the last, 50 MiB at a time, again and again. Two
 * shapes: `interactive`, the goal's (rounds of 1 s, each session sending at a moment of its own within the
 * round, as people type) and `burst` (every session at once, each next line as soon as its echo is back).
 * Then, to split the time: the service's sessions with the stream going straight to the apiserver (the
 * machine as loaded, the service not carrying it) and with no stream; and the same sessions straight to
 * the apiserver's exec URL (the control plane's admin token), the same kubelet behind it.
 */
async function terminalPart() {
  const SESSIONS = Number(process.env.BENCH_TERMINAL_SESSIONS ?? 100);
  const ROUNDS = 20;
  const FLOOD = 50 * MIB;
  const METRICS_TOKEN = `bench-metrics-${process.pid}-0123456789abcdef`;
  const dataDir = await mkdtemp(join(tmp, 'term-'));
  const service = await startService(
    {
      CAS_DATA_DIR: dataDir,
      CAS_BOOTSTRAP_USERNAME: 'admin',
      CAS_BOOTSTRAP_PASSWORD: 'bench-password-1',
      CAS_EXEC_MAX_SESSIONS_PER_CALLER: String(SESSIONS + 10),
      CAS_METRICS_TOKEN: METRICS_TOKEN,
    },
    'service (terminal)',
  );
  const { token } = await service.api('POST', '/api/v1/auth/login', {
    body: { username: 'admin', password: 'bench-password-1' },
  });
  await service.api('POST', '/api/v1/admin/clusters', { token, body: { name: 'bench', config: kubeconfigFor(cp) } });
  const ns = `bench-term-${process.pid}`;
  const nodeName = `bench-term-node-${process.pid}`;
  await kubeRequest(cp, 'POST', '/api/v1/namespaces', { metadata: { name: ns } });
  const kubelet = fork('scripts/bench-kubelet.mjs', [cp.dir, nodeName], {
    stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
  });
  children.push(kubelet);
  await new Promise((resolve, reject) => {
    kubelet.once('message', resolve);
    kubelet.once('exit', (code) => reject(new Error(`the test kubelet exited (${code}) before it was ready`)));
  });
  cleanups.push(async () => {
    if (kubelet.exitCode === null) {
      kubelet.send('stop');
      await new Promise((r) => kubelet.once('exit', r));
    }
    await kubeRequest(cp, 'DELETE', `/api/v1/namespaces/${ns}`);
  });
  await kubeRequest(cp, 'POST', `/api/v1/namespaces/${ns}/pods`, {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: 'box', namespace: ns },
    spec: { nodeName, automountServiceAccountToken: false, containers: [{ name: 'app', image: 'example.invalid/x' }] },
  });
  const load = fork('scripts/bench-terminal-load.mjs', [], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  children.push(load);
  const ask = (message) =>
    new Promise((resolve, reject) => {
      load.once('message', (answer) => (answer.error ? reject(new Error(answer.error)) : resolve(answer)));
      load.send(message);
    });
  const exec = 'exec?command=sh&stdin=true&stdout=true';
  const viaService = {
    url: `${service.base.replace(/^http/, 'ws')}/api/v1/pods/${ns}/box/${exec}&cluster=bench`,
    headers: { authorization: `Bearer ${token}` },
  };
  const direct = {
    url: `${cp.server.replace(/^https/, 'wss')}/api/v1/namespaces/${ns}/pods/box/${exec}`,
    headers: { authorization: `Bearer ${cp.adminToken}` },
    ca: cp.caData,
  };
  const pids = {
    service: service.child.pid,
    apiserver: JSON.parse(readFileSync(join(cp.dir, 'info.json'), 'utf8')).pids.apiserver,
    kubelet: kubelet.pid,
    load: load.pid,
  };
  /** The service's event-loop delay since the last read (prom-client resets it on every scrape), in ms. */
  const loopDelay = async () => {
    const res = await fetch(`${service.base}/metrics`, { headers: { authorization: `Bearer ${METRICS_TOKEN}` } });
    const text = await res.text();
    const ms = (name) =>
      Number(new RegExp(`^nodejs_eventloop_lag_${name}_seconds ([0-9.e+-]+)$`, 'm').exec(text)?.[1]) * 1000;
    return { p99: ms('p99'), max: ms('max') };
  };
  const q = (sorted, p) => sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))];
  const measure = async (label, shape, flood, floodVia) => {
    await loopDelay();
    const cpuBefore = Object.fromEntries(Object.entries(pids).map(([k, pid]) => [k, cpuSecondsOf(pid)]));
    const started = Date.now();
    const m = await ask({ measure: { shape, rounds: ROUNDS, flood, floodVia } });
    const seconds = (Date.now() - started) / 1000;
    const loop = await loopDelay();
    const cpu = Object.entries(pids)
      .map(([k, pid]) => `${k} ${Math.round(((cpuSecondsOf(pid) - cpuBefore[k]) / seconds) * 100)}`)
      .join(', ');
    const sorted = m.latencies.sort((a, b) => a - b);
    const r = { p50: q(sorted, 0.5), p95: q(sorted, 0.95), p99: q(sorted, 0.99), max: sorted.at(-1), flood: m.flood };
    const stream = m.flood
      ? `the stream: first ${mib(flood)} in ${(m.flood.firstMs / 1000).toFixed(1)} s, ` +
        `${mib(m.flood.bytes)} in ${m.flood.seconds.toFixed(1)} s; `
      : '';
    // The event-loop monitor ticks every 20 ms: a delay is what a tick came later than that.
    console.log(
      `${label.padEnd(42)} p50 ${r.p50.toFixed(1).padStart(5)}  p95 ${r.p95.toFixed(1).padStart(5)}  ` +
        `p99 ${r.p99.toFixed(1).padStart(5)}  max ${r.max.toFixed(1).padStart(5)} ms (${sorted.length} in ` +
        `${m.echoSeconds.toFixed(1)} s); ${stream}CPU % of a core: ${cpu}; service event-loop delay ` +
        `p99 ${Math.max(0, loop.p99 - 20).toFixed(0)}, max ${Math.max(0, loop.max - 20).toFixed(0)} ms`,
    );
    return r;
  };

  // Warm the service's path, let it settle, then the baseline.
  await ask({ open: { ...viaService, sessions: 1 } });
  await ask('close');
  await new Promise((r) => setTimeout(r, 2000));
  const before = await rssOf(service.child.pid);
  let peak = before;
  const sampler = setInterval(async () => (peak = Math.max(peak, await rssOf(service.child.pid))), 200);
  console.log(
    `terminal: ${SESSIONS} exec sessions (\`sh\` in the test kubelet) × ${ROUNDS} echoes, round trips in ms; ` +
      `one more session streams output (load ${os.loadavg()[0].toFixed(1)})`,
  );
  await ask({ open: { ...viaService, sessions: SESSIONS } });
  const opened = await rssOf(service.child.pid);
  const interactive = await measure('via the service, interactive, stream too', 'interactive', FLOOD);
  const burst = await measure('via the service, burst, stream too', 'burst', FLOOD);
  clearInterval(sampler);
  console.log(
    `terminal: the service's RSS ${mib(before)} → ${mib(opened)} with the sessions open → peak ${mib(peak)} ` +
      `(load ${os.loadavg()[0].toFixed(1)}); the time split:`,
  );
  await measure('via the service, interactive, stream direct', 'interactive', FLOOD, direct);
  await measure('via the service, interactive, no stream', 'interactive', 0);
  await ask('close');
  await ask({ open: { ...direct, sessions: SESSIONS } });
  await measure('direct, interactive, stream direct', 'interactive', FLOOD);
  await measure('direct, interactive, no stream', 'interactive', 0);
  await ask('close');
  load.disconnect();
  await service.stop();
  const flooded = Math.min(...[interactive, burst].map((r) => (r.flood.firstMs === undefined ? 0 : r.flood.bytes)));
  return { interactive, burst, growth: peak - before, flooded, sessions: SESSIONS };
}
/**
 * Issue 42: 1,000 Helm releases × 3 revisions (Helm's storage Secrets, written here as Helm's storage driver
 * writes them) and one release whose manifest is 1 MiB, on one cluster: a page of 50 of `_all` sorted by
 * `updated`, the big release's detail once cached, and `helm list -A -o json` (helm 3.17, ensure-layer.sh 30)
 * against the same apiserver; the cache's RSS against the decoded JSON it holds.
 */
async function helmPart() {
  const RELEASES = Number(process.env.BENCH_HELM_RELEASES ?? 1000);
  const REVISIONS = 3;
  const NAMESPACES = 10;
  const helm = `${execFileSync('bash', ['scripts/kube/ensure-layer.sh', '30'], { encoding: 'utf8' }).trim()}/helm`;
  const prefix = `bench-helm-${process.pid}`;
  const namespaces = Array.from({ length: NAMESPACES }, (_, i) => `${prefix}-${i}`);
  for (const n of namespaces) await kubeRequest(cp, 'POST', '/api/v1/namespaces', { metadata: { name: n } });
  cleanups.push(() => Promise.all(namespaces.map((n) => kubeRequest(cp, 'DELETE', `/api/v1/namespaces/${n}`))));
  const { gzipSync } = await import('node:zlib');
  const { randomBytes } = await import('node:crypto');
  let decodedBytes = 0;
  const secretOf = (namespace, name, version, status, manifest, at) => {
    const release = {
      name,
      namespace,
      version,
      info: {
        first_deployed: new Date(at - version * 60_000).toISOString(),
        last_deployed: new Date(at).toISOString(),
        deleted: '',
        description: version === 1 ? 'Install complete' : 'Upgrade complete',
        status,
        notes: `Release ${name}: visit http://${name}.${namespace}/`,
      },
      chart: {
        metadata: { apiVersion: 'v2', name: `chart-${name.length % 7}`, version: `1.${version}.0`, appVersion: '2.0' },
        templates: [{ name: 'templates/cm.yaml', data: Buffer.from('kind: ConfigMap').toString('base64') }],
        values: { replicas: 1, image: { repository: 'nginx', tag: '1.25' } },
      },
      config: { replicas: version },
      manifest,
      hooks: [],
    };
    const json = JSON.stringify(release);
    decodedBytes += Buffer.byteLength(json);
    const helmData = gzipSync(Buffer.from(json)).toString('base64');
    return {
      metadata: {
        name: `sh.helm.release.v1.${name}.v${version}`,
        labels: { owner: 'helm', name, version: String(version), status, modifiedAt: String(Math.floor(at / 1000)) },
      },
      type: 'helm.sh/release.v1',
      data: { release: Buffer.from(helmData).toString('base64') },
    };
  };
  const smallManifest = (name) =>
    ['service', 'deployment', 'configmap']
      .map(
        (what) =>
          `---\n# Source: chart/templates/${what}.yaml\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ${name}-${what}\n  labels:\n    app: ${name}\ndata:\n  value: "${'x'.repeat(400)}"\n`,
      )
      .join('');
  const created = Date.now();
  const jobs = [];
  for (let r = 0; r < RELEASES; r++) {
    for (let v = 1; v <= REVISIONS; v++) {
      jobs.push([
        namespaces[r % NAMESPACES],
        `rel-${r}`,
        v,
        v === REVISIONS ? 'deployed' : 'superseded',
        null,
        created - (RELEASES - r) * 1000 + v,
      ]);
    }
  }
  // The big one: 1 MiB of manifest (objects with random values: it compresses as real manifests do, not to nothing).
  let big = '';
  for (let i = 0; Buffer.byteLength(big) < MIB; i++) {
    big += `---\n# Source: big/templates/cm.yaml\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: big-${i}\ndata:\n  key: "${randomBytes(24).toString('hex')}"\n  text: "${'lorem ipsum dolor sit amet '.repeat(8)}"\n`;
  }
  jobs.push([namespaces[0], 'big', 1, 'deployed', big, created]);
  let next = 0;
  await Promise.all(
    Array.from({ length: 16 }, async () => {
      for (let i = next++; i < jobs.length; i = next++) {
        const [ns, name, version, status, manifest, at] = jobs[i];
        const body = secretOf(ns, name, version, status, manifest ?? smallManifest(name), at);
        const res = await kubeRequest(cp, 'POST', `/api/v1/namespaces/${ns}/secrets`, body);
        if (res.status !== 201)
          throw new Error(`create ${name}.v${version}: ${res.status} ${JSON.stringify(res.body)}`);
      }
    }),
  );
  console.log(
    `\n— helm: ${jobs.length} release Secrets (${RELEASES} releases × ${REVISIONS}, and one of a 1 MiB manifest) created in ` +
      `${((Date.now() - created) / 1000).toFixed(0)} s; ${mib(decodedBytes)} of release JSON once decoded`,
  );

  const service = await startService(
    {
      CAS_DATA_DIR: join(tmp, 'sqlite-helm'),
      CAS_BOOTSTRAP_USERNAME: 'bench',
      CAS_BOOTSTRAP_PASSWORD: 'bench-password-1',
      CAS_HELM_BINARY: helm,
    },
    'the service (helm)',
  );
  const { token } = await service.api('POST', '/api/v1/auth/login', {
    body: { username: 'bench', password: 'bench-password-1' },
  });
  await service.api('POST', '/api/v1/admin/clusters', {
    token,
    body: { name: 'helm-1', config: kubeconfigFor(cp, { token: cp.adminToken }) },
  });
  const auth = { authorization: `Bearer ${token}`, 'x-cluster-name': 'helm-1' };
  const pagePath = '/api/v1/helm/releases/_all?page=1&size=50&sortBy=updated&sortOrder=desc';
  const detailPath = `/api/v1/helm/releases/${namespaces[0]}/big`;
  await service.api('GET', '/api/v1/configmaps/_all?page=1&size=1', { token, cluster: 'helm-1' }); // warm the code path
  await new Promise((r) => setTimeout(r, 2000));
  const rssBefore = await settledRss(service.child.pid);
  const filled = Date.now();
  const first = await service.api('GET', pagePath, { token, cluster: 'helm-1' });
  const fillMs = Date.now() - filled;
  const detail = await service.api('GET', detailPath, { token, cluster: 'helm-1' });
  // Every revision decoded: the history of each release read once.
  const decodeAll = Date.now();
  for (let r = 0; r < RELEASES; r++) {
    await service.api('GET', `/api/v1/helm/releases/${namespaces[r % NAMESPACES]}/rel-${r}/history`, {
      token,
      cluster: 'helm-1',
    });
  }
  const historiesMs = Date.now() - decodeAll;
  const rssAfter = await settledRss(service.child.pid);
  console.log(
    `helm: first page (list and decode into the cache) ${fillMs} ms, total ${first.total}; every history read once ` +
      `${historiesMs} ms; big manifest ${mib(Buffer.byteLength(detail.manifest))}; ` +
      `RSS ${mib(rssBefore)} → ${mib(rssAfter)} (+${mib(rssAfter - rssBefore)}) for ${mib(decodedBytes)} of decoded JSON`,
  );
  const page = row(
    'helm: page of 50 of _all sorted by updated, 8 conn',
    await wrk(service.base + pagePath, { connections: 8, headers: auth }),
  );
  const detailRow = row(
    'helm: detail of a release with a 1 MiB manifest, 8 conn',
    await wrk(service.base + detailPath, { connections: 8, headers: auth }),
  );

  // helm itself: `helm list -A -o json` against the same apiserver (the control plane's admin certificate).
  const kubeconfig = join(tmp, 'helm-kubeconfig');
  await writeFile(kubeconfig, kubeconfigFor(cp, { token: cp.adminToken }));
  const home = join(tmp, 'helm-home');
  const runs = [];
  const until = Date.now() + SECONDS * 1000;
  while (Date.now() < until || runs.length < 3) {
    const at = Date.now();
    const out = execFileSync(helm, ['list', '-A', '-o', 'json', '--max', '0', '--kubeconfig', kubeconfig], {
      env: { PATH: process.env.PATH, HOME: home },
      maxBuffer: 256 * MIB,
      encoding: 'utf8',
    });
    runs.push(Date.now() - at);
    if (runs.length === 1) console.log(`helm: helm list -A -o json lists ${JSON.parse(out).length} releases`);
  }
  const helmRps = runs.length / (runs.reduce((a, b) => a + b, 0) / 1000);
  console.log(
    `helm: helm list -A -o json (one at a time) ${runs.length} runs, ${helmRps.toFixed(2)} per s, median ${runs.sort((a, b) => a - b)[runs.length >> 1]} ms`,
  );
  await service.stop();
  return { page, detail: detailRow, helmRps, decodedBytes, rssBefore, rssAfter };
}

const resources = PARTS.has('resources') ? await resourcesPart() : undefined;
const lists = PARTS.has('lists') ? await listsPart() : undefined;
const users = PARTS.has('users') ? await usersPart() : undefined;
const applied = PARTS.has('apply') ? await applyPart() : undefined;
const terminal = PARTS.has('terminal') ? await terminalPart() : undefined;
const helmed = PARTS.has('helm') ? await helmPart() : undefined;

// ---------------------------------------------------------------- goals
if (resources) {
  const { r1, r2, peakBig, beforeBig, startRss, idleRss, afterAll, afterAllSettled, afterFirst, afterSecond } =
    resources;
  const { stormGets, quietAfter } = resources;
  for (const [i, r] of [r1, r2].entries()) {
    console.log(
      `round ${i + 1}: CPU per GET, service ${Math.round(r.getKey.cpuMicros)} µs (API key), ` +
        `${Math.round(r.getSession.cpuMicros)} µs (session); kubectl proxy ${Math.round(r.getProxy.cpuMicros)} µs`,
    );
    const getRatio = r.getSlices.service / r.getSlices.proxy;
    goal(
      `round ${i + 1}: GET at 32 conn ≥ 1.0× kubectl proxy (in slices)`,
      getRatio >= 1,
      `${getRatio.toFixed(2)}× (one 10 s run each: ${(r.getKey.rps / r.getProxy.rps).toFixed(2)}×)`,
    );
    goal(
      `round ${i + 1}: added p50 over direct ≤ 3 ms (32 conn)`,
      r.getKey.p50 - r.getDirect.p50 <= 3,
      `${(r.getKey.p50 - r.getDirect.p50).toFixed(2)} ms`,
    );
    // At 32 connections on two saturated cores a p50 is a queue: connections ÷ throughput (Little's law).
    // The time the hop itself adds to a request is the difference with nothing queued.
    goal(
      `round ${i + 1}: added p50 over direct ≤ 3 ms (1 conn, nothing queued)`,
      r.oneKey.p50 - r.oneDirect.p50 <= 3,
      `${(r.oneKey.p50 - r.oneDirect.p50).toFixed(2)} ms (kubectl proxy ${(r.oneProxy.p50 - r.oneDirect.p50).toFixed(2)} ms)`,
    );
    const listRatio = r.listSlices.service / r.listSlices.direct;
    goal(
      `round ${i + 1}: LIST 300 × 4 KiB at 8 conn ≥ 0.9× direct (in slices)`,
      listRatio >= 0.9,
      `${listRatio.toFixed(2)}× (one 10 s run each: ${(r.listKey.rps / r.listDirect.rps).toFixed(2)}×; ` +
        `kubectl proxy ${(r.listProxy.rps / r.listDirect.rps).toFixed(2)}×)`,
    );
    const listProxyRatio = r.listProxySlices.service / r.listProxySlices.proxy;
    goal(
      `round ${i + 1}: LIST 300 × 4 KiB at 8 conn ≥ 0.9× kubectl proxy (in slices)`,
      listProxyRatio >= 0.9,
      `${listProxyRatio.toFixed(2)}×`,
    );
    const kubeGetRatio = r.kubeGetSlices.service / r.kubeGetSlices.proxy;
    goal(
      `round ${i + 1}: Kubernetes path GET at 32 conn ≥ 1.0× kubectl proxy (in slices)`,
      kubeGetRatio >= 1,
      `${kubeGetRatio.toFixed(2)}×`,
    );
    const kubeRestRatio = r.kubeRestSlices.kube / r.kubeRestSlices.rest;
    goal(
      `round ${i + 1}: Kubernetes path GET ≥ 0.95× the resource route's GET (in slices; the same ratio to kubectl proxy)`,
      kubeRestRatio >= 0.95,
      `${kubeRestRatio.toFixed(2)}× (${Math.round(r.kubeRestSlices.kube)} and ${Math.round(r.kubeRestSlices.rest)} req/s)`,
    );
    const kubeListRatio = r.kubeListSlices.service / r.kubeListSlices.proxy;
    goal(
      `round ${i + 1}: Kubernetes path LIST 300 × 4 KiB at 8 conn ≥ 0.9× kubectl proxy (in slices)`,
      kubeListRatio >= 0.9,
      `${kubeListRatio.toFixed(2)}×`,
    );
    goal(
      `round ${i + 1}: API key and session within 5% of each other (both served from the ≤1 s caller cache; in slices)`,
      Math.min(r.slices.key, r.slices.session) >= 0.95 * Math.max(r.slices.key, r.slices.session),
      `key ${Math.round(r.slices.key)}, session ${Math.round(r.slices.session)} req/s`,
    );
  }
  goal('20 MiB list to 16 callers grows RSS ≤ 64 MiB', peakBig - beforeBig <= 64 * MIB, `+${mib(peakBig - beforeBig)}`);
  goal('idle RSS ≤ 150 MiB (30 s after start, no request yet)', idleRss <= 150 * MIB, mib(idleRss));
  goal(
    'RSS after the benchmark ≤ 1.5× idle (once the work in flight is done, against 2 s after start; and both after 30 s quiet)',
    afterAll <= 1.5 * startRss && afterAllSettled <= 1.5 * idleRss,
    `once quiet ${mib(afterAll)} (${(afterAll / startRss).toFixed(2)}× ${mib(startRss)}), 30 s later ${mib(afterAllSettled)} ` +
      `(${(afterAllSettled / idleRss).toFixed(2)}× ${mib(idleRss)})`,
  );
  goal(
    'a second identical round does not grow RSS',
    afterSecond <= afterFirst * 1.05,
    `${mib(afterFirst)} → ${mib(afterSecond)}`,
  );
  goal(
    'resource GET p99 during a 50-login storm ≤ 50 ms',
    stormGets.rps > 0 && stormGets.p99 <= 50,
    `${stormGets.p99.toFixed(1)} ms at ${Math.round(stormGets.rps)} req/s`,
  );

  console.log(
    `\nRSS of the service: 2 s after start ${mib(startRss)}, idle (30 s) ${mib(idleRss)}, after round 1 + big list ` +
      `${mib(afterFirst)}, after round 2 ${mib(afterSecond)}, after all ${mib(afterAll)} (read ${quietAfter} ms after the storm, once the service's CPU had gone quiet; ` +
      `30 s later ${mib(afterAllSettled)})`,
  );
}
if (users) {
  const { sqliteWorst, pgWorst } = users;
  goal('users list, 100k users, p95 ≤ 25 ms on SQLite (4 conn)', sqliteWorst <= 25, `${sqliteWorst.toFixed(1)} ms`);
  if (!Number.isNaN(pgWorst))
    goal('users list, 100k users, p95 ≤ 25 ms on PostgreSQL (4 conn)', pgWorst <= 25, `${pgWorst.toFixed(1)} ms`);
}
if (applied) {
  const { kubectlFirst, serviceFirst, kubectlAgain, serviceAgain } = applied;
  goal(
    'apply 500 mixed documents in one request ≤ 2× kubectl apply --server-side (all created)',
    serviceFirst.ms <= 2 * kubectlFirst.ms,
    `${(serviceFirst.ms / kubectlFirst.ms).toFixed(2)}× (${Math.round(serviceFirst.ms)} ms against ${Math.round(kubectlFirst.ms)} ms)`,
  );
  goal(
    'apply the same 500 again ≤ 2× kubectl (all unchanged)',
    serviceAgain.ms <= 2 * kubectlAgain.ms,
    `${(serviceAgain.ms / kubectlAgain.ms).toFixed(2)}× (${Math.round(serviceAgain.ms)} ms against ${Math.round(kubectlAgain.ms)} ms)`,
  );
}
if (lists) {
  const { page, directList, jsonBytes, rssBefore, rssAfter, changeP99, noticeMax, search } = lists;
  goal('lists: page of 50 from _all (sort + search), 8 conn, p95 ≤ 15 ms', page.p95 <= 15, `${page.p95.toFixed(2)} ms`);
  const ratio = page.rps / directList.rps;
  goal(
    'lists: ≥ 200× the throughput of a direct LIST of all 20,000',
    ratio >= 200,
    `${Math.round(page.rps)} vs ${directList.rps.toFixed(1)} req/s = ${Math.round(ratio)}×`,
  );
  goal(
    'lists: cache RSS growth ≤ 2× the JSON size it holds',
    rssAfter - rssBefore <= 2 * jsonBytes,
    `+${mib(rssAfter - rssBefore)} for ${mib(jsonBytes)} (${((rssAfter - rssBefore) / jsonBytes).toFixed(2)}×)`,
  );
  goal('lists: change → next page within 1 s (p99 of 200)', changeP99 <= 1000, `${changeP99} ms`);
  goal('lists: change → CHANGED within 1.5 s', noticeMax <= 1500, `max ${noticeMax} ms`);
  goal('lists: search over 3 clusters × 6 types, 8 conn, p95 ≤ 30 ms', search.p95 <= 30, `${search.p95.toFixed(2)} ms`);
}
if (terminal) {
  const { interactive, burst } = terminal;
  goal(
    `${terminal.sessions} interactive sessions (1 s rounds) echo a line, p99 ≤ 50 ms, while a 50 MiB output stream runs`,
    interactive.p99 <= 50,
    `${interactive.p99.toFixed(1)} ms (p50 ${interactive.p50.toFixed(1)}, p95 ${interactive.p95.toFixed(1)})`,
  );
  verdicts.push(
    `         (not a goal) the same sessions in a burst, all at once: p99 ${burst.p99.toFixed(1)} ms ` +
      `(p50 ${burst.p50.toFixed(1)}, p95 ${burst.p95.toFixed(1)})`,
  );
  goal('RSS growth during the terminal load ≤ 64 MiB', terminal.growth <= 64 * MIB, `+${mib(terminal.growth)}`);
  goal('the 50 MiB stream arrived whole', terminal.flooded >= 50 * MIB, mib(terminal.flooded));
}
if (helmed) {
  const { page, detail, helmRps, decodedBytes, rssBefore, rssAfter } = helmed;
  goal(
    'Helm: page of 50 of _all (1,000 releases × 3) sorted by updated, p95 ≤ 20 ms',
    page.p95 <= 20,
    `${page.p95.toFixed(1)} ms`,
  );
  const ratio = page.rps / helmRps;
  goal(
    'Helm: the page ≥ 50× the throughput of helm list -A -o json',
    ratio >= 50,
    `${Math.round(page.rps)} vs ${helmRps.toFixed(2)} per s (${Math.round(ratio)}×)`,
  );
  goal('Helm: detail of a 1 MiB manifest once cached, p95 ≤ 30 ms', detail.p95 <= 30, `${detail.p95.toFixed(1)} ms`);
  const growth = rssAfter - rssBefore;
  goal(
    'Helm: cache RSS ≤ 2× the decoded JSON',
    growth <= 2 * decodedBytes,
    `+${mib(growth)} for ${mib(decodedBytes)} (${(growth / decodedBytes).toFixed(2)}×)`,
  );
}
console.log('\nGoals:');
for (const v of verdicts) console.log('  ' + v);

for (const proxy of resources?.proxies ?? []) proxy.kill('SIGTERM');
for (const c of cleanups) await c().catch(() => undefined);
await rm(tmp, { recursive: true, force: true });
await cp.stop();
process.exit(0);
