import { BadGatewayException, GatewayTimeoutException } from '@nestjs/common';
import http, { type IncomingMessage } from 'node:http';
import https from 'node:https';
import { performance } from 'node:perf_hooks';
import {
  AddressNotAllowedError,
  type AddressPolicy,
  policyLookup,
  refusedAddress,
} from '../clusters/address-policy.js';
import { classifyFailure, ClusterTimeoutError } from '../clusters/cluster-request.js';
import { readBounded } from '../common/read-bounded.js';
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
 * must not lead there, whatever name it uses. The clusters' address policy decides, on the literal in
 * the URL and on the resolved address of every connection.
 */
const NO_LINK_LOCAL: AddressPolicy = { allowLinkLocal: false };

export function isLinkLocal(address: string): boolean {
  return refusedAddress(address, NO_LINK_LOCAL) !== null;
}

const guardedLookup = policyLookup(NO_LINK_LOCAL);
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
  const reason = error instanceof AddressNotAllowedError ? error.message : code || (error as Error)?.message || 'error';
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
 * and every stall of the body. A GET sent over a kept-alive connection that the server had closed
 * meanwhile (Prometheus restarted) is sent once more on a new one, as requests to clusters are.
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
    return Promise.reject(new AddressNotAllowedError(`${host} is a link-local address`));
  }
  const attempt = (mayRetry: boolean): Promise<IncomingMessage> =>
    new Promise((resolve, reject) => {
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
      req.on('error', (error: NodeJS.ErrnoException) => {
        clearTimeout(timer);
        if (mayRetry && req.reusedSocket && error.code === 'ECONNRESET') {
          resolve(attempt(false));
          return;
        }
        record(failureOutcome(error));
        reject(error);
      });
      req.end();
    });
  return attempt(true);
}

/** Reads a whole answer, refusing more than `limit` bytes. */
export function readBody(res: IncomingMessage, limit: number): Promise<Buffer> {
  return readBounded(res, limit, (l) => new Error(`answer larger than ${l} bytes`));
}
