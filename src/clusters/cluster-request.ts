import http, { type IncomingMessage } from 'node:http';
import https from 'node:https';
import { performance } from 'node:perf_hooks';
import { outcomeOfStatus, recordClusterRequest } from '../metrics/service-metrics.js';
import type { Impersonation } from '../access/impersonation.js';
import { isIP } from 'node:net';
import { AddressNotAllowedError, type AddressPolicy, policyLookup, refusedAddress } from './address-policy.js';
import type { ClusterConnection } from './cluster-connection.js';

export interface ClusterRequest {
  method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  /** A path below the connection's server URL, e.g. `/version` or `/api/v1/namespaces`. */
  path: string;
  query?: URLSearchParams;
  body?: Buffer;
  contentType?: string;
  userAgent: string;
  /**
   * Sent as `Impersonate-User` and one `Impersonate-Group` per group: the service's own identity,
   * built from the authenticated caller (never a header of the caller). Each value is checked.
   */
  impersonate?: Impersonation;
  /** How long the answer may take to start, and how long its body may stall. */
  timeoutMs: number;
  /** Which addresses may be connected to; without it, link-local and metadata addresses are refused. */
  addressPolicy?: AddressPolicy;
}

const DEFAULT_POLICY: AddressPolicy = { allowLinkLocal: false };

/** The cluster did not answer (or stopped sending) within the request's time-out. */
export class ClusterTimeoutError extends Error {}

/**
 * One request over a cluster connection, carrying only what the service sets: the cluster's
 * credentials, Accept, Content-Type and User-Agent — never a header of a caller. The answer comes
 * back unread. A kept-alive socket that the server had closed meanwhile is retried once: the
 * request never reached the server.
 */
export async function requestCluster(conn: ClusterConnection, request: ClusterRequest): Promise<IncomingMessage> {
  const started = performance.now();
  const seconds = () => (performance.now() - started) / 1000;
  try {
    const res = await requestOnce(conn, request);
    recordClusterRequest(conn.clusterName, 'apiserver', outcomeOfStatus(res.statusCode ?? 0), seconds());
    return res;
  } catch (error) {
    const kind = classifyFailure(error);
    recordClusterRequest(conn.clusterName, 'apiserver', kind === 'other' ? 'error' : kind, seconds());
    throw error;
  }
}

async function requestOnce(conn: ClusterConnection, request: ClusterRequest): Promise<IncomingMessage> {
  try {
    return await attempt(conn, request);
  } catch (error) {
    if ((error as { reusedSocket?: boolean }).reusedSocket && (error as NodeJS.ErrnoException).code === 'ECONNRESET') {
      return attempt(conn, request);
    }
    throw error;
  }
}

function attempt(conn: ClusterConnection, request: ClusterRequest): Promise<IncomingMessage> {
  const url = conn.server;
  const secure = url.protocol === 'https:';
  const path = url.pathname.replace(/\/+$/, '') + request.path + (request.query?.size ? `?${request.query}` : '');
  const headers: Record<string, string | string[] | number> = {
    accept: 'application/json',
    'user-agent': request.userAgent,
    ...conn.authHeaders(),
  };
  if (request.impersonate) Object.assign(headers, impersonationHeaders(request.impersonate));
  if (request.body) {
    headers['content-type'] = request.contentType ?? 'application/json';
    headers['content-length'] = request.body.length;
  }
  const host = url.hostname.replace(/^\[|\]$/g, '');
  const policy = request.addressPolicy ?? DEFAULT_POLICY;
  // A literal address is never looked up, so it is checked here; a name is checked as it resolves.
  const refused = isIP(host) ? refusedAddress(host, policy) : null;
  if (refused) return Promise.reject(new AddressNotAllowedError(`${host} is ${refused}`));
  return new Promise((resolve, reject) => {
    const req = (secure ? https : http).request({
      host,
      lookup: policyLookup(policy) as never,
      port: url.port || (secure ? 443 : 80),
      method: request.method,
      path,
      headers,
      agent: secure ? conn.agent : undefined,
    });
    const timeout = () => new ClusterTimeoutError(`no answer within ${request.timeoutMs} ms`);
    const timer = setTimeout(() => req.destroy(timeout()), request.timeoutMs);
    req.on('response', (res) => {
      clearTimeout(timer);
      res.setTimeout(request.timeoutMs, () => res.destroy(timeout()));
      resolve(res);
    });
    req.on('error', (error) => {
      clearTimeout(timer);
      reject(Object.assign(error, { reusedSocket: req.reusedSocket && !(error instanceof ClusterTimeoutError) }));
    });
    req.end(request.body);
  });
}

/** Printable ASCII, no leading or trailing space, bounded: nothing that could end a header or start another. */
const SAFE_HEADER_VALUE = /^[\x21-\x7e](?:[\x20-\x7e]{0,510}[\x21-\x7e])?$/;

export function impersonationHeaders(impersonate: Impersonation): Record<string, string | string[]> {
  for (const value of [impersonate.user, ...impersonate.groups]) {
    if (!SAFE_HEADER_VALUE.test(value))
      throw new Error(`refusing to impersonate with an unsafe value ${JSON.stringify(value)}`);
  }
  const headers: Record<string, string | string[]> = { 'impersonate-user': impersonate.user };
  if (impersonate.groups.length) headers['impersonate-group'] = impersonate.groups;
  return headers;
}

const UNREACHABLE_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
  'ETIMEDOUT',
  'EPIPE',
  'ECONNABORTED',
]);

/** Why a request to a cluster failed: no answer in time, nothing answering, a TLS failure, a refused address, or anything else. */
export function classifyFailure(error: unknown): 'timeout' | 'unreachable' | 'tls' | 'address' | 'other' {
  if (error instanceof ClusterTimeoutError) return 'timeout';
  if (error instanceof AddressNotAllowedError) return 'address';
  const code = (error as NodeJS.ErrnoException)?.code ?? '';
  if (UNREACHABLE_CODES.has(code)) return 'unreachable';
  if (/CERT|SSL|TLS|SELF_SIGNED|UNABLE_TO_VERIFY|ALTNAME/.test(code)) return 'tls';
  return 'other';
}

/**
 * A short, fixed description of a failure, safe to store and show: never the socket's or the TLS
 * library's own message (which carries addresses, ports and certificate details).
 */
export function describeFailure(error: unknown): string {
  const code = (error as NodeJS.ErrnoException)?.code ?? '';
  switch (classifyFailure(error)) {
    case 'timeout':
      return 'unreachable: no answer in time';
    case 'address':
      return 'refused: the server is at a link-local or cloud metadata address';
    case 'unreachable':
      if (code === 'ECONNREFUSED') return 'unreachable: connection refused';
      if (code === 'ENOTFOUND' || code === 'EAI_AGAIN') return 'unreachable: host name not found';
      if (code === 'ECONNRESET' || code === 'EPIPE' || code === 'ECONNABORTED') return 'unreachable: connection reset';
      return 'unreachable: no route to the server';
    case 'tls':
      if (code === 'CERT_HAS_EXPIRED') return 'TLS: certificate expired';
      if (code === 'ERR_TLS_CERT_ALTNAME_INVALID') return 'TLS: certificate does not match the server name';
      if (/SELF_SIGNED|UNABLE_TO_VERIFY|UNABLE_TO_GET_ISSUER|CERT_UNTRUSTED|CERT_SIGNATURE/.test(code)) {
        return 'TLS: certificate not trusted';
      }
      return 'TLS: handshake failed';
    default:
      return 'error: the connection failed';
  }
}
