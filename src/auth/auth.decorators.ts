import { applyDecorators, createParamDecorator, ExecutionContext, SetMetadata } from '@nestjs/common';
import { RouteConfig } from '@nestjs/platform-fastify';
import { ApiBearerAuth, ApiCookieAuth, ApiExtension, ApiSecurity } from '@nestjs/swagger';
import { ACCESS_EXTENSION, ApiErrors } from '../common/api-errors.js';
import type { Caller } from '../access/caller.js';

export const ACCESS_METADATA = 'cas:access';

export interface AccessRule {
  public: boolean;
  /** Only admins (users with role admin, or admin API keys). */
  admin: boolean;
  /** Anyone may call while no user exists yet (first-time setup); afterwards the rule applies. */
  publicUntilFirstUser: boolean;
  /** Callable by an authenticated caller that holds no role (only `/auth/me` and logout). */
  withoutRole: boolean;
  /**
   * Only a credential in `Authorization` (an API key or a token); the session cookie is refused. For
   * paths a browser must never reach with its ambient session (the Kubernetes API path).
   */
  authorizationOnly?: boolean;
}

/**
 * The same rule as Fastify route config, so the authentication hook (which runs before the body is
 * read, where Nest's metadata is out of reach) knows whether a route is public.
 */
export const ACCESS_ROUTE_CONFIG = 'casAccess';

function accessMetadata(rule: AccessRule): MethodDecorator & ClassDecorator {
  const metadata = SetMetadata(ACCESS_METADATA, rule);
  const routeConfig = RouteConfig({ [ACCESS_ROUTE_CONFIG]: rule });
  return ((target: object, key?: string | symbol, descriptor?: PropertyDescriptor) => {
    if (descriptor) {
      metadata(target, key!, descriptor);
      routeConfig(target, key!, descriptor);
      return descriptor;
    }
    // On a class only the guard sees the rule: the hook then treats its routes as non-public (fails closed).
    metadata(target as never);
    return target;
  }) as MethodDecorator & ClassDecorator;
}

export const SECURITY_SCHEMES = { apiKey: 'apiKey', bearer: 'bearer', cookie: 'session' } as const;

/** Declares a route callable without credentials. */
export function Public(): MethodDecorator & ClassDecorator {
  return applyDecorators(
    accessMetadata({ public: true, admin: false, publicUntilFirstUser: false, withoutRole: true }),
    ApiExtension(ACCESS_EXTENSION, 'Public: no credentials needed.'),
  );
}

/** Who may call, in words, for the operation's description in the OpenAPI document. */
function describeAccess(rule: AccessRule): string {
  const who = rule.admin
    ? 'the admin role (a user with role `admin`, or an admin API key)'
    : rule.withoutRole
      ? 'a signed-in user or an API key, with or without a role'
      : 'a signed-in user or an API key with a role';
  if (rule.authorizationOnly) {
    return `Needs ${who}, sent in \`Authorization\` (a kubeconfig from \`POST /api/v1/auth/kubeconfig\` does): the session cookie is not accepted here.`;
  }
  return rule.publicUntilFirstUser
    ? `Public while no user exists (first-time setup: send no credentials); afterwards needs ${who}.`
    : `Needs ${who}.`;
}

/**
 * Declares who may call a route, and documents the same in OpenAPI. Routes with neither this nor
 * `@Public()` are refused by the global guard.
 */
export function Authenticated(
  options: { admin?: boolean; publicUntilFirstUser?: boolean; withoutRole?: boolean; authorizationOnly?: boolean } = {},
) {
  const rule: AccessRule = {
    public: false,
    admin: options.admin ?? false,
    publicUntilFirstUser: options.publicUntilFirstUser ?? false,
    withoutRole: options.withoutRole ?? false,
    ...(options.authorizationOnly ? { authorizationOnly: true } : {}),
  };
  return applyDecorators(
    accessMetadata(rule),
    // Alternatives, one requirement object each: a client sends one of them (`Authorization` wins over the cookie).
    ApiSecurity(SECURITY_SCHEMES.apiKey),
    ApiBearerAuth(SECURITY_SCHEMES.bearer),
    ...(rule.authorizationOnly ? [] : [ApiCookieAuth(SECURITY_SCHEMES.cookie)]),
    // `{}`: no credentials at all is an alternative too, while no user exists.
    ...(rule.publicUntilFirstUser ? [ApiSecurity({})] : []),
    ApiExtension(ACCESS_EXTENSION, describeAccess(rule)),
    ApiErrors(401, 403),
  );
}

/** The authenticated caller of the current request. */
export const Auth = createParamDecorator((_data: unknown, context: ExecutionContext): Caller => {
  const request = context.switchToHttp().getRequest<{ caller?: Caller }>();
  if (!request.caller) throw new Error('@Auth() used on a route without @Authenticated()');
  return request.caller;
});
