import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { isLinkLocal } from '../../src/clusters/gateway/metrics-endpoint.js';
import { metricsUrlProblem } from '../../src/clusters/metrics-url.js';
import {
  checkRange,
  MAX_POINTS,
  nodeUsageQueries,
  parseDuration,
  parseTime,
  podUsageQueries,
  promqlString,
  USAGE_RANGES,
} from '../../src/metrics/promql.js';

const messageOf = (fn: () => unknown): string => {
  try {
    fn();
  } catch (error) {
    return ((error as { response?: { message?: string[] } }).response?.message ?? []).join('; ');
  }
  return 'no error';
};

describe('PromQL building and range checks', () => {
  test('times: Unix seconds and RFC 3339; anything else refused', () => {
    assert.equal(parseTime('t', '1767366245.5'), 1767366245.5);
    assert.equal(parseTime('t', '2026-01-02T15:04:05Z'), Date.UTC(2026, 0, 2, 15, 4, 5) / 1000);
    assert.equal(parseTime('t', '2026-01-02T16:04:05.25+01:00'), Date.UTC(2026, 0, 2, 15, 4, 5, 250) / 1000);
    for (const bad of ['', 'now', '-5', '1e9', '2026-01-02', '2026-13-45T99:99:99Z', '1'.repeat(20)]) {
      assert.match(
        messageOf(() => parseTime('start', bad)),
        /start must be a Unix timestamp/,
        bad,
      );
    }
  });

  test('durations: seconds or Prometheus units; 0 and garbage refused', () => {
    assert.equal(parseDuration('step', '30'), 30);
    assert.equal(parseDuration('step', '0.5'), 0.5);
    assert.equal(parseDuration('step', '1m30s'), 90);
    assert.equal(parseDuration('step', '500ms'), 0.5);
    assert.equal(parseDuration('step', '1h'), 3600);
    assert.match(
      messageOf(() => parseDuration('step', '0')),
      /more than 0/,
    );
    for (const bad of ['', '1.5m', 'm', '-1', '1x', '1m1m1m1m1m1m1m1m1m']) {
      assert.match(
        messageOf(() => parseDuration('step', bad)),
        /step must be a number of seconds/,
        bad,
      );
    }
  });

  test(`a range has at most ${MAX_POINTS} points per series`, () => {
    assert.deepEqual(checkRange('0', String(MAX_POINTS - 1), '1'), { start: 0, end: MAX_POINTS - 1, step: 1 });
    assert.match(
      messageOf(() => checkRange('0', String(MAX_POINTS), '1')),
      /11001 points per series/,
    );
    assert.match(
      messageOf(() => checkRange('0', '86400', '7s')),
      /12343 points/,
    );
    assert.doesNotThrow(() => checkRange('0', '86400', '8s'));
    assert.match(
      messageOf(() => checkRange('100', '99', '1')),
      /end must not be before start/,
    );
    for (const { seconds, step } of Object.values(USAGE_RANGES)) assert.ok(seconds / step + 1 <= 300);
  });

  test('any string becomes one PromQL string literal that holds exactly it', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary', maxLength: 64 }), (value) => {
        const literal = promqlString(value);
        assert.ok(literal.startsWith('"') && literal.endsWith('"'));
        // Every quote inside is escaped: the literal cannot end early.
        const inner = literal.slice(1, -1);
        assert.doesNotMatch(inner.replace(/\\\\/g, ''), /(^|[^\\])"/);
        // Unescaping (PromQL's \\, \" and \n) gives the value back.
        assert.equal(
          inner.replace(/\\([\s\S])/g, (_m, c: string) => (c === 'n' ? '\n' : c)),
          value,
        );
      }),
    );
  });

  test('usage queries put the names only inside string literals', () => {
    const pod = podUsageQueries('team-a', 'web=~.*', 15);
    assert.equal(
      pod.cpu,
      'sum by (container) (rate(container_cpu_usage_seconds_total{namespace="team-a",pod="web=~.*",container!="",container!="POD"}[60s]))',
    );
    assert.equal(
      pod.memory,
      'sum by (container) (container_memory_working_set_bytes{namespace="team-a",pod="web=~.*",container!="",container!="POD"})',
    );
    const node = nodeUsageQueries('n"1', 300);
    assert.equal(node.cpu, 'sum(rate(container_cpu_usage_seconds_total{node="n\\"1",id="/"}[600s]))');
  });

  test('metricsURL: http(s) base addresses only', () => {
    for (const ok of ['', 'http://prometheus:9090', 'https://prom.example.com/prefix/', 'http://[::1]:9090']) {
      assert.equal(metricsUrlProblem(ok), null, ok);
    }
    for (const [bad, reason] of [
      ['gopher://x', /http\(s\)/],
      ['http://a:b@x', /credentials/],
      ['http://x/?', /query or fragment/],
      ['http://x/#', /query or fragment/],
      ['http://169.254.169.254', /link-local/],
      ['http://[::ffff:169.254.169.254]', /link-local/],
      ['http://[fe80::1]', /link-local/],
      [`http://x/${'a'.repeat(2048)}`, /2048/],
    ] as const) {
      assert.match(metricsUrlProblem(bad) ?? 'accepted', reason, bad);
    }
    assert.equal(isLinkLocal('169.254.0.1'), true);
    assert.equal(isLinkLocal('fd00:ec2::254'), true);
    assert.equal(isLinkLocal('10.0.0.1'), false);
    assert.equal(isLinkLocal('127.0.0.1'), false);
  });
});
