import type { FastifyInstance } from 'fastify';
import { auditFactsOf } from '../common/audit-facts.js';
import { auditRowsFor, wantsCreatedId } from './audit-row.js';
import { AuditService } from './audit.service.js';

/**
 * The one mechanism that records calls: after each response (never before it, never failing it) the
 * request's route (its operationId, set by the HTTP edge), caller, path parameters and the facts routes noted become an audit row when the
 * call changed or tried to change state, or was refused. Routes added later are covered as they are.
 */
export function registerAudit(fastify: FastifyInstance, audit: AuditService): void {
  const recorded = new WeakSet<object>();
  const capture = (request: Parameters<typeof auditRowsFor>[0], statusCode: number) => {
    if (recorded.has(request)) return;
    recorded.add(request);
    try {
      const at = new Date(Number(request.auditStartedAt ?? Date.now()));
      for (const row of auditRowsFor(request, statusCode, at)) audit.record(row);
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
