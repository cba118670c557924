import type { IncomingHttpHeaders } from 'node:http';
import { createRequire } from 'node:module';
import { performance } from 'node:perf_hooks';
import type { Readable } from 'node:stream';
import { type Dispatcher, util as undiciUtil } from 'undici';
import { outcomeOfStatus, recordClusterRequest } from '../metrics/service-metrics.js';
import type { Impersonation } from '../access/impersonation.js';
import { AddressNotAllowedError } from './address-policy.js';
import type { ClusterConnection } from './cluster-connection.js';

export interface ClusterRequest {
  method: 'GET' | 'HEAD' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  /** A path below the connection's server URL, e.g. `/version` or `/api/v1/namespaces`. */
  path: string;
  query?: URLSearchParams;
  /** A stream (the Kubernetes API path passes a caller's body on as it arrives) is never sent twice. */
  body?: Buffer | Readable;
  contentType?: string;
  /** Default `application/json`; the Kubernetes API path passes on what its caller accepts (Table, protobuf). */
  accept?: string;
  contentEncoding?: string;
  userAgent: string;
  /**
   * Sent as `Impersonate-User` and one `Impersonate-Group` per group: the service's own identity,
   * built from the authenticated caller (never a header of the caller). Each value is checked.
   */
  impersonate?: Impersonation;
  /** How long the answer may take to start, and (unless `bodyTimeoutMs` says otherwise) how long its body may stall. */
  timeoutMs: number;
  /** How long the body may stall between two chunks; 0: forever (a followed log). Default: `timeoutMs`. */
  bodyTimeoutMs?: number;
}

/** A cluster's answer, its body unread: a stream with the status and the headers (names in lower case). */
export interface ClusterResponse extends Readable {
  statusCode: number;
  headers: IncomingHttpHeaders;
}

/** A cluster's whole answer, read before it is handed on: a small one (see `requestClusterSettled`). */
export interface SettledAnswer {
  statusCode: number;
  contentType: string;
  body: Buffer;
  /** The answer's Warning headers (the apiserver's deprecation notices), as received. */
  warning?: string | string[];
}

/** The cluster did not answer (or stopped sending) within the request's time-out. */
export class ClusterTimeoutError extends Error {}

/**
 * The answer's start, or a ClusterTimeoutError once `ms` have passed. The request is aborted then too,
 * but undici only acts on that once its connection is made (or has failed): the caller does not wait
 * for that, and an answer that still comes is thrown away.
 */
function withDeadline(
  pending: Promise<Dispatcher.ResponseData>,
  controller: AbortController,
  ms: number,
): Promise<Dispatcher.ResponseData> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      controller.abort();
      pending.then(
        (late) => late.body.destroy(),
        () => undefined,
      );
      reject(new ClusterTimeoutError(`no answer within ${ms} ms`));
    }, ms);
    pending.then(
      (answer) => {
        clearTimeout(timer);
        resolve(answer);
      },
      (error: unknown) => {
        clearTimeout(timer);
        reject(error as Error);
      },
    );
  });
}

/** undici's codes for a connection, an answer's start or its body that took too long. */
const TIMEOUT_CODES = new Set(['UND_ERR_CONNECT_TIMEOUT', 'UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT']);
/** Methods that may be sent again when the connection broke before any answer: doing them twice changes nothing more. */
const IDEMPOTENT = new Set(['GET', 'PUT', 'DELETE']);
/** A kept-alive connection the server had closed meanwhile: the request never got an answer. */
const STALE_CONNECTION = new Set(['UND_ERR_SOCKET', 'ECONNRESET']);

/**
 * One request over a cluster connection, carrying only what the service sets: the cluster's
 * credentials, Accept, Content-Type and User-Agent — never a header of a caller. The answer comes
 * back unread. An idempotent request whose kept-alive connection broke before any answer is sent
 * once more.
 */
export function requestCluster(conn: ClusterConnection, request: ClusterRequest): Promise<ClusterResponse> {
  return measured(conn, request, (answered) => attempt(conn, request, undefined, answered)) as Promise<ClusterResponse>;
}

/**
 * As requestCluster, but an answer that ends within `upTo` bytes comes back read whole (the resource
 * routes' reads and writes, nearly always a few KiB): no stream is made for it, and it leaves the service
 * in one write. A larger answer comes back as the stream requestCluster gives, holding every byte from
 * the first. Not for answers that may pause for long before they pass `upTo` (watches, followed logs).
 *
 * `gatherUnsized`: an answer without a Content-Length (the apiserver sends one only under 2 KiB) is
 * gathered until it ends or passes `upTo` (an object); otherwise it streams at once (a list, usually
 * large: holding its first `upTo` bytes left the service 7–15 MiB more RSS after a run of lists).
 */
export function requestClusterSettled(
  conn: ClusterConnection,
  request: ClusterRequest,
  settle: Settle,
): Promise<ClusterResponse | SettledAnswer> {
  return measured(conn, request, (answered) => attempt(conn, request, settle, answered));
}

/** How requestClusterSettled reads an answer whole. */
export interface Settle {
  upTo: number;
  gatherUnsized: boolean;
}

/** When the answer's status line and headers came (performance.now()); 0 until then. */
interface Answered {
  at: number;
}

async function measured(
  conn: ClusterConnection,
  request: ClusterRequest,
  once: (answered: Answered) => Promise<ClusterResponse | SettledAnswer>,
): Promise<ClusterResponse | SettledAnswer> {
  const started = performance.now();
  const answered: Answered = { at: 0 };
  const seconds = () => ((answered.at || performance.now()) - started) / 1000;
  try {
    const res = await retried(request, once, answered);
    recordClusterRequest(conn.clusterName, 'apiserver', outcomeOfStatus(res.statusCode), seconds());
    return res;
  } catch (error) {
    const kind = classifyFailure(error);
    recordClusterRequest(conn.clusterName, 'apiserver', kind === 'other' ? 'error' : kind, seconds());
    throw error;
  }
}

async function retried(
  request: ClusterRequest,
  once: (answered: Answered) => Promise<ClusterResponse | SettledAnswer>,
  answered: Answered,
): Promise<ClusterResponse | SettledAnswer> {
  try {
    return await once(answered);
  } catch (error) {
    // Only when no answer had begun: a read that broke off midway is not sent again.
    if (
      answered.at === 0 &&
      IDEMPOTENT.has(request.method) &&
      !isStream(request.body) &&
      STALE_CONNECTION.has((error as NodeJS.ErrnoException).code ?? '')
    ) {
      return once(answered);
    }
    throw error;
  }
}

function attempt(
  conn: ClusterConnection,
  request: ClusterRequest,
  settle: Settle | undefined,
  answered: Answered,
): Promise<ClusterResponse | SettledAnswer> {
  // A literal address never goes through the pool's lookup: the connection says whether it is refused.
  if (conn.refusedAddress !== undefined) return Promise.reject(new AddressNotAllowedError(conn.refusedAddress));
  const url = conn.server;
  const prefix = url.pathname.length > 1 ? url.pathname.replace(/\/+$/, '') : '';
  const headers: Record<string, string | string[]> = Object.assign(
    { accept: request.accept ?? 'application/json', 'user-agent': request.userAgent },
    conn.authHeaders(),
  );
  if (request.impersonate) Object.assign(headers, impersonationHeaders(request.impersonate));
  if (request.body) headers['content-type'] = request.contentType ?? 'application/json';
  if (request.body && request.contentEncoding) headers['content-encoding'] = request.contentEncoding;
  // The whole wait for the answer's start is bounded: connecting by the pool's own time-out, then the
  // answer's start by headersTimeout, and the body by bodyTimeout. A request allowed less time than the
  // pool gives connecting (a health probe) also gets a deadline of its own.
  const deadline = request.timeoutMs < (conn.connectTimeoutMs ?? Infinity) ? new AbortController() : undefined;
  const options: Dispatcher.RequestOptions = {
    method: request.method,
    path: prefix + request.path + (request.query?.size ? `?${request.query}` : ''),
    headers,
    body: request.body,
    signal: deadline?.signal,
    headersTimeout: request.timeoutMs,
    bodyTimeout: request.bodyTimeoutMs ?? request.timeoutMs,
  };
  const timedOut = (error: unknown): never => {
    if (deadline?.signal.aborted || TIMEOUT_CODES.has((error as NodeJS.ErrnoException).code ?? '')) {
      throw new ClusterTimeoutError(`no answer within ${request.timeoutMs} ms`);
    }
    throw error;
  };
  if (settle !== undefined && !deadline) {
    return new Promise<ClusterResponse | SettledAnswer>((resolve, reject) => {
      conn.dispatcher.dispatch(options, new SettlingHandler(request.method, settle, answered, resolve, reject));
    }).catch(timedOut);
  }
  const pending = conn.dispatcher.request(options);
  return (deadline ? withDeadline(pending, deadline, request.timeoutMs) : pending).then((answer) => {
    answered.at = performance.now();
    return Object.assign(answer.body, { statusCode: answer.statusCode, headers: answer.headers }) as ClusterResponse;
  }, timedOut);
}

/** undici's own body stream: what `Dispatcher.request` answers with, so a large answer streams exactly as it would there. */
const { Readable: BodyReadable } = createRequire(import.meta.url)('undici/lib/api/readable.js') as {
  Readable: new (options: {
    resume: () => void;
    abort: (reason?: Error) => void;
    contentType?: string;
    contentLength?: number | null;
  }) => Readable;
};

const noop = () => undefined;

/**
 * Receives one answer on the pool's connection (undici's dispatch handler). An answer that ends within
 * `upTo` bytes is gathered and handed on whole, with only the three headers the service passes on read.
 * Any other answer becomes undici's body stream, as `Dispatcher.request` makes it: at once when its
 * Content-Length says it is larger (or it has none, unless `gatherUnsized`), or once more than `upTo`
 * bytes have come, with those bytes first.
 */
class SettlingHandler implements Dispatcher.DispatchHandler {
  private abort: ((reason?: Error) => void) | undefined;
  private resume: () => void = noop;
  private rawHeaders: Buffer[] = [];
  private stream: Readable | undefined;
  private settled: SettledAnswer | undefined;
  private chunks: Buffer[] = [];
  private gathered = 0;

  constructor(
    private readonly method: string,
    private readonly settle: Settle,
    private readonly answered: Answered,
    private readonly resolve: (answer: ClusterResponse | SettledAnswer) => void,
    private readonly reject: (error: Error) => void,
  ) {}

  onConnect(abort: (reason?: Error) => void): void {
    this.abort = abort;
  }

  onHeaders(statusCode: number, rawHeaders: Buffer[], resume: () => void): boolean {
    if (statusCode < 200) return true;
    this.answered.at = performance.now();
    let length = NaN;
    let contentType = 'application/json';
    let warning: string | string[] | undefined;
    for (let i = 0; i < rawHeaders.length; i += 2) {
      const name = undiciUtil.headerNameToString(rawHeaders[i]);
      if (name === 'content-length') length = Number(rawHeaders[i + 1].toString('latin1'));
      else if (name === 'content-type') contentType = rawHeaders[i + 1].toString('latin1');
      else if (name === 'warning') {
        const value = rawHeaders[i + 1].toString('latin1');
        warning = warning === undefined ? value : [warning, value].flat();
      }
    }
    const { upTo, gatherUnsized } = this.settle;
    if (this.method === 'HEAD' || length > upTo || (Number.isNaN(length) && !gatherUnsized)) {
      return this.streamOn(statusCode, rawHeaders, resume);
    }
    this.settled = { statusCode, contentType, body: EMPTY, warning };
    this.rawHeaders = rawHeaders;
    this.resume = resume;
    return true;
  }

  onData(chunk: Buffer): boolean {
    if (this.stream) return this.stream.push(chunk);
    this.chunks.push(chunk);
    this.gathered += chunk.length;
    if (this.gathered <= this.settle.upTo) return true;
    // Larger than it may be held: it streams from here, the bytes gathered so far first.
    const { chunks, settled } = this;
    this.chunks = [];
    this.streamOn(settled!.statusCode, this.rawHeaders, this.resume);
    let more = true;
    for (const gathered of chunks) more = this.stream!.push(gathered);
    return more;
  }

  onComplete(): void {
    if (this.stream) {
      this.stream.push(null);
      return;
    }
    const settled = this.settled;
    if (!settled) return this.reject(new Error('the answer ended before its headers'));
    const chunks = this.chunks;
    settled.body = chunks.length === 1 ? chunks[0] : Buffer.concat(chunks, this.gathered);
    this.resolve(settled);
  }

  onError(error: Error): void {
    const stream = this.stream;
    if (!stream) return this.reject(error);
    // As undici's request handler: queued handlers run first, and the stream's error is never unhandled.
    queueMicrotask(() => stream.on('error', noop).destroy(error));
  }

  /** Hands the answer on as undici's body stream. */
  private streamOn(statusCode: number, rawHeaders: Buffer[], resume: () => void): boolean {
    const headers = undiciUtil.parseHeaders(rawHeaders) as IncomingHttpHeaders;
    const stream = new BodyReadable({
      resume,
      abort: this.abort ?? noop,
      contentType: typeof headers['content-type'] === 'string' ? headers['content-type'] : '',
      contentLength: this.method !== 'HEAD' && headers['content-length'] ? Number(headers['content-length']) : null,
    });
    this.stream = stream;
    this.resolve(Object.assign(stream, { statusCode, headers }) as ClusterResponse);
    return true;
  }
}

const EMPTY = Buffer.alloc(0);

function isStream(body: ClusterRequest['body']): boolean {
  return body !== undefined && !Buffer.isBuffer(body);
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
  'UND_ERR_SOCKET',
  'UND_ERR_CLOSED',
  'UND_ERR_DESTROYED',
]);

/** Why a request to a cluster failed: no answer in time, nothing answering, a TLS failure, a refused address, or anything else. */
export function classifyFailure(error: unknown): 'timeout' | 'unreachable' | 'tls' | 'address' | 'other' {
  if (error instanceof ClusterTimeoutError) return 'timeout';
  if (TIMEOUT_CODES.has((error as NodeJS.ErrnoException)?.code ?? '')) return 'timeout';
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
