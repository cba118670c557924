import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { MetricsListener } from '../../src/observability/service-endpoint.js';
import { exposition, streamOpened } from '../../src/observability/service-metrics.js';
import { startTestApp, type TestApp } from '../support/app.js';
import { createUser, signedIn } from '../support/factories.js';
import { client, request } from '../support/http.js';
import { closedPort, contextFor, kubeconfigYaml, testCertificates } from '../support/kubeconfigs.js';
import { httpGet } from '../support/prometheus.js';

const METRICS_TOKEN = 'metrics-token-for-the-http-tests-0123456789';

/** The value of one sample line of the exposition (`name{labels} value`), or 0 when absent. */
function sample(text: string, name: string, labels: Record<string, string> = {}): number {
  for (const line of text.split('\n')) {
    if (!line.startsWith(name)) continue;
    const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})? (\S+)$/.exec(line);
    if (!match || match[1] !== name) continue;
    const set = match[2] ?? '';
    if (Object.entries(labels).every(([k, v]) => set.includes(`${k}="${v}"`))) return Number(match[3]);
  }
  return 0;
}

async function scrape(t: TestApp): Promise<string> {
  const res = await t.app.inject({
    method: 'GET',
    url: '/metrics',
    headers: { authorization: `Bearer ${METRICS_TOKEN}` },
  });
  assert.equal(res.statusCode, 200, res.body);
  return res.body;
}

describe("the service's own /metrics", () => {
  let t: TestApp;
  before(async () => {
    t = await startTestApp({ env: { CAS_METRICS_TOKEN: METRICS_TOKEN, CAS_CLUSTER_HEALTH_INTERVAL_SECONDS: '0' } });
  });
  after(() => t?.close());

  test('refused without the token (401, the error shape, x-request-id), with a wrong one, and with a session token', async () => {
    const admin = await signedIn(t, 'admin');
    for (const authorization of [undefined, 'Bearer wrong-token-wrong-token', `Bearer ${admin.token}`, METRICS_TOKEN]) {
      const res = await t.app.inject({
        method: 'GET',
        url: '/metrics',
        headers: authorization ? { authorization } : {},
      });
      assert.equal(res.statusCode, 401, `${authorization}: ${res.body}`);
      const body = JSON.parse(res.body);
      assert.equal(body.statusCode, 401);
      assert.equal(body.error, 'Unauthorized');
      assert.match(body.message, /metrics token/);
      assert.equal(body.requestId, res.headers['x-request-id']);
      assert.doesNotMatch(res.body, /http_requests_total/);
    }
  });

  test('with the token: the Prometheus text format with every listed family', async () => {
    const text = await scrape(t);
    for (const family of [
      'http_requests_total',
      'http_request_duration_seconds',
      'cas_cluster_requests_total',
      'cas_cluster_request_duration_seconds',
      'cas_open_streams',
      'cas_login_failures_total',
      'cas_login_throttled_total',
      'cas_db_query_duration_seconds',
      'cas_build_info',
      'nodejs_eventloop_lag_seconds',
      'nodejs_heap_size_used_bytes',
      'process_resident_memory_bytes',
    ]) {
      assert.match(text, new RegExp(`^# TYPE ${family} `, 'm'), family);
    }
    assert.equal(sample(text, 'cas_build_info', { version: '0.1.0' }), 1);
    assert.ok(sample(text, 'cas_db_query_duration_seconds_count', { statement: 'select' }) > 0, 'queries were timed');
  });

  test('requests are counted by operationId, method and status; failed and throttled logins are counted', async () => {
    const admin = await signedIn(t, 'admin');
    const labels = { operation: 'getCurrentUser', method: 'GET', status: '200' };
    const before = sample(await scrape(t), 'http_requests_total', labels);
    for (let i = 0; i < 3; i++) assert.equal((await client(t.app, admin.token).get('/api/v1/auth/me')).status, 200);
    const unknownRoute = { operation: 'none', method: 'GET', status: '404' };
    const notFoundBefore = sample(await scrape(t), 'http_requests_total', unknownRoute);
    assert.equal((await client(t.app, admin.token).get('/api/v1/admin/nothing/here/at/all')).status, 404);

    const user = await createUser(t, { role: 'viewer' });
    const failuresBefore = sample(await scrape(t), 'cas_login_failures_total');
    const throttledBefore = sample(await scrape(t), 'cas_login_throttled_total');
    let throttled = 0;
    for (let i = 0; i < 7; i++) {
      const res = await request(t.app, 'POST', '/api/v1/auth/login', {
        body: { username: user.username, password: 'not-the-password' },
      });
      if (res.status === 429) throttled++;
      else assert.equal(res.status, 401);
    }
    assert.ok(throttled >= 1, 'the username limit (5) was reached');

    const text = await scrape(t);
    assert.equal(sample(text, 'http_requests_total', labels), before + 3);
    assert.equal(sample(text, 'http_request_duration_seconds_count', labels), before + 3);
    assert.equal(sample(text, 'http_requests_total', unknownRoute), notFoundBefore + 1);
    assert.equal(sample(text, 'cas_login_failures_total'), failuresBefore + 7 - throttled);
    assert.equal(sample(text, 'cas_login_throttled_total'), throttledBefore + throttled);
  });

  test('streamOpened(kind) raises cas_open_streams until its close function runs (once)', async () => {
    const close = streamOpened('test-stream');
    assert.equal(sample(await scrape(t), 'cas_open_streams', { kind: 'test-stream' }), 1);
    close();
    close();
    assert.equal(sample(await scrape(t), 'cas_open_streams', { kind: 'test-stream' }), 0);
  });
});

describe('/metrics without CAS_METRICS_TOKEN; CAS_METRICS_PORT', () => {
  test('not served on the main port; served on its own port (only /metrics there), with the token when one is set', async () => {
    const t = await startTestApp({ env: { CAS_METRICS_PORT: '0', CAS_METRICS_HOST: '127.0.0.1' } });
    try {
      assert.equal((await t.app.inject({ method: 'GET', url: '/metrics' })).statusCode, 404);
      const port = t.app.get(MetricsListener).address()!.port;
      const res = await httpGet(`http://127.0.0.1:${port}/metrics`);
      assert.equal(res.status, 200);
      assert.match(res.body, /^# TYPE http_requests_total counter$/m);
      const other = await httpGet(`http://127.0.0.1:${port}/api/v1/auth/me`);
      assert.equal(other.status, 404);
      assert.equal(JSON.parse(other.body).statusCode, 404);
    } finally {
      await t.close();
    }

    const withToken = await startTestApp({
      env: { CAS_METRICS_PORT: '0', CAS_METRICS_HOST: '127.0.0.1', CAS_METRICS_TOKEN: METRICS_TOKEN },
    });
    try {
      const port = withToken.app.get(MetricsListener).address()!.port;
      assert.equal((await httpGet(`http://127.0.0.1:${port}/metrics`)).status, 401);
      const res = await httpGet(`http://127.0.0.1:${port}/metrics`, { authorization: `Bearer ${METRICS_TOKEN}` });
      assert.equal(res.status, 200);
    } finally {
      await withToken.close();
    }
  });
});

describe('metrics query routes: validation, authorization, no metrics endpoint', () => {
  let t: TestApp;
  let admin: ReturnType<typeof client>;
  let viewer: ReturnType<typeof client>;
  let kubeconfig: string;
  let closedMetricsURL: string;
  const H = (cluster: string) => ({ headers: { 'x-cluster-name': cluster } });

  before(async () => {
    const certs = await testCertificates();
    const server = `https://127.0.0.1:${await closedPort()}`;
    kubeconfig = kubeconfigYaml([
      contextFor(
        { server, caData: certs.caData, adminCertData: certs.certData, adminKeyData: certs.keyData, adminToken: 'x' },
        { auth: 'token', token: 'a-token-for-an-offline-cluster' },
      ),
    ]);
    closedMetricsURL = `http://127.0.0.1:${await closedPort()}`;
    t = await startTestApp({ env: { CAS_CLUSTER_HEALTH_INTERVAL_SECONDS: '0', CAS_CLUSTER_PROBE_TIMEOUT_MS: '1000' } });
    admin = client(t.app, (await signedIn(t, 'admin')).token);
    viewer = client(t.app, (await signedIn(t, 'viewer')).token);
    for (const [name, metricsURL] of [
      ['no-metrics', ''],
      ['dead-metrics', closedMetricsURL],
    ]) {
      const res = await admin.post('/api/v1/admin/clusters', { body: { name, config: kubeconfig, metricsURL } });
      assert.equal(res.status, 201, res.text);
    }
  });
  after(() => t?.close());

  test('metricsURL must be a plain http(s) address: no credentials, query, fragment, other scheme or link-local address', async () => {
    for (const [metricsURL, message] of [
      ['ftp://prometheus:9090', /http\(s\) URL/],
      ['http://user:secret@prometheus:9090', /credentials/],
      ['http://prometheus:9090/?x=1', /query or fragment/],
      ['http://prometheus:9090/#x', /query or fragment/],
      ['http://169.254.169.254/latest', /link-local/],
      ['http://[fe80::1]:9090', /link-local/],
      ['not a url', /http\(s\) URL/],
      [`http://p/${'a'.repeat(2100)}`, /2048/],
    ] as const) {
      const res = await admin.post('/api/v1/admin/clusters', {
        body: { name: 'refused-url', config: kubeconfig, metricsURL },
      });
      assert.equal(res.status, 400, `${metricsURL}: ${res.text}`);
      assert.ok(
        res.body.message.some((m: string) => message.test(m)),
        `${metricsURL}: ${JSON.stringify(res.body.message)}`,
      );
    }
    const clusters = (await admin.get('/api/v1/admin/clusters')).body as Array<{ name: string }>;
    assert.ok(!clusters.some((c) => c.name === 'refused-url'), 'nothing stored');
  });

  test('metricsStatus: none without a metricsURL; unreachable when nothing answers there (with the reason)', async () => {
    const clusters = (await admin.get('/api/v1/admin/clusters')).body as any[];
    const none = clusters.find((c) => c.name === 'no-metrics');
    assert.equal(none.metricsStatus, 'none');
    assert.equal(none.metricsError, null);
    const dead = clusters.find((c) => c.name === 'dead-metrics');
    assert.equal(dead.metricsStatus, 'unreachable');
    assert.match(dead.metricsError, /connection refused/);
  });

  test('no metricsURL → 404 naming the cluster and saying it has no metrics endpoint', async () => {
    for (const url of [
      '/api/v1/metrics/query?query=up',
      '/api/v1/metrics/pods/default/web-0',
      '/api/v1/metrics/nodes/node-a',
      '/api/v1/metrics/labels',
    ]) {
      const res = await admin.get(url, H('no-metrics'));
      assert.equal(res.status, 404, `${url}: ${res.text}`);
      assert.match(res.body.message, /cluster 'no-metrics' has no metrics endpoint/);
    }
    const unknown = await admin.get('/api/v1/metrics/query?query=up', H('nope'));
    assert.equal(unknown.status, 404);
    assert.equal(unknown.body.message, "cluster 'nope' not found");
  });

  test('a metrics endpoint nothing listens on → 502 naming the cluster, at once', async () => {
    const counted = { cluster: 'dead-metrics', target: 'metrics', outcome: 'unreachable' };
    const before = sample((await exposition()).body, 'cas_cluster_requests_total', counted);
    const started = Date.now();
    const res = await admin.get('/api/v1/metrics/query?query=up', H('dead-metrics'));
    assert.equal(res.status, 502, res.text);
    assert.equal(sample((await exposition()).body, 'cas_cluster_requests_total', counted), before + 1);
    assert.match(res.body.message, /metrics endpoint of cluster 'dead-metrics' could not be reached/);
    assert.ok(Date.now() - started < 1000);
    assert.doesNotMatch(res.text, new RegExp(closedMetricsURL.replace(/[.]/g, '\\.')), 'the address is not shown');
  });

  test('raw PromQL needs get on metrics: a viewer gets 403; pod and node usage are authorized like reading them', async () => {
    const raw = await viewer.get('/api/v1/metrics/query?query=up', H('no-metrics'));
    assert.equal(raw.status, 403);
    assert.match(raw.body.message, /metrics/);
    for (const url of [
      '/api/v1/metrics/query_range?query=up&start=0&end=60&step=15',
      '/api/v1/metrics/series?match[]=up',
      '/api/v1/metrics/labels',
    ]) {
      assert.equal((await viewer.get(url, H('no-metrics'))).status, 403, url);
    }
    assert.equal((await viewer.get('/api/v1/metrics/label/job/values', H('no-metrics'))).status, 403);
    // A viewer may read pods and nodes: past authorization, to the missing endpoint.
    assert.equal((await viewer.get('/api/v1/metrics/pods/default/web-0', H('no-metrics'))).status, 404);
    assert.equal((await viewer.get('/api/v1/metrics/nodes/node-a', H('no-metrics'))).status, 404);
    const noRole = client(t.app, (await signedIn(t, [])).token);
    assert.equal((await noRole.get('/api/v1/metrics/pods/default/web-0', H('no-metrics'))).status, 403);
    assert.equal((await client(t.app).get('/api/v1/metrics/query?query=up', H('no-metrics'))).status, 401);
  });

  test('bad input → 400 naming what is wrong, before any request leaves', async () => {
    const now = Math.floor(Date.now() / 1000);
    const cases: Array<[string, RegExp, Record<string, string>?]> = [
      ['/api/v1/metrics/query', /query/],
      ['/api/v1/metrics/query?query=', /query must not be empty/],
      [`/api/v1/metrics/query?query=${'a'.repeat(4097)}`, /query must be shorter than or equal to 4096|at most 4096/],
      [`/api/v1/metrics/query?query=${encodeURIComponent('é'.repeat(2049))}`, /at most 4096 bytes/],
      ['/api/v1/metrics/query?query=up&time=yesterday', /time must be a Unix timestamp/],
      ['/api/v1/metrics/query?query=up&timeout=1s', /property timeout should not exist/],
      [
        `/api/v1/metrics/query_range?query=up&start=${now - 86400}&end=${now}&step=1`,
        /86401 points per series; at most 11000/,
      ],
      [`/api/v1/metrics/query_range?query=up&start=${now - 3600}&end=${now}&step=0`, /step must be more than 0/],
      [`/api/v1/metrics/query_range?query=up&start=${now}&end=${now - 60}&step=15s`, /end must not be before start/],
      [`/api/v1/metrics/query_range?query=up&start=${now}&end=${now}&step=fast`, /step must be a number of seconds/],
      [`/api/v1/metrics/query_range?query=up&start=${now}&end=${now}`, /step/],
      ['/api/v1/metrics/series', /match\[\]/],
      ['/api/v1/metrics/label/job%2F..%2Fadmin/values', /label must be a Prometheus label name/],
      ['/api/v1/metrics/label/1abc/values', /label must be a Prometheus label name/],
      ['/api/v1/metrics/pods/default/web-0?range=2h', /range must be one of 30m, 1h, 6h, 24h/],
      ['/api/v1/metrics/pods/Default/web-0', /namespace must be a DNS label/],
      ['/api/v1/metrics/pods/_all/web-0', /namespace must name one namespace/],
      [`/api/v1/metrics/pods/default/${encodeURIComponent('web-0"}')}`, /name must be a single path segment/],
      [`/api/v1/metrics/pods/default/${encodeURIComponent('a{b}')}`, /name must be a single path segment/],
      [`/api/v1/metrics/nodes/${encodeURIComponent('node"a')}`, /name must be a single path segment/],
      ['/api/v1/metrics/query?query=up', /x-cluster-name header is required/, {}],
    ];
    for (const [url, message, headers] of cases) {
      const res = await admin.get(url, { headers: headers ?? { 'x-cluster-name': 'dead-metrics' } });
      assert.equal(res.status, 400, `${url}: ${res.text}`);
      const messages = [].concat(res.body.message);
      assert.ok(
        messages.some((m: string) => message.test(m)),
        `${url}: ${JSON.stringify(messages)}`,
      );
      assert.equal(res.body.requestId, res.headers['x-request-id']);
    }
  });
});
