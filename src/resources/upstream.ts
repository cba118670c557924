import { BadGatewayException, GatewayTimeoutException, HttpException, Inject, Injectable } from '@nestjs/common';
import { readBounded } from '../common/read-bounded.js';
import type { ClusterConnection } from '../clusters/cluster-connection.js';
import {
  classifyFailure,
  describeFailure,
  requestCluster,
  requestClusterSettled,
  type Settle,
  type ClusterRequest,
  type ClusterResponse,
  type SettledAnswer,
} from '../clusters/cluster-request.js';
import { APP_CONFIG, type AppConfig } from '../config/config.js';

export const USER_AGENT = 'cluster-admin-service/1';

/**
 * Answers that end within this size are read whole and sent to the caller in one write, with their
 * length: fewer system calls and stream objects than piping them, and a connection that breaks off
 * midway is a 502, not a cut answer. Larger ones stream, from the moment they pass it; so does a list
 * without a Content-Length (the apiserver gives one only under 2 KiB).
 */
export const SMALL_ANSWER_BYTES = 64 * 1024;

const SETTLE_OBJECT: Settle = Object.freeze({ upTo: SMALL_ANSWER_BYTES, gatherUnsized: true });
const SETTLE_LIST: Settle = Object.freeze({ upTo: SMALL_ANSWER_BYTES, gatherUnsized: false });

export type UpstreamRequest = Omit<ClusterRequest, 'userAgent' | 'timeoutMs'>;

/**
 * Sends requests to a cluster. The request carries only what the service sets: the cluster's
 * credentials, Accept, Content-Type and User-Agent — never a header of the caller.
 */
@Injectable()
export class UpstreamClient {
  readonly timeoutMs: number;

  constructor(@Inject(APP_CONFIG) config: AppConfig) {
    this.timeoutMs = config.clusterRequestTimeoutSeconds * 1000;
  }

  /** The cluster's response, unread, for streaming; 502/504 naming the cluster when it cannot answer. */
  send(conn: ClusterConnection, request: UpstreamRequest): Promise<ClusterResponse> {
    return requestCluster(conn, this.toCluster(request)).catch((error) => this.fail(conn, error));
  }

  /**
   * The request as the cluster client takes it: every field set, always in this order. Built field by
   * field (a spread of the caller's object, whose shape differs from route to route, made V8 copy it the
   * slow way on every call and left every later read of it slow too).
   */
  private toCluster(request: UpstreamRequest): ClusterRequest {
    return {
      method: request.method,
      path: request.path,
      query: request.query,
      body: request.body,
      contentType: request.contentType,
      impersonate: request.impersonate,
      bodyTimeoutMs: request.bodyTimeoutMs,
      userAgent: USER_AGENT,
      timeoutMs: this.timeoutMs,
    };
  }

  /** Reads a cluster's JSON answer; one that is not JSON is a 502 naming the cluster, never a 500. */
  parseJson(conn: ClusterConnection, body: Buffer, what: string): any {
    try {
      return JSON.parse(body.toString('utf8'));
    } catch {
      throw new BadGatewayException(`cluster '${conn.clusterName}' answered ${what} with something that is not JSON`);
    }
  }

  /** GET a JSON document (discovery); any non-2xx, or an answer that is not JSON, is a 502 naming the cluster. */
  async getJson(conn: ClusterConnection, path: string): Promise<unknown> {
    const res = await this.send(conn, { method: 'GET', path });
    const text = await this.readAll(conn, res);
    if (res.statusCode >= 300) {
      throw new BadGatewayException(`cluster '${conn.clusterName}' answered ${res.statusCode} to GET ${path}`);
    }
    return this.parseJson(conn, text, `GET ${path}`) as unknown;
  }

  /**
   * The answer read whole when it ends within SMALL_ANSWER_BYTES; otherwise the stream, from its start.
   * Failures as send().
   */
  sendSettled(conn: ClusterConnection, request: UpstreamRequest): Promise<ClusterResponse | SettledAnswer> {
    return requestClusterSettled(conn, this.toCluster(request), SETTLE_OBJECT).catch((error) => this.fail(conn, error));
  }

  /** As sendSettled, but a list's answer is read whole only when its Content-Length says it is small. */
  sendListSettled(conn: ClusterConnection, request: UpstreamRequest): Promise<ClusterResponse | SettledAnswer> {
    return requestClusterSettled(conn, this.toCluster(request), SETTLE_LIST).catch((error) => this.fail(conn, error));
  }

  /** Reads a (small) answer whole, with the same 502/504 mapping as send(). */
  readAll(conn: ClusterConnection, res: ClusterResponse): Promise<Buffer> {
    return readBody(res).catch((error) => this.fail(conn, error));
  }

  fail(conn: ClusterConnection, error: unknown): never {
    const failure = classifyFailure(error);
    if (failure === 'timeout') {
      throw new GatewayTimeoutException(
        `cluster '${conn.clusterName}' did not answer within ${this.timeoutMs / 1000} s`,
      );
    }
    if (error instanceof HttpException) throw error;
    throw new BadGatewayException(`cluster '${conn.clusterName}' could not be reached: ${describeFailure(error)}`);
  }
}

function readBody(res: ClusterResponse, limit = 8 * 1024 * 1024): Promise<Buffer> {
  return readBounded(res, limit, (l) => new BadGatewayException(`the cluster's answer was larger than ${l} bytes`));
}
