import 'reflect-metadata';
import { NestFactory } from '@nestjs/core';
import { FastifyAdapter, type NestFastifyApplication } from '@nestjs/platform-fastify';
import type { FastifyReply } from 'fastify';
import { randomUUID } from 'node:crypto';
import type { Socket } from 'node:net';
import type { Server as TlsServer } from 'node:tls';
import { AppModule } from './app.module.js';
import { errorBody } from './common/filters/http-exception.filter.js';
import { httpsOptions, reloadCertificatesOnChange } from './common/tls.js';
import { createAccessLog, createPino, lazyChildLogger, OneLineLogController, PinoNestLogger } from './common/logger.js';
import type { AppConfig } from './config/config.js';
import { API_PREFIX, HttpEdge } from './http/edge.js';
import { rawError } from './http/raw-error.js';
import { setupSwagger } from './openapi.js';

export { ADMIN_BODY_LIMIT, API_PREFIX, RESOURCE_BODY_LIMIT } from './http/edge.js';

/**
 * Longest raw path segment the router accepts: names are at most 253 characters (Kubernetes' own bound), and
 * a percent-encoded one may take three bytes per character.
 */
export const MAX_PARAM_LENGTH = 3 * 253;
const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

function requestIdOf(headers: Record<string, string | string[] | undefined>): string {
  const incoming = headers['x-request-id'];
  return typeof incoming === 'string' && REQUEST_ID.test(incoming) ? incoming : randomUUID();
}

/** Builds the configured application without listening: main.ts listens, tests use `inject()`. */
export async function createApp(config: AppConfig): Promise<NestFastifyApplication> {
  const pino = createPino(config.logLevel);
  const limits = config.limits;
  const requestTimeoutMs = limits.requestTimeoutSeconds * 1000;
  const serverOptions = {
    requestTimeout: requestTimeoutMs,
    headersTimeout: Math.min(requestTimeoutMs, 60_000),
    connectionsCheckingInterval: Math.min(1000, requestTimeoutMs),
  };
  const adapter = new FastifyAdapter({
    loggerInstance: pino,
    // No Nest middleware is used: without middie no request runs its (empty) middleware chain.
    skipMiddie: true,
    logController: new OneLineLogController(createAccessLog(config.logLevel)),
    // A request's logger is made when something logs through it, not for every request.
    childLoggerFactory: lazyChildLogger,
    trustProxy: config.trustProxy,
    routerOptions: { ignoreTrailingSlash: true, maxParamLength: MAX_PARAM_LENGTH },
    // Receiving the request (headers and body) must finish in time; the response may take longer
    // (a waited delete, a stream). Node checks these every second rather than every 30 s.
    requestTimeout: requestTimeoutMs,
    http: serverOptions,
    // CAS_TLS_CERT_FILE and CAS_TLS_KEY_FILE: the service serves https itself (see common/tls.ts), as HTTP/2
    // (a browser then opens every live view of a page on one connection instead of six at most) and as
    // HTTP/1.1 (curl and Go clients without ALPN, and every upgrade: WebSocket and SPDY are HTTP/1.1 only).
    http2: config.tls ? true : undefined,
    https: config.tls ? { allowHTTP1: true, ...httpsOptions(config.tls) } : undefined,
    // An idle HTTP/2 connection is closed as an idle HTTP/1.1 one is.
    http2SessionTimeout: limits.keepAliveTimeoutSeconds * 1000,
    connectionTimeout: limits.connectionTimeoutSeconds * 1000,
    keepAliveTimeout: limits.keepAliveTimeoutSeconds * 1000,
    requestIdHeader: false,
    genReqId: (req: { headers: Record<string, string | string[] | undefined> }) => requestIdOf(req.headers),
    // A malformed URL (400) or an over-long path segment (414), answered by the router before any hook.
    frameworkErrors: (error, request, reply) => {
      const statusCode = (error as { statusCode?: number }).statusCode ?? 400;
      void (reply as unknown as FastifyReply)
        .code(statusCode)
        .header('x-request-id', request.id)
        .send(errorBody(statusCode, error.message, String(request.id)));
    },
    // Errors on the socket before a request exists: a request not received in time (408), bad HTTP (400).
    clientErrorHandler: (error: NodeJS.ErrnoException, socket: Socket) => {
      if (error.code === 'ECONNRESET') return socket.destroy();
      if (error.code === 'ERR_HTTP_REQUEST_TIMEOUT') {
        return rawError(socket, 408, `the request was not received within ${limits.requestTimeoutSeconds} s`);
      }
      if (error.code === 'HPE_HEADER_OVERFLOW') return rawError(socket, 431, 'request headers are too large');
      rawError(socket, 400, 'malformed HTTP request');
    },
  } as ConstructorParameters<typeof FastifyAdapter>[0]);
  const app = await NestFactory.create<NestFastifyApplication>(AppModule.forRoot(config), adapter, {
    logger: new PinoNestLogger(pino),
    abortOnError: false,
    bodyParser: false,
  });
  const fastify = app.getHttpAdapter().getInstance();
  if (config.tls) {
    // Node's HTTP/2 server takes its HTTP/1.1 connections' time-outs as properties, not options.
    Object.assign(fastify.server, { ...serverOptions, keepAliveTimeout: limits.keepAliveTimeoutSeconds * 1000 });
    const stop = reloadCertificatesOnChange(fastify.server as unknown as TlsServer, config.tls);
    fastify.addHook('onClose', (_instance, done) => (stop(), done()));
  }
  app.setGlobalPrefix(API_PREFIX, { exclude: ['healthz', 'readyz', 'metrics'] });
  const document = setupSwagger(app);
  await app.get(HttpEdge).register(app, document);
  await app.init();
  return app;
}
