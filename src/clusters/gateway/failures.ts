import { BadGatewayException, HttpException } from '@nestjs/common';
import type { Readable } from 'node:stream';
import { readBounded } from '../../common/read-bounded.js';
import { AddressNotAllowedError } from '../address-policy.js';

/** The cluster did not answer (or stopped sending) within the request's time-out. */
export class ClusterTimeoutError extends Error {
  readonly code = 'CAS_CLUSTER_TIMEOUT';
}

export type FailureKind = 'timeout' | 'unreachable' | 'tls' | 'address' | 'other';

/** undici's codes for a connection, an answer's start or its body that took too long. */
const TIMEOUT_CODES = new Set(['UND_ERR_CONNECT_TIMEOUT', 'UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT']);
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
  'UND_ERR_SOCKET',
  'UND_ERR_CLOSED',
  'UND_ERR_DESTROYED',
]);

/**
 * A request toward a cluster (its API server or its metrics endpoint) that got no usable answer: a 502,
 * or a 504 when it timed out, naming the cluster and a fixed description of why — never the socket's or
 * the TLS library's own message, which carries addresses, ports and certificate details.
 */
export class ClusterUnreachableException extends HttpException {
  constructor(
    message: string,
    readonly failure: FailureKind,
    readonly description: string,
  ) {
    super(message, failure === 'timeout' ? 504 : 502);
  }
}

/** Why a request to a cluster failed: no answer in time, nothing answering, a TLS failure, a refused address, or anything else. */
export function classifyFailure(error: unknown): FailureKind {
  if (error instanceof ClusterUnreachableException) return error.failure;
  if (error instanceof ClusterTimeoutError) return 'timeout';
  const code = (error as NodeJS.ErrnoException)?.code ?? '';
  if (TIMEOUT_CODES.has(code)) return 'timeout';
  if (error instanceof AddressNotAllowedError) return 'address';
  if (UNREACHABLE_CODES.has(code)) return 'unreachable';
  if (/CERT|SSL|TLS|SELF_SIGNED|UNABLE_TO_VERIFY|ALTNAME/.test(code)) return 'tls';
  return 'other';
}

/** A short, fixed description of a failure, safe to store and show. */
export function describeFailure(error: unknown): string {
  if (error instanceof ClusterUnreachableException) return error.description;
  const code = (error as NodeJS.ErrnoException)?.code ?? '';
  switch (classifyFailure(error)) {
    case 'timeout':
      return 'unreachable: no answer in time';
    case 'address':
      return 'refused: the server is at a link-local or cloud metadata address';
    case 'unreachable':
      if (code === 'ECONNREFUSED') return 'unreachable: connection refused';
      if (code === 'ENOTFOUND' || code === 'EAI_AGAIN') return 'unreachable: host name not found';
      if (code === 'ECONNRESET' || code === 'EPIPE' || code === 'ECONNABORTED' || code.startsWith('UND_ERR_')) {
        return 'unreachable: connection reset';
      }
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

/**
 * The one translation of a failed call toward a cluster into what the caller gets. `target` names what
 * was called (`cluster 'prod'`, `the metrics endpoint of cluster 'prod'`). An HttpException (a refusal
 * the service raised itself) passes unchanged.
 */
export function translateFailure(target: string, error: unknown, timeoutMs: number): HttpException {
  if (error instanceof HttpException) return error;
  const failure = classifyFailure(error);
  const description = describeFailure(error);
  if (failure === 'timeout') {
    return new ClusterUnreachableException(
      `${target} did not answer within ${timeoutMs / 1000} s`,
      failure,
      description,
    );
  }
  return new ClusterUnreachableException(`${target} could not be reached: ${description}`, failure, description);
}

/** An answer the cluster gave that the service cannot use (not JSON, too large, …): a 502 naming the cluster. */
export function badAnswer(target: string, what: string): BadGatewayException {
  return new BadGatewayException(`${target} answered ${what}`);
}

/** Reads an answer whole, at most `limit` bytes (past it a 502); a connection that breaks meanwhile is the same 502/504 as a failed call. */
export function readAnswer(res: Readable, limit: number, target: string, timeoutMs: number): Promise<Buffer> {
  return readBounded(res, limit, (l) => badAnswer(target, `with more than ${l} bytes`)).catch((error: unknown) => {
    throw translateFailure(target, error, timeoutMs);
  });
}
