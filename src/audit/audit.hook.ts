import { PATH_METADATA } from '@nestjs/common/constants.js';
import { MetadataScanner, ModulesContainer } from '@nestjs/core';
import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import { FASTIFY_ROUTE_CONFIG_METADATA } from '@nestjs/platform-fastify/constants.js';
import type { FastifyInstance } from 'fastify';
import { auditFactsOf } from './audit-facts.js';
import { auditRowFor, wantsCreatedId } from './audit-row.js';
import { AuditService } from './audit.service.js';

/**
 * Puts each route's operationId (its handler's name, as in the OpenAPI document) into the Fastify
 * route config, so the audit hook knows the operation of every request, including one refused by
 * the guard or by the body parser. Must run before the routes are registered (before `app.init()`).
 */
function labelOperations(app: NestFastifyApplication): void {
  const scanner = new MetadataScanner();
  for (const module of app.get(ModulesContainer).values()) {
    for (const wrapper of module.controllers.values()) {
      const proto = (wrapper.metatype as { prototype?: object } | null)?.prototype;
      if (!proto) continue;
      for (const name of scanner.getAllMethodNames(proto)) {
        const handler = (proto as Record<string, unknown>)[name];
        if (typeof handler !== 'function' || Reflect.getMetadata(PATH_METADATA, handler) === undefined) continue;
        const config = (Reflect.getMetadata(FASTIFY_ROUTE_CONFIG_METADATA, handler) ?? {}) as object;
        Reflect.defineMetadata(FASTIFY_ROUTE_CONFIG_METADATA, { ...config, operationId: name }, handler);
      }
    }
  }
}

/**
 * The one mechanism that records calls: after each response (never before it, never failing it) the
 * request's route, caller, path parameters and the facts routes noted become an audit row when the
 * call changed or tried to change state, or was refused. Routes added later are covered as they are.
 */
export function registerAudit(app: NestFastifyApplication, fastify: FastifyInstance): void {
  labelOperations(app);
  const audit = app.get(AuditService);
  const recorded = new WeakSet<object>();
  const capture = (request: Parameters<typeof auditRowFor>[0], statusCode: number) => {
    if (recorded.has(request)) return;
    recorded.add(request);
    try {
      const row = auditRowFor(request, statusCode, new Date(Number(request.auditStartedAt ?? Date.now())));
      if (row) audit.record(row);
    } catch (error) {
      request.log.error({ err: error }, 'could not build the audit row');
    }
  };
  fastify.decorateRequest('auditStartedAt', 0);
  fastify.addHook('onRequest', (request, reply, done) => {
    request.auditStartedAt = Date.now();
    // The caller hung up before the whole answer: no onResponse follows. The call may still have
    // done its work, so it is recorded with the status it ended with, once that is known.
    reply.raw.once('close', () => {
      if (reply.raw.writableFinished) return;
      const facts = auditFactsOf(request);
      if (facts.sent) capture(request, reply.statusCode);
      else facts.callerGone = true;
    });
    done();
  });
  fastify.addHook('onSend', (request, reply, payload, done) => {
    const facts = auditFactsOf(request);
    if (typeof payload === 'string' && wantsCreatedId(request, reply.statusCode)) facts.created = payload;
    facts.sent = true;
    if (facts.callerGone) capture(request, reply.statusCode);
    done(null, payload);
  });
  fastify.addHook('onResponse', (request, reply, done) => {
    capture(request, reply.statusCode);
    done();
  });
}

declare module 'fastify' {
  interface FastifyRequest {
    /** When the request arrived (ms since the epoch): the audit row's time. */
    auditStartedAt?: number;
  }
}
