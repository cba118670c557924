import { Logger } from '@nestjs/common';
import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import type { FastifyInstance, FastifyReply, FastifyRequest, RouteHandlerMethod } from 'fastify';
import { ACCESS_ROUTE_CONFIG, type AccessRule } from '../auth/auth.decorators.js';
import { roleRefusal } from '../auth/auth.guard.js';
import type { Caller } from '../auth/caller.js';
import { toErrorResponse } from '../common/filters/http-exception.filter.js';
import { sendAnswer, targetOf } from './resources.controller.js';
import { type ClusterAnswer, ResourcesService } from './resources.service.js';

type Serve = (resources: ResourcesService, caller: Caller, request: FastifyRequest) => Promise<ClusterAnswer>;

/**
 * The reads a console makes on every click, by operationId: what the controller method would call
 * for a request without a query (the validation pipe turns an empty query into an empty DTO).
 */
const LANES: Record<string, Serve> = {
  getResource: (resources, caller, request) => resources.getResource(caller, targetOf(request), {}),
  listResources: (resources, caller, request) => resources.listResources(caller, targetOf(request), {}),
};

function hasQuery(request: FastifyRequest): boolean {
  for (const _name in request.query as object) return true;
  return false;
}

/**
 * A direct lane for the hottest routes: a read without query parameters by a caller with a role is
 * answered by the same service method, `sendAnswer` and error body as through Nest, but without
 * Nest's per-call pipeline (execution context, guard, pipes, parameter decorators), which costs about
 * as much as the rest of the call. Everything else — a query to validate, a watch, a caller the
 * rule refuses, no caller at all — takes the Nest route unchanged, so every check there still decides it.
 *
 * The route keeps every Fastify hook: authentication (onRequest, which found the caller), audit,
 * metrics, the request log. A caller the route's rule refuses (`roleRefusal`) is left to the guard.
 */
export function registerReadLanes(app: NestFastifyApplication, fastify: FastifyInstance): void {
  const logger = new Logger('HttpError');
  const resources = app.get(ResourcesService);
  fastify.addHook('onRoute', (route) => {
    const config = route.config as { operationId?: string; [ACCESS_ROUTE_CONFIG]?: AccessRule } | undefined;
    const serve = LANES[config?.operationId ?? ''];
    const rule = config?.[ACCESS_ROUTE_CONFIG];
    if (!serve || route.method !== 'GET' || !rule || rule.public) return;
    const nest = route.handler;
    route.handler = function (this: FastifyInstance, request: FastifyRequest, reply: FastifyReply) {
      const caller = (request as FastifyRequest & { caller?: Caller }).caller;
      if (!caller || roleRefusal(caller, rule) !== undefined || hasQuery(request)) {
        return nest.call(this, request, reply);
      }
      return serve(resources, caller, request).then(
        (answer) => sendAnswer(reply, answer),
        (error: unknown) => {
          const { body, headers } = toErrorResponse(error, String(request.id), logger);
          return reply.status(body.statusCode).headers(headers).send(body);
        },
      );
    } as RouteHandlerMethod;
  });
}
