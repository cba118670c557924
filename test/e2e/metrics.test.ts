import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import http from 'node:http';
import net from 'node:net';
import { after, before, describe, test } from 'node:test';
import { sharedControlPlane, waitFor, type ControlPlane } from '../harness/control-plane.js';
import { MetricsListener } from '../../src/observability/service-endpoint.js';
import { startTestApp, type TestApp } from '../support/app.js';
import { kubeconfigFor } from '../support/clusters.js';
import { signedIn } from '../support/factories.js';
import { client } from '../support/http.js';
import {
  apiserverTarget,
  httpGet,
  recordedUsage,
  startPrometheus,
  type PrometheusInstance,
} from '../support/prometheus.js';

const METRICS_TOKEN = 'metrics-token-for-the-e2e-tests-9876543210';
const PREFIX = '/prometheus';
const MIB = 1024 * 1024;
/** Paths the service may ever request from a Prometheus. */
const ALLOWED_PATH =
  /^\/api\/v1\/(query|query_range|series|labels|status\/buildinfo|label\/[A-Za-z_][A-Za-z0-9_]*\/values)$/;

interface Proxy {
  url: string;
  /** Every request that reached Prometheus: path (below the prefix) and query string. */
  seen: Array<{ method: string; path: string; search: URLSearchParams }>;
  close(): Promise<void>;
}

/** Prometheus behind a path prefix (as behind an ingress), recording every request that gets through. */
async function recordingProxy(target: string): Promise<Proxy> {
  const seen: Proxy['seen'] = [];
  const server = http.createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://proxy');
    if (!url.pathname.startsWith(`${PREFIX}/`)) {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('not under the prefix');
      return;
    }
    const path = url.pathname.slice(PREFIX.length);
    seen.push({ method: req.method ?? '', path, search: url.searchParams });
    const upstream = http.request(`${target}${path}${url.search}`, { method: req.method, headers: req.headers });
    upstream.on('response', (r) => {
      res.writeHead(r.statusCode ?? 502, r.headers);
      r.pipe(res);
    });
    upstream.on('error', () => res.destroy());
    req.pipe(upstream);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  return {
    url: `http://127.0.0.1:${port}${PREFIX}`,
    seen,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

/** Accepts connections and never answers: a Prometheus that hangs. */
async function silentServer(): Promise<{ url: string; close(): Promise<void> }> {
  const sockets = new Set<net.Socket>();
  const server = net.createServer((socket) => {
    sockets.add(socket);
    socket.on('error', () => undefined);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}

const near = (actual: number | null, expected: number, label: string) =>
  assert.ok(
    actual !== null && Math.abs(actual - expected) < expected * 1e-6 + 1e-9,
    `${label}: ${actual} ≠ ${expected}`,
  );

describe("metrics through each cluster's Prometheus (real Prometheus, real control plane)", () => {
  let cp: ControlPlane;
  let t: TestApp;
  let prom: PrometheusInstance;
  let proxy: Proxy;
  let hanging: Awaited<ReturnType<typeof silentServer>>;
  let admin: ReturnType<typeof client>;
  let adminToken: string;
  const H = { headers: { 'x-cluster-name': 'prom-a' } };
  const recordedUntil = Math.floor(Date.now() / 1000);

  before(async () => {
    cp = await sharedControlPlane('a');
    t = await startTestApp({
      env: {
        CAS_METRICS_PORT: '0',
        CAS_METRICS_HOST: '127.0.0.1',
        CAS_METRICS_TOKEN: METRICS_TOKEN,
        CAS_CLUSTER_HEALTH_INTERVAL_SECONDS: '1',
        CAS_CLUSTER_PROBE_TIMEOUT_MS: '1000',
        CAS_METRICS_QUERY_TIMEOUT_SECONDS: '2',
      },
    });
    const servicePort = t.app.get(MetricsListener).address()!.port;
    prom = await startPrometheus({
      adminApi: true,
      targets: [
        apiserverTarget(cp),
        { job: 'cas', address: `127.0.0.1:${servicePort}`, scheme: 'http', bearerToken: METRICS_TOKEN },
      ],
      recorded: recordedUsage({
        end: recordedUntil,
        seconds: 2 * 3600,
        pods: [
          {
            namespace: 'metrics-e2e',
            pod: 'web-0',
            node: 'node-a',
            containers: [
              { name: 'app', cores: 0.25, bytes: 100 * MIB },
              { name: 'sidecar', cores: 0.05, bytes: 20 * MIB },
            ],
          },
          {
            namespace: 'metrics-e2e',
            pod: 'web-1',
            node: 'node-b',
            containers: [{ name: 'app', cores: 0.5, bytes: 300 * MIB }],
          },
        ],
        nodes: [
          { node: 'node-a', cores: 1.5, bytes: 2048 * MIB },
          { node: 'node-b', cores: 0.75, bytes: 1024 * MIB },
        ],
      }),
    });
    proxy = await recordingProxy(prom.url);
    hanging = await silentServer();
    adminToken = (await signedIn(t, 'admin')).token;
    admin = client(t.app, adminToken);
    for (const [name, metricsURL] of [
      ['prom-a', proxy.url],
      ['slow-metrics', hanging.url],
    ]) {
      const res = await admin.post('/api/v1/admin/clusters', { body: { name, config: kubeconfigFor(cp), metricsURL } });
      assert.equal(res.status, 201, res.text);
    }
  });
  after(async () => {
    await t?.close();
    await proxy?.close();
    await prom?.stop();
    await hanging?.close();
  });

  const clusterRow = async (name: string) =>
    ((await admin.get('/api/v1/admin/clusters')).body as any[]).find((c) => c.name === name);

  test('metricsStatus is ok next to status ok', async () => {
    const c = await clusterRow('prom-a');
    assert.equal(c.status, 'ok', c.error);
    assert.equal(c.metricsStatus, 'ok', c.metricsError);
    assert.equal(c.metricsError, null);
  });

  test("query and range query return the apiserver's real series, scraped with its token", async () => {
    const vector = await waitFor(
      'apiserver_request_total scraped',
      async () => {
        const res = await admin.get('/api/v1/metrics/query', { ...H, query: { query: 'apiserver_request_total' } });
        assert.equal(res.status, 200, res.text);
        return res.body.data.result.length > 0 ? res.body : undefined;
      },
      30_000,
    );
    assert.equal(vector.status, 'success');
    assert.equal(vector.data.resultType, 'vector');
    for (const series of vector.data.result) {
      assert.equal(series.metric.__name__, 'apiserver_request_total');
      assert.equal(series.metric.job, 'apiserver');
    }
    assert.ok(vector.data.result.some((s: any) => s.metric.verb === 'GET' && Number(s.value[1]) > 0));

    // Scraped every second: within a few seconds the last 30 s hold several points.
    const { range, now } = await waitFor(
      'three scrapes',
      async () => {
        const at = Math.floor(Date.now() / 1000);
        const res = await admin.get('/api/v1/metrics/query_range', {
          ...H,
          query: { query: 'sum(apiserver_request_total)', start: String(at - 30), end: String(at), step: '1s' },
        });
        assert.equal(res.status, 200, res.text);
        return res.body.data.result[0]?.values.length >= 3 ? { range: res, now: at } : undefined;
      },
      20_000,
    );
    assert.equal(range.headers['content-type'], 'application/json');
    assert.equal(range.body.status, 'success');
    assert.equal(range.body.data.resultType, 'matrix');
    const values = range.body.data.result[0].values as Array<[number, string]>;
    assert.ok(values.every(([ts, v]) => ts >= now - 30 && ts <= now && Number(v) > 0));

    const time = new Date(now * 1000).toISOString();
    const at = await admin.get('/api/v1/metrics/query', { ...H, query: { query: 'up{job="apiserver"}', time } });
    assert.equal(at.status, 200, at.text);
    assert.equal(at.body.data.result[0].value[0], now, 'an RFC 3339 time is evaluated at that time');
  });

  test('series, labels and label values pass through', async () => {
    const series = await admin.get('/api/v1/metrics/series?match[]=apiserver_request_total&match[]=up', H);
    assert.equal(series.status, 200, series.text);
    const names = new Set((series.body.data as any[]).map((s) => s.__name__));
    assert.deepEqual([...names].sort(), ['apiserver_request_total', 'up']);

    const labels = await admin.get('/api/v1/metrics/labels?match[]=apiserver_request_total', H);
    assert.equal(labels.status, 200, labels.text);
    assert.ok(labels.body.data.includes('verb') && labels.body.data.includes('resource'), labels.text);

    const jobs = await admin.get('/api/v1/metrics/label/job/values', H);
    assert.equal(jobs.status, 200, jobs.text);
    assert.deepEqual(jobs.body.data.sort(), ['apiserver', 'cas']);
  });

  test("Prometheus's own errors pass through with its status and body", async () => {
    const res = await admin.get('/api/v1/metrics/query', { ...H, query: { query: 'sum(' } });
    assert.equal(res.status, 400, res.text);
    assert.equal(res.body.status, 'error');
    assert.equal(res.body.errorType, 'bad_data');
    assert.match(res.body.error, /parse error/);
  });

  test('pod usage: the recorded series per container, CPU in cores and memory in bytes, shaped for a chart', async () => {
    for (const [range, step, seconds] of [
      ['30m', 15, 1800],
      ['1h', 30, 3600],
    ] as const) {
      const res = await admin.get(`/api/v1/metrics/pods/metrics-e2e/web-0?range=${range}`, H);
      assert.equal(res.status, 200, res.text);
      const body = res.body;
      assert.deepEqual(Object.keys(body).sort(), [
        'cluster',
        'cpu',
        'end',
        'memory',
        'namespace',
        'pod',
        'range',
        'start',
        'step',
      ]);
      assert.equal(body.cluster, 'prom-a');
      assert.equal(body.namespace, 'metrics-e2e');
      assert.equal(body.pod, 'web-0');
      assert.equal(body.range, range);
      assert.equal(body.step, step);
      assert.equal(body.end - body.start, seconds);
      assert.ok(Math.abs(body.end - Date.now() / 1000) <= step + 5);
      assert.deepEqual(
        body.cpu.map((s: any) => s.container),
        ['app', 'sidecar'],
        'the pod cgroup ("") and the pause container are left out',
      );
      assert.deepEqual(
        body.memory.map((s: any) => s.container),
        ['app', 'sidecar'],
      );
      const [app, sidecar] = body.cpu;
      // Recorded until shortly before the test: the points before then, one per step.
      const covered = Math.floor((recordedUntil - body.start) / step);
      assert.ok(app.values.length >= covered - 2, `${app.values.length} points, ${covered} expected`);
      for (const [ts, v] of app.values) {
        assert.equal((ts - body.start) % step, 0);
        near(v, 0.25, `app cpu at ${ts}`);
      }
      for (const [, v] of sidecar.values) near(v, 0.05, 'sidecar cpu');
      for (const [, v] of body.memory[0].values) assert.equal(v, 100 * MIB);
      for (const [, v] of body.memory[1].values) assert.equal(v, 20 * MIB);
    }
  });

  test('node usage: cores and bytes of the whole node', async () => {
    const res = await admin.get('/api/v1/metrics/nodes/node-a?range=30m', H);
    assert.equal(res.status, 200, res.text);
    assert.equal(res.body.node, 'node-a');
    assert.ok(res.body.cpu.length >= 100, `${res.body.cpu.length} points`);
    for (const [, v] of res.body.cpu) near(v, 1.5, 'node cpu');
    for (const [, v] of res.body.memory) assert.equal(v, 2048 * MIB);
    const unknown = await admin.get('/api/v1/metrics/nodes/node-zzz', H);
    assert.equal(unknown.status, 200);
    assert.deepEqual([unknown.body.cpu, unknown.body.memory], [[], []]);
  });

  test('PromQL metacharacters in names are refused or stay inside the string literal', async () => {
    for (const url of [
      `/api/v1/metrics/pods/metrics-e2e/${encodeURIComponent('web-0"}')}`,
      `/api/v1/metrics/pods/metrics-e2e/${encodeURIComponent('x",pod=~".*')}`,
      `/api/v1/metrics/pods/${encodeURIComponent('metrics-e2e",namespace=~".*')}/web-0`,
      `/api/v1/metrics/nodes/${encodeURIComponent('node-a"} or vector(1) #')}`,
      `/api/v1/metrics/nodes/${encodeURIComponent('a\\"')}`,
    ]) {
      const res = await admin.get(url, H);
      assert.equal(res.status, 400, `${url}: ${res.text}`);
    }
    proxy.seen.length = 0;
    // `=~` and `.*` are valid in an object name: they must match literally, not as a regex over every pod.
    const res = await admin.get(`/api/v1/metrics/pods/metrics-e2e/${encodeURIComponent('web=~.*')}`, H);
    assert.equal(res.status, 200, res.text);
    assert.deepEqual([res.body.cpu, res.body.memory], [[], []]);
    // Only the queries: a request without one (the service's background probe of this Prometheus) may pass meanwhile.
    const queries = proxy.seen.filter((r) => r.search.has('query')).map((r) => r.search.get('query'));
    assert.equal(queries.length, 2);
    for (const q of queries) assert.match(q!, /\{namespace="metrics-e2e",pod="web=~\.\*",container!=""/);
    const node = await admin.get(`/api/v1/metrics/nodes/${encodeURIComponent('.*')}`, H);
    assert.equal(node.status, 200);
    assert.deepEqual([node.body.cpu, node.body.memory], [[], []]);
  });

  test('no other Prometheus path is reachable, by any encoding', async () => {
    proxy.seen.length = 0;
    const attempts = [
      '/api/v1/metrics/admin/tsdb/snapshot',
      '/api/v1/metrics/admin%2Ftsdb%2Fsnapshot',
      '/api/v1/metrics/query/..%2F..%2Fadmin%2Ftsdb%2Fsnapshot',
      '/api/v1/metrics/query/../admin/tsdb/snapshot',
      '/api/v1/metrics/label/..%2F..%2Fadmin%2Ftsdb%2Fsnapshot/values',
      '/api/v1/metrics/label/..%252F..%252Fadmin/values',
      '/api/v1/metrics/label/job%3F/values',
      '/api/v1/metrics/label/job%23/values',
      '/api/v1/metrics/label/%2E%2E/values',
      '/api/v1/metrics/query?query=up&path=/api/v1/admin/tsdb/snapshot',
      '/api/v1/metrics/query?query=up%26path%3D%2Fapi%2Fv1%2Fadmin',
      '/api/v1/metrics/query?query=up%23/../../admin/tsdb/snapshot',
      '/api/v1/metrics/query?query=up&query=%2Fapi%2Fv1%2Fadmin',
      '/api/v1/metrics/series?match[]=up&match[]=..%2F..%2Fadmin',
      '/api/v1/metrics/targets',
      '/api/v1/metrics/status/config',
      '/api/v1/metrics/query_exemplars?query=up',
    ];
    for (const url of attempts) {
      const res = await admin.get(url, H);
      if (res.status === 200) {
        assert.equal(res.body.status, 'success', `${url}: ${res.text}`);
      } else {
        assert.ok([400, 404, 422].includes(res.status), `${url}: ${res.status} ${res.text}`);
      }
    }
    for (const url of ['/api/v1/metrics/targets', '/api/v1/metrics/status/config', '/api/v1/metrics/rules/x']) {
      const res = await admin.get(url, H);
      assert.equal(res.status, 404, url);
      assert.equal(res.body.message, 'no such route under /api/v1/metrics/', 'the cluster is not even asked');
    }
    for (const method of ['POST', 'PUT', 'DELETE'] as const) {
      const res = await t.app.inject({
        method,
        url: '/api/v1/metrics/admin/tsdb/delete_series?match[]=up',
        headers: { authorization: `Bearer ${adminToken}`, 'x-cluster-name': 'prom-a' },
      });
      assert.ok(res.statusCode >= 400 && res.statusCode < 500, `${method}: ${res.statusCode}`);
    }
    assert.ok(proxy.seen.length > 0, 'some attempts were valid queries and went through');
    for (const r of proxy.seen) {
      assert.equal(r.method, 'GET');
      assert.match(r.path, ALLOWED_PATH, `reached Prometheus at ${r.path}`);
      for (const key of r.search.keys())
        assert.ok(['query', 'time', 'match[]', 'start', 'end', 'step'].includes(key), key);
    }
    // The recorded series are all still there: nothing deleted them.
    const count = await admin.get('/api/v1/metrics/query', {
      ...H,
      query: { query: `count(container_memory_working_set_bytes)`, time: String(recordedUntil) },
    });
    // web-0: app, sidecar, the pod cgroup, POD; web-1: app, the pod cgroup, POD; two nodes.
    assert.equal(count.body.data.result[0].value[1], '9');
  });

  test("the service's own http_requests_total, scraped by Prometheus, rises after calls", async () => {
    const query = 'sum(http_requests_total{job="cas",operation="getCurrentUser",status="200"})';
    const read = async () => {
      const res = await admin.get('/api/v1/metrics/query', { ...H, query: { query } });
      assert.equal(res.status, 200, res.text);
      return Number(res.body.data.result[0]?.value[1] ?? 0);
    };
    const before = await read();
    for (let i = 0; i < 5; i++) assert.equal((await admin.get('/api/v1/auth/me')).status, 200);
    await waitFor('the next scrape', async () => ((await read()) >= before + 5 ? true : undefined), 20_000);
  });

  test("the Grafana dashboard's queries evaluate on the real Prometheus, over series the service exposes", async () => {
    const dashboard = JSON.parse(await readFile('deploy/monitoring/grafana-dashboard.json', 'utf8'));
    const exprs: string[] = dashboard.panels.flatMap((p: any) => p.targets.map((x: any) => x.expr));
    assert.ok(exprs.length >= 10);
    const names = new Set<string>();
    for (const expr of exprs) {
      const promql = expr.replaceAll('$__rate_interval', '1m').replaceAll('$job', 'cas');
      const res = await httpGet(`${prom.url}/api/v1/query?query=${encodeURIComponent(promql)}`);
      assert.equal(res.status, 200, `${promql}: ${res.body}`);
      for (const [name] of promql.matchAll(/\b(?:http|cas|nodejs|process)_[a-z0-9_]+/g))
        names.add(name.replace(/_bucket$/, ''));
    }
    const exposed = await httpGet(
      `${prom.url}/api/v1/label/__name__/values?match[]=${encodeURIComponent('{job="cas"}')}`,
    );
    const known = new Set(JSON.parse(exposed.body).data as string[]);
    for (const name of names) {
      assert.ok(
        known.has(name) || known.has(`${name}_bucket`) || name.startsWith('cas_open_streams'),
        `${name} is not exposed`,
      );
    }
  });

  test('a Prometheus that does not answer → 504 naming the cluster', async () => {
    const started = Date.now();
    const res = await admin.get('/api/v1/metrics/query', {
      headers: { 'x-cluster-name': 'slow-metrics' },
      query: { query: 'up' },
    });
    assert.equal(res.status, 504, res.text);
    assert.match(res.body.message, /metrics endpoint of cluster 'slow-metrics' did not answer within 2 s/);
    assert.ok(Date.now() - started < 10_000);
    assert.equal((await clusterRow('slow-metrics')).metricsStatus, 'unreachable');
  });

  test('Prometheus stopped → 502 within 1 s naming the cluster, and metricsStatus turns unreachable', async () => {
    await prom.stop();
    await proxy.close();
    const started = Date.now();
    const res = await admin.get('/api/v1/metrics/query', { ...H, query: { query: 'up' } });
    const elapsed = Date.now() - started;
    assert.equal(res.status, 502, res.text);
    assert.match(res.body.message, /metrics endpoint of cluster 'prom-a' could not be reached/);
    assert.ok(elapsed < 1000, `${elapsed} ms`);
    const pods = await admin.get('/api/v1/metrics/pods/metrics-e2e/web-0', H);
    assert.equal(pods.status, 502);
    // A probe caught on a kept-alive connection as the proxy closes reads ECONNRESET; the next one
    // (every second here) finds nothing listening.
    const c = await waitFor(
      'metricsStatus unreachable, connection refused',
      async () => {
        const row = await clusterRow('prom-a');
        return row.metricsStatus === 'unreachable' && /connection refused/.test(row.metricsError) ? row : undefined;
      },
      10_000,
    );
    assert.equal(c.status, 'ok', 'the cluster itself is fine');
  });
});
