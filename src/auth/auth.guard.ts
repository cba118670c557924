import {
  CanActivate,
  ExecutionContext,
  ForbiddenException,
  HttpException,
  Injectable,
  Logger,
  UnauthorizedException,
} from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import { InjectRepository } from '@nestjs/typeorm';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { Repository } from 'typeorm';
import { toErrorResponse } from '../common/filters/http-exception.filter.js';
import { refuseUndeclaredQuery } from '../common/strict-input.js';
import { UserEntity } from '../users/user.entity.js';
import { ACCESS_METADATA, ACCESS_ROUTE_CONFIG, type AccessRule } from './auth.decorators.js';
import { bootstrapCaller, type Caller } from '../access/caller.js';
import { CredentialsService } from './credentials.service.js';
import { sessionCookieOf } from './session-cookie.js';

type RequestWithCaller = FastifyRequest & { caller?: Caller };

/** Why a path that takes `Authorization` only refuses a request that carries the session cookie alone. */
export const COOKIE_NOT_ACCEPTED =
  'the session cookie is not accepted on the Kubernetes API path: send an API key or token in Authorization ' +
  '(a kubeconfig from POST /api/v1/auth/kubeconfig carries one)';

/** The credential in `Authorization: <key>` or `Authorization: Bearer <key|token>`. */
export function authorizationSecret(request: FastifyRequest): string | undefined {
  const header = request.headers.authorization?.trim();
  if (!header) return undefined;
  const bearer = /^Bearer\s+(.+)$/i.exec(header);
  return bearer ? bearer[1].trim() : header;
}

/** The credential presented: `Authorization`, else the session cookie. */
export function presentedSecret(request: FastifyRequest): string | undefined {
  return authorizationSecret(request) ?? sessionCookieOf(request);
}

/**
 * Route config: how a route answers the authentication hook's refusals (a 401 before any handler
 * runs), when not in the service's error shape — the Kubernetes API path answers a `Status`.
 */
export const REFUSAL_BODY_CONFIG = 'casRefusalBody';
export type RefusalBody = (statusCode: number, message: string) => object;

/**
 * Who is calling a non-public route: the resolved credential, or the bootstrap caller on a
 * `publicUntilFirstUser` route while no user exists; 401 otherwise. Authorization is not decided here.
 */
async function authenticate(
  request: FastifyRequest,
  rule: AccessRule,
  credentials: CredentialsService,
  users: Repository<UserEntity>,
): Promise<Caller> {
  const secret = rule.authorizationOnly ? authorizationSecret(request) : presentedSecret(request);
  if (secret) return credentials.resolve(secret);
  if (rule.authorizationOnly) {
    throw new UnauthorizedException(
      sessionCookieOf(request)
        ? COOKIE_NOT_ACCEPTED
        : 'authentication required: send an API key or token in Authorization',
    );
  }
  if (rule.publicUntilFirstUser && (await users.count()) === 0) {
    return bootstrapCaller();
  }
  throw new UnauthorizedException('authentication required');
}

/**
 * Authenticates in Fastify's `onRequest`, before the body is read: an anonymous or badly
 * credentialed request to a non-public route gets its 401 without costing a parse. The route's
 * rule comes from the route config `@Public()`/`@Authenticated()` set; the guard below then only
 * authorizes, with the caller found here.
 */
export function registerAuthentication(
  fastify: FastifyInstance,
  credentials: CredentialsService,
  users: Repository<UserEntity>,
): void {
  const logger = new Logger('Authentication');
  fastify.addHook('onRequest', async (request, reply) => {
    const config = request.routeOptions.config as
      { [ACCESS_ROUTE_CONFIG]?: AccessRule; [REFUSAL_BODY_CONFIG]?: RefusalBody } | undefined;
    const rule = config?.[ACCESS_ROUTE_CONFIG];
    if (!rule || rule.public) return;
    try {
      (request as RequestWithCaller).caller = await authenticate(request, rule, credentials, users);
    } catch (error) {
      if (!(error instanceof HttpException)) throw error;
      const { body, headers } = toErrorResponse(error, String(request.id), logger);
      const shape = config?.[REFUSAL_BODY_CONFIG];
      const message = Array.isArray(body.message) ? body.message.join('; ') : body.message;
      // Answered here: the request goes no further.
      return reply
        .code(body.statusCode)
        .headers(headers)
        .send(shape ? shape(body.statusCode, message) : body);
    }
  });
}

/** Why a route's rule refuses an authenticated caller (a 403), or undefined when it lets them through. */
function roleRefusal(caller: Caller, rule: AccessRule): string | undefined {
  if (caller.kind === 'bootstrap') return undefined;
  if (rule.admin && !caller.isAdmin) return 'this route needs the admin role';
  if (!rule.withoutRole && caller.roles.length === 0) return 'the caller has no role: ask an administrator for one';
  return undefined;
}

/**
 * The one global guard: every route is refused unless it declares `@Public()` or `@Authenticated()`;
 * an allowed call with a query parameter its route does not declare is a 400.
 */
@Injectable()
export class AuthGuard implements CanActivate {
  private readonly logger = new Logger(AuthGuard.name);

  constructor(
    private readonly reflector: Reflector,
    private readonly credentials: CredentialsService,
    @InjectRepository(UserEntity) private readonly users: Repository<UserEntity>,
  ) {}

  async canActivate(context: ExecutionContext): Promise<boolean> {
    await this.authorize(context);
    refuseUndeclaredQuery(context); // after access: a refused caller learns nothing about the route
    return true;
  }

  private async authorize(context: ExecutionContext): Promise<void> {
    const rule = this.reflector.getAllAndOverride<AccessRule | undefined>(ACCESS_METADATA, [
      context.getHandler(),
      context.getClass(),
    ]);
    if (!rule) {
      this.logger.error(`${context.getClass().name}.${context.getHandler().name} declares no access rule; refused`);
      throw new ForbiddenException('this route is not available');
    }
    if (rule.public) return;

    const request = context.switchToHttp().getRequest<RequestWithCaller>();
    // Normally found by the onRequest hook; resolved here only where the hook could not see the rule.
    const caller = request.caller ?? (await authenticate(request, rule, this.credentials, this.users));
    request.caller = caller; // also on a 403: the audit row names who was refused
    const refusal = roleRefusal(caller, rule);
    if (refusal !== undefined) throw new ForbiddenException(refusal);
  }
}
