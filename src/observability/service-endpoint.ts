import { Inject, Injectable, Logger, OnApplicationBootstrap, OnApplicationShutdown } from '@nestjs/common';
import { createHash, randomUUID, timingSafeEqual } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { errorBody } from '../common/filters/http-exception.filter.js';
import { APP_CONFIG, type AppConfig } from '../config/config.js';
import { exposition } from './service-metrics.js';

export const METRICS_PATH = '/metrics';

const digest = (value: string) => createHash('sha256').update(value).digest();

/** Whether an Authorization header carries the metrics token (compared in constant time). */
export function carriesToken(header: string | undefined, token: string): boolean {
  const match = /^Bearer +(\S{1,1024})$/i.exec(header?.trim() ?? '');
  return match !== null && timingSafeEqual(digest(match[1]), digest(token));
}

/**
 * With CAS_METRICS_PORT, a listener of its own that serves only `GET /metrics` (to a bearer of
 * CAS_METRICS_TOKEN when that is set too), for scraping on the pod network without exposing the API.
 */
@Injectable()
export class MetricsListener implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly logger = new Logger(MetricsListener.name);
  private server?: http.Server;

  constructor(@Inject(APP_CONFIG) private readonly config: AppConfig) {}

  async onApplicationBootstrap(): Promise<void> {
    const { port, host, token } = this.config.metrics;
    if (port === undefined) return;
    const server = http.createServer((req, res) => void this.handle(req, res, token));
    server.requestTimeout = 10_000;
    server.headersTimeout = 5_000;
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, host, () => resolve());
    });
    this.server = server;
    this.logger.log(`serving ${METRICS_PATH} on ${host}:${this.address()?.port}`);
  }

  /** Where the listener is bound, or undefined when there is none. */
  address(): AddressInfo | undefined {
    return (this.server?.address() as AddressInfo | null) ?? undefined;
  }

  async onApplicationShutdown(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    if (!server) return;
    await new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    });
  }

  private async handle(req: http.IncomingMessage, res: http.ServerResponse, token: string | undefined) {
    const requestId = randomUUID();
    const fail = (status: number, message: string, headers: Record<string, string> = {}) => {
      res.writeHead(status, { 'content-type': 'application/json', 'x-request-id': requestId, ...headers });
      res.end(JSON.stringify(errorBody(status, message, requestId)));
    };
    const path = (req.url ?? '').split('?')[0];
    if (path !== METRICS_PATH) return fail(404, `only GET ${METRICS_PATH} is served on this port`);
    if (req.method !== 'GET' && req.method !== 'HEAD') return fail(405, `only GET ${METRICS_PATH}`, { allow: 'GET' });
    if (token !== undefined && !carriesToken(req.headers.authorization, token)) {
      return fail(401, 'GET /metrics needs the metrics token: Authorization: Bearer <CAS_METRICS_TOKEN>', {
        'www-authenticate': 'Bearer realm="metrics"',
      });
    }
    try {
      const { contentType, body } = await exposition();
      res.writeHead(200, { 'content-type': contentType, 'cache-control': 'no-store', 'x-request-id': requestId });
      res.end(req.method === 'HEAD' ? undefined : body);
    } catch (error) {
      this.logger.error(`collecting metrics failed: ${(error as Error).message}`);
      fail(500, 'internal error');
    }
  }
}
