import type { Dispatcher } from 'undici';
import { AddressNotAllowedError, type AddressPolicy, refusedAddress } from '../address-policy.js';
import { STREAM, type ClusterResponse } from './answer.js';
import { USER_AGENT } from './cluster-client.js';
import { exchange } from './exchange.js';
import { readAnswer, translateFailure } from './failures.js';

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

/**
 * Link-local addresses (169.254.0.0/16, fe80::/10) include cloud metadata services: a metrics URL
 * must not lead there, whatever name it uses. The clusters' address policy decides, on the literal in
 * the URL and on the resolved address of every connection.
 */
export const NO_LINK_LOCAL: AddressPolicy = { allowLinkLocal: false };

export function isLinkLocal(address: string): boolean {
  return refusedAddress(address, NO_LINK_LOCAL) !== null;
}

/**
 * A cluster's Prometheus HTTP API. The URL is the stored metricsURL (validated on create and update)
 * plus one of the fixed paths above, and a query string built by URLSearchParams from validated values:
 * nothing a caller sends can change the path. Only the service's own headers go out.
 */
export class MetricsEndpointClient {
  private readonly base: URL;

  constructor(
    readonly endpoint: MetricsEndpoint,
    private readonly dispatcher: Dispatcher,
    readonly timeoutMs: number,
  ) {
    this.base = new URL(endpoint.url);
  }

  get target(): string {
    return `the metrics endpoint of cluster '${this.endpoint.cluster}'`;
  }

  /** One GET; the answer unread. The time-out covers the status line and every stall of the body. */
  async get(path: PrometheusPath, params: URLSearchParams): Promise<ClusterResponse> {
    try {
      const host = this.base.hostname.replace(/^\[|\]$/g, '');
      // An IP literal never goes through the lookup: refuse a link-local one here.
      if (isLinkLocal(host)) throw new AddressNotAllowedError('a link-local address');
      return (await exchange({
        dispatcher: this.dispatcher,
        options: {
          origin: this.base.origin,
          method: 'GET',
          path: `${this.base.pathname.replace(/\/+$/, '')}${path}${params.size ? `?${params}` : ''}`,
          headers: { accept: 'application/json', 'user-agent': `${USER_AGENT} (metrics)` },
          headersTimeout: this.timeoutMs,
          bodyTimeout: this.timeoutMs,
        },
        gather: STREAM,
        timeoutMs: this.timeoutMs,
        repeatable: true,
        cluster: this.endpoint.cluster,
        target: 'metrics',
      })) as ClusterResponse;
    } catch (error) {
      throw translateFailure(this.target, error, this.timeoutMs);
    }
  }

  /** Reads a whole answer, refusing more than `limit` bytes (a 502), failures as get(). */
  read(res: ClusterResponse, limit: number): Promise<Buffer> {
    return readAnswer(res, limit, this.target, this.timeoutMs);
  }
}
