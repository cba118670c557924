import 'reflect-metadata';
import cookie from '@fastify/cookie';
import cors from '@fastify/cors';
import helmet from '@fastify/helmet';
import { NestFactory } from '@nestjs/core';
import { FastifyAdapter, type NestFastifyApplication } from '@nestjs/platform-fastify';
import { randomUUID } from 'node:crypto';
import secureJson from 'secure-json-parse';
import { AppModule } from './app.module.js';
import { registerAudit } from './audit/audit.hook.js';
import { attachDrain } from './common/drain.js';
import { createPino, OneLineLogController, PinoNestLogger } from './common/logger.js';
import type { AppConfig } from './config/config.js';
import { attachServiceMetrics } from './metrics/service-endpoint.js';
import { setupSwagger } from './openapi.js';
import { PodLogsService } from './resources/pod-logs.service.js';

export const API_PREFIX = 'api/v1';
const MIB = 1024 * 1024;
/** Resource routes carry whole cluster objects; everything else is small. */
export const RESOURCE_BODY_LIMIT = 10 * MIB;
export const ADMIN_BODY_LIMIT = 1 * MIB;
const SMALL_BODY_ROUTES = /^\/api\/v1\/(admin|auth)(\/|\?|$)/;
const JSON_TYPES = [
  'application/json',
  'application/merge-patch+json',
  'application/json-patch+json',
  'application/strategic-merge-patch+json',
  'application/apply-patch+yaml',
];
const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/** Builds the configured application without listening: main.ts listens, tests use `inject()`. */
export async function createApp(config: AppConfig): Promise<NestFastifyApplication> {
  const pino = createPino(config.logLevel);
  const adapter = new FastifyAdapter({
    loggerInstance: pino,
    logController: new OneLineLogController(),
    bodyLimit: RESOURCE_BODY_LIMIT,
    trustProxy: config.trustProxy,
    routerOptions: { ignoreTrailingSlash: true },
    requestIdHeader: false,
    genReqId: (req: { headers: Record<string, string | string[] | undefined> }) => {
      const incoming = req.headers['x-request-id'];
      return typeof incoming === 'string' && REQUEST_ID.test(incoming) ? incoming : randomUUID();
    },
  });
  const app = await NestFactory.create<NestFastifyApplication>(AppModule.forRoot(config), adapter, {
    logger: new PinoNestLogger(pino),
    abortOnError: false,
    bodyParser: false,
  });
  const fastify = app.getHttpAdapter().getInstance();

  fastify.addHook('onRequest', async (request, reply) => {
    reply.header('x-request-id', request.id);
  });

  // SIGTERM: log streams end cleanly at once, so their clients reconnect to another replica
  attachDrain(app, fastify).onDrain(() => app.get(PodLogsService).closeAll());
  attachServiceMetrics(app, fastify, config);
  registerAudit(app, fastify);

  fastify.removeAllContentTypeParsers();
  fastify.addContentTypeParser(
    JSON_TYPES.filter((t) => !t.endsWith('yaml')),
    { parseAs: 'string' },
    (request, body, done) => {
      const text = body as string;
      if (SMALL_BODY_ROUTES.test(request.url) && Buffer.byteLength(text) > ADMIN_BODY_LIMIT) {
        done(
          Object.assign(new Error(`request body is larger than ${ADMIN_BODY_LIMIT} bytes`), { statusCode: 413 }),
          undefined,
        );
        return;
      }
      if (text.trim() === '') return done(null, undefined);
      try {
        done(null, secureJson.parse(text, undefined, { protoAction: 'remove', constructorAction: 'remove' }));
      } catch (error) {
        done(
          Object.assign(new Error(`body is not valid JSON: ${(error as Error).message}`), { statusCode: 400 }),
          undefined,
        );
      }
    },
  );

  await app.register(helmet, {
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
  await app.register(cookie);
  await app.register(cors, {
    origin: config.corsOrigins.length > 0 ? config.corsOrigins : false,
    credentials: true,
    exposedHeaders: ['x-request-id', 'retry-after'],
  });

  app.setGlobalPrefix(API_PREFIX, { exclude: ['healthz', 'readyz'] });
  setupSwagger(app);
  await app.init();
  return app;
}
