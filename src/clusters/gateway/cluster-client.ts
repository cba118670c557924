import type { Readable } from 'node:stream';
import { impersonationHeaders, type Impersonation } from '../../access/impersonation.js';
import { AddressNotAllowedError } from '../address-policy.js';
import type { ClusterConnection } from '../cluster-connection.js';
import { STREAM, type ClusterAnswer, type ClusterResponse, type Gather } from './answer.js';
import { exchange } from './exchange.js';
import { badAnswer, readAnswer, translateFailure } from './failures.js';
import type { WriteMarks } from './write-marks.js';
import { openRawUpgrade, openWebSocket, type RawUpgradeAnswer, type UpgradeAnswer } from './upgrade.js';

export const USER_AGENT = 'cluster-admin-service/1';

/** One request toward a cluster, below its server URL. Only these fields reach the cluster. */
export interface ClusterCall {
  method: 'GET' | 'HEAD' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  /** A path below the connection's server URL, e.g. `/version` or `/api/v1/namespaces`. */
  path: string;
  query?: URLSearchParams;
  body?: Buffer | Readable;
  contentType?: string;
  /** The body's Content-Encoding (the Kubernetes path passes a caller's compressed body on). */
  contentEncoding?: string;
  accept?: string;
  /** A validator from an earlier answer: the cluster answers 304 without a body when it still holds. */
  ifNoneMatch?: string;
  /** How long the body may stall between two chunks; 0: forever (a followed log or a watch). Default: the cluster time-out. */
  bodyTimeoutMs?: number;
}

/**
 * Answers of object routes (get, create, replace, patch) that end within this size are read whole and
 * leave in one write, with their length; a connection that breaks off midway is then a 502, not a cut
 * answer. Larger ones stream from the moment they pass it.
 */
export const SMALL_ANSWER_BYTES = 64 * 1024;
/** An object's answer is gathered whether or not it has a length (the apiserver sends one only under 2 KiB). */
const GATHER_OBJECT: Gather = Object.freeze({ upTo: SMALL_ANSWER_BYTES, unsized: true });
/** A list is gathered only when its length says it is small: holding the start of a large one costs memory. */
const GATHER_LIST: Gather = Object.freeze({ upTo: SMALL_ANSWER_BYTES, unsized: false });
/** Largest answer read whole for the service's own use (discovery, an object's uid). */
const READ_LIMIT = 8 * 1024 * 1024;

/** Methods that may be sent again when the connection broke before any answer: doing them twice changes nothing more. */
const IDEMPOTENT = new Set(['GET', 'HEAD', 'PUT', 'DELETE']);

/**
 * A cluster's API, bound to one identity: the stored connection (credentials, TLS, address policy),
 * the impersonated caller (or none: the service's own identity), the user agent, the time-outs, the
 * request metrics and the one translation of failures (502/504 naming the cluster). Made by the
 * ClusterGateway; nothing else sends requests to a cluster.
 */
export class ClusterClient {
  constructor(
    readonly conn: ClusterConnection,
    /** Sent as Impersonate-* headers; undefined: the service's own identity (a cluster without impersonation, or a call the service makes for itself). */
    readonly identity: Impersonation | undefined,
    readonly timeoutMs: number,
    private readonly userAgent = USER_AGENT,
    /** The write hook: every answer to a call that is not a read marks read-your-writes for its collection. */
    private readonly writes?: WriteMarks,
  ) {}

  get name(): string {
    return this.conn.clusterName;
  }

  /** `cluster '<name>'`, as errors name it. */
  get target(): string {
    return `cluster '${this.conn.clusterName}'`;
  }

  /** The answer, unread, as a stream. */
  send(call: ClusterCall): Promise<ClusterResponse> {
    return this.call(call, STREAM) as Promise<ClusterResponse>;
  }

  /** An object's answer: read whole when it ends within SMALL_ANSWER_BYTES, else streamed from its start. */
  sendObject(call: ClusterCall): Promise<ClusterAnswer> {
    return this.call(call, GATHER_OBJECT);
  }

  /** A list's answer: read whole only when its Content-Length says it is small. */
  sendList(call: ClusterCall): Promise<ClusterAnswer> {
    return this.call(call, GATHER_LIST);
  }

  /** GET a JSON document (discovery): any non-2xx, or an answer that is not JSON, is a 502 naming the cluster. */
  async getJson(path: string): Promise<unknown> {
    const res = await this.send({ method: 'GET', path });
    const body = await this.read(res);
    if (res.statusCode >= 300) throw badAnswer(this.target, `${res.statusCode} to GET ${path}`);
    return this.parse(body, `GET ${path}`);
  }

  /** Reads an answer whole (at most 8 MiB), with the same 502/504 as a failed call. */
  read(res: ClusterResponse, limit = READ_LIMIT): Promise<Buffer> {
    return readAnswer(res, limit, this.target, this.timeoutMs);
  }

  /** A cluster's JSON answer; one that is not JSON is a 502 naming the cluster, never a 500. */
  parse(body: Buffer, what: string): any {
    try {
      return JSON.parse(body.toString('utf8'));
    } catch {
      throw badAnswer(this.target, `${what} with something that is not JSON`);
    }
  }

  /**
   * A WebSocket to `path` (exec, attach, port-forward) with the same credentials, TLS, address policy
   * and identity as every other call, offering `protocols`: open, or the cluster's refusal to pass on.
   */
  async upgrade(path: string, query: URLSearchParams, protocols: string[]): Promise<UpgradeAnswer> {
    const { conn } = this;
    try {
      if (conn.refusedAddress !== undefined) throw new AddressNotAllowedError(conn.refusedAddress);
      const url = new URL(conn.server.origin);
      url.protocol = url.protocol === 'https:' ? 'wss:' : 'ws:';
      url.pathname = conn.pathPrefix + path;
      url.search = query.toString();
      const headers: Record<string, string | string[]> = { 'user-agent': this.userAgent, ...conn.authHeaders() };
      if (this.identity) Object.assign(headers, impersonationHeaders(this.identity));
      return await openWebSocket(url, protocols, headers, conn.tls, this.timeoutMs);
    } catch (error) {
      throw translateFailure(this.target, error, this.timeoutMs);
    }
  }

  /**
   * A raw upgrade to `path` (SPDY/3.1 for kubectl's exec, attach and port-forward), offering the
   * stream protocols in `X-Stream-Protocol-Version`, as every other call: open (the bytes after it are
   * relayed untouched), or the cluster's refusal to pass on.
   */
  async upgradeRaw(
    path: string,
    query: URLSearchParams,
    protocol: string,
    streamProtocols: string[],
  ): Promise<RawUpgradeAnswer> {
    const { conn } = this;
    try {
      if (conn.refusedAddress !== undefined) throw new AddressNotAllowedError(conn.refusedAddress);
      const url = new URL(conn.server.origin);
      url.pathname = conn.pathPrefix + path;
      url.search = query.toString();
      const headers: Record<string, string | string[]> = {
        'user-agent': this.userAgent,
        'x-stream-protocol-version': streamProtocols,
        ...conn.authHeaders(),
      };
      if (this.identity) Object.assign(headers, impersonationHeaders(this.identity));
      return await openRawUpgrade(url, protocol, headers, conn.tls, this.timeoutMs);
    } catch (error) {
      throw translateFailure(this.target, error, this.timeoutMs);
    }
  }

  private async call(call: ClusterCall, gather: Gather): Promise<ClusterAnswer> {
    const { conn } = this;
    try {
      // A literal address never goes through the pool's lookup: the connection says whether it is refused.
      if (conn.refusedAddress !== undefined) throw new AddressNotAllowedError(conn.refusedAddress);
      const headers: Record<string, string | string[]> = {
        accept: call.accept ?? 'application/json',
        'user-agent': this.userAgent,
        ...conn.authHeaders(),
      };
      if (this.identity) Object.assign(headers, impersonationHeaders(this.identity));
      if (call.body !== undefined) headers['content-type'] = call.contentType ?? 'application/json';
      if (call.contentEncoding !== undefined) headers['content-encoding'] = call.contentEncoding;
      if (call.ifNoneMatch !== undefined) headers['if-none-match'] = call.ifNoneMatch;
      const answer = await exchange({
        dispatcher: conn.dispatcher,
        options: {
          method: call.method,
          path: conn.pathPrefix + call.path + (call.query?.size ? `?${call.query}` : ''),
          headers,
          body: call.body,
          headersTimeout: this.timeoutMs,
          bodyTimeout: call.bodyTimeoutMs ?? this.timeoutMs,
        },
        gather,
        timeoutMs: this.timeoutMs,
        connectTimeoutMs: conn.connectTimeoutMs,
        repeatable: IDEMPOTENT.has(call.method) && (call.body === undefined || Buffer.isBuffer(call.body)),
        cluster: conn.clusterName,
        target: 'apiserver',
      });
      return this.writes ? this.writes.observe(conn.clusterName, call, answer) : answer;
    } catch (error) {
      throw translateFailure(this.target, error, this.timeoutMs);
    }
  }
}
