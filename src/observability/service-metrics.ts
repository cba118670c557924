import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';

/**
 * The service's own metrics, in one registry per process (several apps in one test process share
 * it, as replicas would share a dashboard). Other modules record through the small functions
 * below rather than touching prom-client: `streamOpened('watch')` returns the function that closes it.
 *
 * Label values are bounded: operation ids come from the route table, statuses are HTTP codes,
 * cluster names are the registered clusters, outcomes a fixed set.
 */
export const serviceRegistry = new Registry();

collectDefaultMetrics({ register: serviceRegistry, eventLoopMonitoringPrecision: 20 });

export const LATENCY_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];
const DB_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5];

/**
 * A counter of requests and a histogram of their durations, by the same three labels, recorded on
 * every request. The children of each set of label values are kept in a Map of their joined values,
 * so the labels are hashed and checked once per set, not on every request.
 */
class RequestMetrics {
  private readonly series = new Map<string, { count: Counter.Internal; duration: Histogram.Internal<string> }>();
  private readonly counter: Counter;
  private readonly histogram: Histogram;

  constructor(
    counter: { name: string; help: string },
    histogram: { name: string; help: string },
    labelNames: readonly [string, string, string],
    buckets: readonly number[],
  ) {
    this.counter = new Counter({ ...counter, labelNames, registers: [serviceRegistry] });
    this.histogram = new Histogram({ ...histogram, labelNames, buckets: [...buckets], registers: [serviceRegistry] });
  }

  record(a: string, b: string, c: string, seconds: number): void {
    const key = `${a}\u0000${b}\u0000${c}`;
    let series = this.series.get(key);
    if (!series) {
      series = { count: this.counter.labels(a, b, c), duration: this.histogram.labels(a, b, c) };
      this.series.set(key, series);
    }
    series.count.inc();
    series.duration.observe(seconds);
  }
}

const httpMetrics = new RequestMetrics(
  { name: 'http_requests_total', help: 'HTTP requests answered, by operationId (route), method and status code' },
  {
    name: 'http_request_duration_seconds',
    help: 'Time from receiving an HTTP request to the end of its answer, by operationId, method and status code',
  },
  ['operation', 'method', 'status'],
  LATENCY_BUCKETS,
);
const clusterMetrics = new RequestMetrics(
  {
    name: 'cas_cluster_requests_total',
    help: 'Requests to a cluster (its API server, or its metrics endpoint), by cluster, target and outcome',
  },
  {
    name: 'cas_cluster_request_duration_seconds',
    help: 'Time until a cluster answered (status line and headers) or failed, by cluster, target and outcome',
  },
  ['cluster', 'target', 'outcome'],
  LATENCY_BUCKETS,
);
const openStreams = new Gauge({
  name: 'cas_open_streams',
  help: 'Long-lived responses (watches, logs, …) open now, by kind',
  labelNames: ['kind'] as const,
  registers: [serviceRegistry],
});
const loginFailures = new Counter({
  name: 'cas_login_failures_total',
  help: 'Logins refused for a wrong username or password, or a disabled user (HTTP 401)',
  registers: [serviceRegistry],
});
const loginThrottles = new Counter({
  name: 'cas_login_throttled_total',
  help: 'Logins refused because of too many failures (HTTP 429)',
  registers: [serviceRegistry],
});
const dbDuration = new Histogram({
  name: 'cas_db_query_duration_seconds',
  help: 'Database query time, by statement kind and outcome',
  labelNames: ['statement', 'outcome'] as const,
  buckets: DB_BUCKETS,
  registers: [serviceRegistry],
});
const buildInfo = new Gauge({
  name: 'cas_build_info',
  help: 'Always 1; labels name the running build',
  labelNames: ['version', 'node_version'] as const,
  registers: [serviceRegistry],
});
buildInfo.set({ version: packageVersion(), node_version: process.version }, 1);

/** The version in the nearest package.json above this file (dist/ and build/ sit at different depths). */
function packageVersion(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 6; i++) {
    const file = join(dir, 'package.json');
    if (existsSync(file)) {
      try {
        const pkg = JSON.parse(readFileSync(file, 'utf8')) as { name?: string; version?: string };
        if (pkg.name === 'cluster-admin-service' && typeof pkg.version === 'string') return pkg.version;
      } catch {
        /* keep looking */
      }
    }
    dir = dirname(dir);
  }
  return 'unknown';
}

/** Operation id for requests that matched no route (404s): keeps the label set bounded. */
export const NO_ROUTE = 'none';

export function recordHttpRequest(operation: string, method: string, status: number, seconds: number): void {
  httpMetrics.record(operation, method, String(status), seconds);
  if (operation === 'login' && status === 401) loginFailures.inc();
  if (operation === 'login' && status === 429) loginThrottles.inc();
}

/** What came of one request to a cluster. */
export type ClusterOutcome = '2xx' | '3xx' | '4xx' | '5xx' | 'timeout' | 'unreachable' | 'tls' | 'address' | 'error';

export function outcomeOfStatus(status: number): ClusterOutcome {
  if (status >= 200 && status < 300) return '2xx';
  if (status >= 300 && status < 400) return '3xx';
  if (status >= 400 && status < 500) return '4xx';
  return '5xx';
}

export function recordClusterRequest(
  cluster: string,
  target: 'apiserver' | 'metrics',
  outcome: ClusterOutcome,
  seconds: number,
): void {
  clusterMetrics.record(cluster, target, outcome, seconds);
}

/** Counts one open stream of this kind until the returned function is called (once; later calls do nothing). */
export function streamOpened(kind: string): () => void {
  openStreams.inc({ kind });
  let open = true;
  return () => {
    if (!open) return;
    open = false;
    openStreams.dec({ kind });
  };
}

export function recordDbQuery(sql: string, success: boolean, milliseconds: number): void {
  const verb = /^\s*(\w+)/.exec(sql)?.[1]?.toLowerCase() ?? '';
  const statement = ['select', 'insert', 'update', 'delete'].includes(verb) ? verb : 'other';
  dbDuration.observe({ statement, outcome: success ? 'success' : 'error' }, milliseconds / 1000);
}

/** The text exposition format of every metric above. */
export async function exposition(): Promise<{ contentType: string; body: string }> {
  return { contentType: serviceRegistry.contentType, body: await serviceRegistry.metrics() };
}
