import { BadGatewayException, GatewayTimeoutException, Inject, Injectable } from '@nestjs/common';
import http, { type IncomingMessage } from 'node:http';
import https from 'node:https';
import type { ClusterConnection } from '../clusters/cluster-connection.js';
import { APP_CONFIG, type AppConfig } from '../config/config.js';

export const USER_AGENT = 'cluster-admin-service/1';

export interface UpstreamRequest {
  method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  /** An API path built by resourcePath() or a fixed discovery path. */
  path: string;
  query?: URLSearchParams;
  body?: Buffer;
  contentType?: string;
}

class UpstreamTimeout extends Error {}

const UNREACHABLE = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EPIPE',
  'ECONNABORTED',
]);

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
  async send(conn: ClusterConnection, request: UpstreamRequest): Promise<IncomingMessage> {
    try {
      return await this.attempt(conn, request);
    } catch (error) {
      // A keep-alive connection the server closed meanwhile: the request never reached it, so retry once.
      if (
        (error as { reusedSocket?: boolean }).reusedSocket &&
        (error as NodeJS.ErrnoException).code === 'ECONNRESET'
      ) {
        return this.attempt(conn, request).catch((e) => this.fail(conn, e));
      }
      return this.fail(conn, error);
    }
  }

  /** GET a JSON document (discovery); any non-2xx is an error. */
  async getJson<T>(conn: ClusterConnection, path: string): Promise<T> {
    const res = await this.send(conn, { method: 'GET', path });
    const text = await this.readAll(conn, res);
    if (res.statusCode === undefined || res.statusCode >= 300) {
      throw new BadGatewayException(`cluster '${conn.clusterName}' answered ${res.statusCode} to GET ${path}`);
    }
    return JSON.parse(text.toString('utf8')) as T;
  }

  /** Reads a (small) answer whole, with the same 502/504 mapping as send(). */
  readAll(conn: ClusterConnection, res: IncomingMessage): Promise<Buffer> {
    return readBody(res).catch((error) => this.fail(conn, error));
  }

  private attempt(conn: ClusterConnection, request: UpstreamRequest): Promise<IncomingMessage> {
    const url = conn.server;
    const secure = url.protocol === 'https:';
    const path = url.pathname.replace(/\/+$/, '') + request.path + (request.query?.size ? `?${request.query}` : '');
    const headers: Record<string, string | number> = {
      accept: 'application/json',
      'user-agent': USER_AGENT,
      ...conn.authHeaders(),
    };
    if (request.body) {
      headers['content-type'] = request.contentType ?? 'application/json';
      headers['content-length'] = request.body.length;
    }
    return new Promise((resolve, reject) => {
      const req = (secure ? https : http).request({
        host: url.hostname.replace(/^\[|\]$/g, ''),
        port: url.port || (secure ? 443 : 80),
        method: request.method,
        path,
        headers,
        agent: secure ? conn.agent : undefined,
      });
      const timer = setTimeout(() => req.destroy(new UpstreamTimeout()), this.timeoutMs);
      req.on('response', (res) => {
        clearTimeout(timer);
        // A body that stops flowing for as long as an answer may take is given up on.
        res.setTimeout(this.timeoutMs, () => res.destroy(new UpstreamTimeout()));
        resolve(res);
      });
      req.on('error', (error) => {
        clearTimeout(timer);
        reject(Object.assign(error, { reusedSocket: req.reusedSocket }));
      });
      req.end(request.body);
    });
  }

  fail(conn: ClusterConnection, error: unknown): never {
    if (error instanceof UpstreamTimeout) {
      throw new GatewayTimeoutException(
        `cluster '${conn.clusterName}' did not answer within ${this.timeoutMs / 1000} s`,
      );
    }
    const code = (error as NodeJS.ErrnoException).code ?? '';
    if (UNREACHABLE.has(code) || code.startsWith('ERR_TLS') || code.includes('CERT') || code.startsWith('ERR_SSL')) {
      throw new BadGatewayException(`cluster '${conn.clusterName}' could not be reached: ${code}`);
    }
    throw new BadGatewayException(`cluster '${conn.clusterName}' could not be reached: ${(error as Error).message}`);
  }
}

async function readBody(res: IncomingMessage, limit = 8 * 1024 * 1024): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of res) {
    size += (chunk as Buffer).length;
    if (size > limit) {
      res.destroy();
      throw new BadGatewayException(`the cluster's answer was larger than ${limit} bytes`);
    }
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks);
}
