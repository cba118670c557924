import 'reflect-metadata';
import cookie from '@fastify/cookie';
import cors from '@fastify/cors';
import { NestFactory } from '@nestjs/core';
import { FastifyAdapter, type NestFastifyApplication } from '@nestjs/platform-fastify';
import { getRepositoryToken } from '@nestjs/typeorm';
import type { FastifyInstance, FastifyReply } from 'fastify';
import { randomUUID } from 'node:crypto';
import type { Socket } from 'node:net';
import type { Server as TlsServer } from 'node:tls';
import { AppModule } from './app.module.js';
import { registerAuthentication } from './auth/auth.guard.js';
import { CredentialsService } from './auth/credentials.service.js';
import { attachDrain } from './common/drain.js';
import { errorBody } from './common/filters/http-exception.filter.js';
import { jsonBodyParser } from './common/json-body.js';
import { httpsOptions, reloadCertificatesOnChange } from './common/tls.js';
import { rawBodyOnly, unlessRawBody } from './kube/raw-body.js';
import { createAccessLog, createPino, lazyChildLogger, OneLineLogController, PinoNestLogger } from './common/logger.js';
import { registerAudit } from './audit/audit.hook.js';
import type { AppConfig } from './config/config.js';
import { attachServiceMetrics } from './metrics/service-endpoint.js';
import { setupSwagger } from './openapi.js';
import { securityHeaders } from './common/security-headers.js';
import { PodLogsService } from './resources/pod-logs.service.js';
import { registerReadLanes } from './resources/read-lane.js';
import { UserEntity } from './users/user.entity.js';

export const API_PREFIX = 'api/v1';
const MIB = 1024 * 1024;
/** Resource routes carry whole cluster objects; everything else is small. */
export const RESOURCE_BODY_LIMIT = 10 * MIB;
export const ADMIN_BODY_LIMIT = 1 * MIB;
/** Resource routes are the ones whose first segment under the prefix is the `:resource` parameter. */
const RESOURCE_ROUTE = `/${API_PREFIX}/:resource`;
/**
 * Longest raw path segment the router accepts: names are at most 253 characters (CONTRACT §7), and
 * a percent-encoded one may take three bytes per character.
 */
export const MAX_PARAM_LENGTH = 3 * 253;
const JSON_TYPES = [
  'application/json',
  'application/merge-patch+json',
  'application/json-patch+json',
  'application/strategic-merge-patch+json',
];
const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

function requestIdOf(headers: Record<string, string | string[] | undefined>): string {
  const incoming = headers['x-request-id'];
  return typeof incoming === 'string' && REQUEST_ID.test(incoming) ? incoming : randomUUID();
}

/** An error answered on a bare socket (before Fastify has a request): still the service's shape. */
function rawError(socket: Socket, statusCode: number, message: string): void {
  if (socket.destroyed) return;
  const inFlight = (socket as Socket & { _httpMessage?: { headersSent?: boolean } })._httpMessage;
  if (socket.writable && !inFlight?.headersSent) {
    const requestId = randomUUID();
    const body = JSON.stringify(errorBody(statusCode, message, requestId));
    socket.write(
      `HTTP/1.1 ${statusCode} ${errorBody(statusCode, '', '').error}\r\n` +
        `content-type: application/json; charset=utf-8\r\ncontent-length: ${Buffer.byteLength(body)}\r\n` +
        `x-request-id: ${requestId}\r\nconnection: close\r\n\r\n${body}`,
    );
  }
  socket.destroy();
}

/** Caps the open connections of one client address; the one over the cap gets a 503 and is closed. */
function capConnectionsPerAddress(fastify: FastifyInstance, max: number): void {
  if (max === 0) return;
  const open = new Map<string, number>();
  fastify.server.on('connection', (socket: Socket) => {
    const address = socket.remoteAddress ?? '';
    const count = (open.get(address) ?? 0) + 1;
    open.set(address, count);
    socket.once('close', () => {
      const left = (open.get(address) ?? 1) - 1;
      if (left <= 0) open.delete(address);
      else open.set(address, left);
    });
    if (count > max) rawError(socket, 503, `too many connections from one address (at most ${max})`);
  });
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
    // Per route below (onRoute); this one covers what no route matched.
    bodyLimit: ADMIN_BODY_LIMIT,
    trustProxy: config.trustProxy,
    routerOptions: { ignoreTrailingSlash: true, maxParamLength: MAX_PARAM_LENGTH },
    // Receiving the request (headers and body) must finish in time; the response may take longer
    // (a waited delete, a stream). Node checks these every second rather than every 30 s.
    requestTimeout: requestTimeoutMs,
    http: serverOptions,
    // CAS_TLS_CERT_FILE and CAS_TLS_KEY_FILE: the service serves https itself (see common/tls.ts).
    https: config.tls ? { ...serverOptions, ...httpsOptions(config.tls) } : undefined,
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
    const stop = reloadCertificatesOnChange(fastify.server as unknown as TlsServer, config.tls);
    fastify.addHook('onClose', (_instance, done) => (stop(), done()));
  }

  const security = securityHeaders({
    contentSecurityPolicy: {
      directives: {
        defaultSrc: ["'self'"],
        styleSrc: ["'self'", "'unsafe-inline'"],
        imgSrc: ["'self'", 'data:'],
        scriptSrc: ["'self'"],
        connectSrc: ["'self'"],
        frameAncestors: ["'none'"],
        upgradeInsecureRequests: null,
      },
    },
  });
  fastify.addHook('onRequest', (request, reply, done) => {
    reply.headers(security).header('x-request-id', request.id);
    done();
  });
  // SIGTERM: log streams end cleanly at once, so their clients reconnect to another replica
  attachDrain(app, fastify).onDrain(() => app.get(PodLogsService).closeAll());
  attachServiceMetrics(app, fastify, config);
  registerAudit(app, fastify);
  registerReadLanes(app, fastify);
  // The one safety net for errors Fastify answers from contexts Nest's filter does not cover (a body
  // refused on a path no route matches, say): the same shape, with the request id.
  fastify.addHook('onSend', (request, reply, payload, done) => {
    if (reply.statusCode < 400 || typeof payload !== 'string' || payload.length > 4096) return done(null, payload);
    let body: unknown;
    try {
      body = JSON.parse(payload);
    } catch {
      return done(null, payload);
    }
    if (!body || typeof body !== 'object' || !('statusCode' in body) || 'requestId' in body) return done(null, payload);
    const message = (body as { message?: unknown }).message;
    done(
      null,
      JSON.stringify(
        errorBody(reply.statusCode, typeof message === 'string' ? message : 'request refused', String(request.id)),
      ),
    );
  });
  capConnectionsPerAddress(fastify, limits.maxConnectionsPerAddress);
  // Limits are decided on the route the router matched (after decoding), never on the raw URL.
  fastify.addHook('onRoute', (route) => {
    route.bodyLimit ??= route.url.startsWith(RESOURCE_ROUTE) ? RESOURCE_BODY_LIMIT : ADMIN_BODY_LIMIT;
  });

  fastify.removeAllContentTypeParsers();
  // Read as it arrives, the nesting checked on each piece (see json-body.ts).
  fastify.addContentTypeParser(JSON_TYPES, unlessRawBody(jsonBodyParser(limits.maxJsonDepth)));
  // The Kubernetes API path passes every body on unread (src/kube/raw-body.ts); elsewhere any other type is a 415.
  fastify.addContentTypeParser('*', rawBodyOnly);

  await app.register(cookie);
  // Without allowed origins CORS adds nothing to any answer (and a preflight finds no route, 404):
  // the plugin is not registered at all rather than run on every request to do nothing.
  if (config.corsOrigins.length > 0) {
    await app.register(cors, {
      origin: config.corsOrigins,
      credentials: true,
      exposedHeaders: ['x-request-id', 'retry-after'],
    });
  }
  // After cookies (it reads the session cookie) and CORS (its 401 must carry CORS headers), before the body.
  registerAuthentication(fastify, app.get(CredentialsService), app.get(getRepositoryToken(UserEntity)));

  app.setGlobalPrefix(API_PREFIX, { exclude: ['healthz', 'readyz'] });
  setupSwagger(app);
  await app.init();
  return app;
}
