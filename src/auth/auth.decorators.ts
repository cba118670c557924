import { applyDecorators, createParamDecorator, ExecutionContext, SetMetadata } from '@nestjs/common';
import {
  ApiBearerAuth,
  ApiCookieAuth,
  ApiForbiddenResponse,
  ApiSecurity,
  ApiUnauthorizedResponse,
} from '@nestjs/swagger';
import { ErrorResponseDto } from '../common/error-response.dto.js';
import type { Caller } from './caller.js';

export const ACCESS_METADATA = 'cas:access';

export interface AccessRule {
  public: boolean;
  /** Only admins (users with role admin, or admin API keys). */
  admin: boolean;
  /** Anyone may call while no user exists yet (first-time setup); afterwards the rule applies. */
  publicUntilFirstUser: boolean;
  /** Callable by an authenticated caller that holds no role (only `/auth/me` and logout). */
  withoutRole: boolean;
}

export const SECURITY_SCHEMES = { apiKey: 'apiKey', bearer: 'bearer', cookie: 'session' } as const;

/** Declares a route callable without credentials. */
export function Public(): MethodDecorator & ClassDecorator {
  return SetMetadata(ACCESS_METADATA, {
    public: true,
    admin: false,
    publicUntilFirstUser: false,
    withoutRole: true,
  } satisfies AccessRule);
}

/**
 * Declares who may call a route, and documents the same in OpenAPI. Routes with neither this nor
 * `@Public()` are refused by the global guard.
 */
export function Authenticated(
  options: { admin?: boolean; publicUntilFirstUser?: boolean; withoutRole?: boolean } = {},
) {
  const rule: AccessRule = {
    public: false,
    admin: options.admin ?? false,
    publicUntilFirstUser: options.publicUntilFirstUser ?? false,
    withoutRole: options.withoutRole ?? false,
  };
  return applyDecorators(
    SetMetadata(ACCESS_METADATA, rule),
    ApiSecurity(SECURITY_SCHEMES.apiKey),
    ApiBearerAuth(SECURITY_SCHEMES.bearer),
    ApiCookieAuth(SECURITY_SCHEMES.cookie),
    ApiUnauthorizedResponse({
      description: 'No credentials, or unknown, expired or revoked ones, or a disabled user',
      type: ErrorResponseDto,
    }),
    ApiForbiddenResponse({ description: 'The caller is not allowed to do this', type: ErrorResponseDto }),
  );
}

/** The authenticated caller of the current request. */
export const Auth = createParamDecorator((_data: unknown, context: ExecutionContext): Caller => {
  const request = context.switchToHttp().getRequest<{ caller?: Caller }>();
  if (!request.caller) throw new Error('@Auth() used on a route without @Authenticated()');
  return request.caller;
});
