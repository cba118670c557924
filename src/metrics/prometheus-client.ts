import { BadGatewayException, GatewayTimeoutException } from '@nestjs/common';
import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import http, { type IncomingMessage } from 'node:http';
import https from 'node:https';
import { isIP } from 'node:net';
import { performance } from 'node:perf_hooks';
import { classifyFailure, ClusterTimeoutError } from '../clusters/cluster-request.js';
import { outcomeOfStatus, recordClusterRequest, type ClusterOutcome } from './service-metrics.js';

/** The only Prometheus HTTP API paths the service ever requests. */
export const PROMETHEUS_PATHS = {
  query: '/api/v1/query',
  queryRange: '/api/v1/query_range',
  series: '/api/v1/series',
  labels: '/api/v1/labels',
  buildInfo: '/api/v1/status/buildinfo',
} as const;
export type PrometheusPath =
  (typeof PROMETHEUS_PATHS)[keyof typeof PROMETHEUS_PATHS] | `/api/v1/label/${string}/values`;

/** A cluster's metrics endpoint, as stored. */
export interface MetricsEndpoint {
  cluster: string;
  /** The validated `metricsURL`. */
  url: string;
}

const USER_AGENT = 'cluster-admin-service/1 (metrics)';

/**
 * Link-local addresses (169.254.0.0/16, fe80::/10) include cloud metadata services: a metrics URL
 * must not lead there, whatever name it uses. Checked on the resolved address of every connection.
 */
export function isLinkLocal(address: string): boolean {
  if (isIP(address) === 4) return address.startsWith('169.254.');
  if (isIP(address) === 6) {
    const lower = address.toLowerCase();
    if (lower.startsWith('::ffff:')) {
      // An IPv4-mapped address, dotted (`::ffff:169.254.1.1`) or as the URL parser writes it (`::ffff:a9fe:101`).
      const mapped = lower.slice(7);
      const hex = /^([0-9a-f]{1,4}):[0-9a-f]{1,4}$/.exec(mapped);
      return hex ? parseInt(hex[1], 16) >> 8 === 169 && (parseInt(hex[1], 16) & 0xff) === 254 : isLinkLocal(mapped);
    }
    return /^fe[89ab]/.test(lower) || lower === 'fd00:ec2::254';
  }
  return false;
}

class LinkLocalError extends Error {
  code = 'ELINKLOCAL';
}

function guardedLookup(
  hostname: string,
  options: object,
  callback: (error: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void,
): void {
  dnsLookup(hostname, { ...options, all: true }, (error, addresses) => {
    if (error) return callback(error, []);
    const list = addresses as LookupAddress[];
    if (list.some((a) => isLinkLocal(a.address))) {
      return callback(new LinkLocalError(`${hostname} resolves to a link-local address`), []);
    }
    if ((options as { all?: boolean }).all) return callback(null, list);
    callback(null, list[0].address, list[0].family);
  });
}

const agents = {
  http: new http.Agent({ keepAlive: true, maxSockets: 64, lookup: guardedLookup as never }),
  https: new https.Agent({ keepAlive: true, maxSockets: 64, lookup: guardedLookup as never }),
};

/** Why a request to a metrics endpoint failed, as a 502/504 naming the cluster. */
export function metricsFailure(cluster: string, error: unknown, timeoutMs: number): Error {
  if (error instanceof ClusterTimeoutError) {
    return new GatewayTimeoutException(
      `the metrics endpoint of cluster '${cluster}' did not answer within ${timeoutMs / 1000} s`,
    );
  }
  const code = (error as NodeJS.ErrnoException)?.code ?? '';
  const reason = error instanceof LinkLocalError ? error.message : code || (error as Error)?.message || 'error';
  return new BadGatewayException(`the metrics endpoint of cluster '${cluster}' could not be reached (${reason})`);
}

function failureOutcome(error: unknown): ClusterOutcome {
  const kind = classifyFailure(error);
  return kind === 'other' ? 'error' : kind;
}

/**
 * One GET to a cluster's Prometheus HTTP API. The URL is the stored metricsURL (parsed by the WHATWG
 * parser, validated on create/update) plus one of the fixed paths above, and a query string built
 * by URLSearchParams from validated values: nothing a caller sends can change the path. Only the
 * service's own headers go out. The answer comes back unread; the time-out covers the status line
 * and every stall of the body.
 */
export function requestPrometheus(
  endpoint: MetricsEndpoint,
  path: PrometheusPath,
  params: URLSearchParams,
  timeoutMs: number,
): Promise<IncomingMessage> {
  const base = new URL(endpoint.url);
  const secure = base.protocol === 'https:';
  const fullPath = `${base.pathname.replace(/\/+$/, '')}${path}${params.size ? `?${params}` : ''}`;
  const started = performance.now();
  const record = (outcome: ClusterOutcome) =>
    recordClusterRequest(endpoint.cluster, 'metrics', outcome, (performance.now() - started) / 1000);
  const host = base.hostname.replace(/^\[|\]$/g, '');
  // An IP literal never goes through the lookup: refuse a link-local one here.
  if (isLinkLocal(host)) {
    record('error');
    return Promise.reject(new LinkLocalError(`${host} is a link-local address`));
  }
  return new Promise((resolve, reject) => {
    const req = (secure ? https : http).request({
      host,
      port: base.port || (secure ? 443 : 80),
      method: 'GET',
      path: fullPath,
      headers: { accept: 'application/json', 'user-agent': USER_AGENT },
      agent: secure ? agents.https : agents.http,
    });
    const timeout = () => new ClusterTimeoutError(`no answer within ${timeoutMs} ms`);
    const timer = setTimeout(() => req.destroy(timeout()), timeoutMs);
    req.on('response', (res) => {
      clearTimeout(timer);
      record(outcomeOfStatus(res.statusCode ?? 0));
      res.setTimeout(timeoutMs, () => res.destroy(timeout()));
      resolve(res);
    });
    req.on('error', (error) => {
      clearTimeout(timer);
      record(failureOutcome(error));
      reject(error);
    });
    req.end();
  });
}

/** Reads a whole answer, refusing more than `limit` bytes. */
export async function readBody(res: IncomingMessage, limit: number): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of res) {
    size += (chunk as Buffer).length;
    if (size > limit) {
      res.destroy();
      throw new Error(`answer larger than ${limit} bytes`);
    }
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks);
}
