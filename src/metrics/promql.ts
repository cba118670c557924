import { BadRequestException } from '@nestjs/common';

/** Prometheus refuses range queries of more than 11,000 points per series; the service refuses them first. */
export const MAX_POINTS = 11_000;
/** Bytes of PromQL one query may carry. */
export const MAX_QUERY_BYTES = 4096;
/** Prometheus label names (also what `/api/v1/label/<name>/values` accepts), bounded. */
export const LABEL_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,127}$/;

const UNIX_TIME = /^\d{1,11}(\.\d{1,9})?$/;
const RFC3339 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})$/;
const SECONDS = /^\d{1,9}(\.\d{1,9})?$/;
/** `1h30m`, `15s`, `500ms`: at most 8 parts, so no unbounded matching. */
const DURATION = /^(?:\d{1,6}(?:ms|s|m|h|d|w|y)){1,8}$/;
const DURATION_PART = /(\d{1,6})(ms|s|m|h|d|w|y)/g;
const UNIT_SECONDS: Record<string, number> = {
  ms: 0.001,
  s: 1,
  m: 60,
  h: 3600,
  d: 86400,
  w: 7 * 86400,
  y: 365 * 86400,
};

function refuse(message: string): never {
  throw new BadRequestException([message]);
}

/** A time as Prometheus accepts it (Unix seconds or RFC 3339) → Unix seconds. */
export function parseTime(name: string, value: string): number {
  if (UNIX_TIME.test(value)) return Number(value);
  if (RFC3339.test(value)) {
    const ms = Date.parse(value);
    if (Number.isFinite(ms)) return ms / 1000;
  }
  return refuse(`${name} must be a Unix timestamp in seconds or an RFC 3339 time like 2026-01-02T15:04:05Z`);
}

/** A step or duration (`30`, `15s`, `1m30s`) → seconds. */
export function parseDuration(name: string, value: string): number {
  let seconds: number;
  if (SECONDS.test(value)) seconds = Number(value);
  else if (DURATION.test(value)) {
    seconds = 0;
    for (const [, amount, unit] of value.matchAll(DURATION_PART)) seconds += Number(amount) * UNIT_SECONDS[unit];
  } else {
    return refuse(`${name} must be a number of seconds or a duration like 15s, 1m or 1h30m`);
  }
  if (!(seconds > 0)) refuse(`${name} must be more than 0`);
  return seconds;
}

export function checkQuery(query: string): void {
  if (query.trim() === '') refuse('query must not be empty');
  if (Buffer.byteLength(query) > MAX_QUERY_BYTES) refuse(`query must be at most ${MAX_QUERY_BYTES} bytes of PromQL`);
}

/** start, end and step of a range query, checked so that no series can have more than MAX_POINTS points. */
export function checkRange(start: string, end: string, step: string): { start: number; end: number; step: number } {
  const range = { start: parseTime('start', start), end: parseTime('end', end), step: parseDuration('step', step) };
  if (range.end < range.start) refuse('end must not be before start');
  const points = Math.floor((range.end - range.start) / range.step) + 1;
  if (points > MAX_POINTS) {
    refuse(
      `the range from start to end at this step has ${points} points per series; at most ${MAX_POINTS} are allowed: use a larger step or a shorter range`,
    );
  }
  return range;
}

/** A PromQL string literal holding exactly `value`: nothing in it can end the literal or the selector. */
export function promqlString(value: string): string {
  return `"${value.replace(/[\\"]/g, (c) => `\\${c}`).replace(/\n/g, '\\n')}"`;
}

/** The ranges the usage routes offer: how far back, and the step that keeps each about 120–300 points. */
export const USAGE_RANGES = {
  '30m': { seconds: 30 * 60, step: 15 },
  '1h': { seconds: 3600, step: 30 },
  '6h': { seconds: 6 * 3600, step: 120 },
  '24h': { seconds: 24 * 3600, step: 300 },
} as const;
export type UsageRange = keyof typeof USAGE_RANGES;

/** The rate window for a step: wide enough for a few samples at common scrape intervals. */
function rateWindow(step: number): string {
  return `${Math.max(60, 2 * step)}s`;
}

/** PromQL for a pod's CPU (cores) and memory (working set bytes) per container, from cAdvisor series. */
export function podUsageQueries(namespace: string, pod: string, step: number): { cpu: string; memory: string } {
  const selector = `namespace=${promqlString(namespace)},pod=${promqlString(pod)},container!="",container!="POD"`;
  return {
    cpu: `sum by (container) (rate(container_cpu_usage_seconds_total{${selector}}[${rateWindow(step)}]))`,
    memory: `sum by (container) (container_memory_working_set_bytes{${selector}})`,
  };
}

/** PromQL for a node's CPU (cores) and memory (working set bytes): cAdvisor's root cgroup on that node. */
export function nodeUsageQueries(node: string, step: number): { cpu: string; memory: string } {
  const selector = `node=${promqlString(node)},id="/"`;
  return {
    cpu: `sum(rate(container_cpu_usage_seconds_total{${selector}}[${rateWindow(step)}]))`,
    memory: `sum(container_memory_working_set_bytes{${selector}})`,
  };
}
