import { HttpException } from '@nestjs/common';
import { type Readable, Transform } from 'node:stream';
import type { ClusterCall, ClusterClient } from '../clusters/gateway/cluster-client.js';
import { KubeStatusException } from './kube-status.js';

/** A request on the Kubernetes path, reduced to what may reach the cluster. */
export interface KubeRequest {
  method: ClusterCall['method'];
  /** The parsed, checked path below the server URL (`/api/v1/namespaces/a/pods`). */
  path: string;
  query: URLSearchParams;
  /** Only these of the caller's headers are passed on; everything else (credentials, cookies, Impersonate-*) stays behind. */
  headers: { accept?: string; contentType?: string; contentEncoding?: string };
  body?: Readable;
  /** A watch or a followed log: the answer may pause for as long as it likes. */
  longLived: boolean;
  /** One object's answer (verb `get`): read whole when small, as the resource routes read theirs, and sent in one write. */
  object?: boolean;
}

/** The cluster's answer, its body streaming (or whole, for a small object); only the headers a client of the API needs. */
export interface KubeAnswer {
  statusCode: number;
  headers: Record<string, string | string[]>;
  body: Readable | Buffer;
}

/** Headers of the cluster's answer that reach the caller. */
const ANSWER_HEADERS = ['content-type', 'content-encoding', 'content-length', 'warning', 'etag', 'last-modified'];

/** Passes a body on and fails it once it has carried more than `limit` bytes (`tooLarge()` then says so). */
function bounded(body: Readable, limit: number): { stream: Readable; tooLarge: () => boolean } {
  let seen = 0;
  const counter = new Transform({
    transform(chunk: Buffer, _encoding, callback) {
      seen += chunk.length;
      if (seen > limit) return callback(new Error(`the request body is larger than ${limit} bytes`));
      callback(null, chunk);
    },
  });
  body.on('error', (error) => counter.destroy(error));
  return { stream: body.pipe(counter), tooLarge: () => seen > limit };
}

/**
 * How the Kubernetes path talks to a cluster: through the gateway's client (the stored connection, the
 * caller's impersonation on an impersonating cluster, time-outs, metrics), the caller's body streamed
 * and bounded, failures as Kubernetes `Status` answers.
 */
export class KubeForwarder {
  constructor(private readonly maxBodyBytes: number) {}

  async forward(cluster: ClusterClient, request: KubeRequest): Promise<KubeAnswer> {
    const body = request.body && bounded(request.body, this.maxBodyBytes);
    let answer;
    try {
      const call = {
        method: request.method,
        path: request.path,
        query: request.query,
        body: body?.stream,
        contentType: request.headers.contentType,
        accept: request.headers.accept,
        contentEncoding: request.headers.contentEncoding,
        bodyTimeoutMs: request.longLived ? 0 : undefined,
      } satisfies ClusterCall;
      answer = request.object ? await cluster.sendObject(call) : await cluster.send(call);
    } catch (error) {
      if (body?.tooLarge()) {
        throw new KubeStatusException(413, `the request body is larger than ${this.maxBodyBytes} bytes`);
      }
      if (error instanceof HttpException) throw new KubeStatusException(error.getStatus(), error.message);
      throw error;
    }
    const headers: Record<string, string | string[]> = {};
    if (!('headers' in answer)) {
      headers['content-type'] = answer.contentType;
      if (answer.warning !== undefined) headers.warning = answer.warning;
      return { statusCode: answer.statusCode, headers, body: answer.body };
    }
    for (const name of ANSWER_HEADERS) {
      const value = answer.headers[name];
      if (value !== undefined) headers[name] = value;
    }
    return { statusCode: answer.statusCode, headers, body: answer };
  }
}
