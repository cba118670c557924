import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Counter, Histogram, Registry } from 'prom-client';
import {
  exposition,
  LATENCY_BUCKETS,
  recordClusterRequest,
  recordHttpRequest,
} from '../../src/observability/service-metrics.js';

/** The sample lines (not HELP or TYPE) of the metrics whose names start with one of these. */
function samples(text: string, prefixes: string[]): string[] {
  return text.split('\n').filter((line) => prefixes.some((p) => line.startsWith(p)));
}

test('request counts and durations: the same exposition as prom-client’s own Counter and Histogram for the same observations', async () => {
  const reference = new Registry();
  const pair = (counter: string, histogram: string, labelNames: string[]) => ({
    count: new Counter({ name: counter, help: 'h', labelNames, registers: [reference] }),
    duration: new Histogram({
      name: histogram,
      help: 'h',
      labelNames,
      buckets: LATENCY_BUCKETS,
      registers: [reference],
    }),
  });
  const http = pair('http_requests_total', 'http_request_duration_seconds', ['operation', 'method', 'status']);
  const cluster = pair('cas_cluster_requests_total', 'cas_cluster_request_duration_seconds', [
    'cluster',
    'target',
    'outcome',
  ]);

  // Every bound exactly, between bounds, zero, past the largest; label values that need escaping.
  const durations = [0, ...LATENCY_BUCKETS, ...LATENCY_BUCKETS.map((b) => b * 1.5), 0.0001, 120];
  const requests: Array<[string, string, number]> = [
    ['getResource', 'GET', 200],
    ['login', 'POST', 401],
    ['getResource', 'GET', 404],
    ['none', 'DELETE', 404],
  ];
  const clusters: Array<[string, 'apiserver' | 'metrics', '2xx' | 'timeout']> = [
    ['prod', 'apiserver', '2xx'],
    ['we"ird\\name\nx', 'metrics', 'timeout'],
  ];
  durations.forEach((seconds, i) => {
    for (const [operation, method, status] of requests.slice(0, 1 + (i % requests.length))) {
      recordHttpRequest(operation, method, status, seconds);
      const labels = { operation, method, status: String(status) };
      http.count.inc(labels);
      http.duration.observe(labels, seconds);
    }
    for (const [name, target, outcome] of clusters.slice(0, 1 + (i % clusters.length))) {
      recordClusterRequest(name, target, outcome, seconds);
      const labels = { cluster: name, target, outcome };
      cluster.count.inc(labels);
      cluster.duration.observe(labels, seconds);
    }
  });

  const names = ['http_request', 'cas_cluster_request'];
  const ours = samples((await exposition()).body, names);
  const theirs = samples(await reference.metrics(), names);
  assert.equal(ours.length, (4 + 2) * (1 + 13 + 1 + 2)); // each series: its count; 13 buckets and +Inf, sum, count
  assert.deepEqual(ours, theirs);
});
