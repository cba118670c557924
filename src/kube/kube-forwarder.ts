import type { IncomingHttpHeaders } from 'node:http';
import { type Readable, Transform } from 'node:stream';
import type { Impersonation } from '../access/impersonation.js';
import type { ClusterConnection } from '../clusters/cluster-connection.js';
import { classifyFailure, type ClusterRequest, describeFailure, requestCluster } from '../clusters/cluster-request.js';
import { KubeStatusException } from './kube-status.js';

export const KUBE_USER_AGENT = 'cluster-admin-service/1 (kubernetes-api)';

/** A request on the Kubernetes path, reduced to what may reach the cluster. */
export interface KubeRequest {
  method: ClusterRequest['method'];
  /** The parsed, checked path below the server URL (`/api/v1/namespaces/a/pods`). */
  path: string;
  query: URLSearchParams;
  /** Only these of the caller's headers are passed on; everything else (credentials, cookies, Impersonate-*) stays behind. */
  headers: { accept?: string; contentType?: string; contentEncoding?: string };
  body?: Readable;
  /** A watch or a followed log: the answer may pause for as long as it likes. */
  longLived: boolean;
}

/** The cluster's answer, its body streaming; only the headers a client of the API needs. */
export interface KubeAnswer {
  statusCode: number;
  headers: Record<string, string | string[]>;
  body: Readable;
}

/** Headers of the cluster's answer that reach the caller. */
const ANSWER_HEADERS = ['content-type', 'content-encoding', 'content-length', 'warning', 'etag', 'last-modified'];

class BodyTooLarge extends Error {}

/** Passes a body on and fails it once it has carried more than `limit` bytes. */
function bounded(body: Readable, limit: number): Readable {
  let seen = 0;
  const counter = new Transform({
    transform(chunk: Buffer, _encoding, callback) {
      seen += chunk.length;
      if (seen > limit) return callback(new BodyTooLarge());
      callback(null, chunk);
    },
  });
  body.on('error', (error) => counter.destroy(error));
  return body.pipe(counter);
}

/**
 * The one place the Kubernetes path talks to a cluster: the stored connection's credentials,
 * impersonation when the cluster impersonates, the caller's body streamed and bounded, and one
 * translation of failures (502/504 naming the cluster). The seam the data-plane gateway replaces.
 */
export class KubeForwarder {
  constructor(
    private readonly timeoutMs: number,
    private readonly maxBodyBytes: number,
  ) {}

  async forward(
    conn: ClusterConnection,
    impersonate: Impersonation | undefined,
    request: KubeRequest,
  ): Promise<KubeAnswer> {
    let answer;
    try {
      answer = await requestCluster(conn, {
        method: request.method,
        path: request.path,
        query: request.query,
        body: request.body && bounded(request.body, this.maxBodyBytes),
        contentType: request.headers.contentType,
        accept: request.headers.accept,
        contentEncoding: request.headers.contentEncoding,
        impersonate,
        userAgent: KUBE_USER_AGENT,
        timeoutMs: this.timeoutMs,
        bodyTimeoutMs: request.longLived ? 0 : this.timeoutMs,
      });
    } catch (error) {
      if (error instanceof BodyTooLarge || (error as { cause?: unknown })?.cause instanceof BodyTooLarge) {
        throw new KubeStatusException(413, `the request body is larger than ${this.maxBodyBytes} bytes`);
      }
      if (classifyFailure(error) === 'timeout') {
        throw new KubeStatusException(
          504,
          `cluster '${conn.clusterName}' did not answer within ${this.timeoutMs / 1000} s`,
        );
      }
      throw new KubeStatusException(
        502,
        `cluster '${conn.clusterName}' could not be reached: ${describeFailure(error)}`,
      );
    }
    const headers: Record<string, string | string[]> = {};
    for (const name of ANSWER_HEADERS) {
      const value = (answer.headers as IncomingHttpHeaders)[name];
      if (value !== undefined) headers[name] = value;
    }
    return { statusCode: answer.statusCode, headers, body: answer };
  }
}
