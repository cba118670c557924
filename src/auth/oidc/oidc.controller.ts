import { ApiErrors } from '../../common/api-errors.js';
import { noteAudit } from '../../common/audit-facts.js';
import { Controller, Get, Inject, Param, Query, Req, Res } from '@nestjs/common';
import { ApiOkResponse, ApiResponse, ApiTags } from '@nestjs/swagger';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { ErrorResponseDto } from '../../common/error-response.dto.js';
import { APP_CONFIG, type AppConfig } from '../../config/config.js';
import { Public } from '../auth.decorators.js';
import { setSessionCookie } from '../session-cookie.js';
import { AuthProviderDto, OidcCallbackQueryDto, OidcLoginQueryDto } from './dto/oidc.dto.js';
import { OIDC_LOGIN_PATH, OidcService } from './oidc.service.js';
import { SIGN_IN_STATE_SECONDS } from './sign-in-state.js';

/** One cookie per provider, so a sign-in at one does not disturb a sign-in at another. */
const stateCookie = (id: string) => `cas_oidc_${id}`;

const ERROR = { type: ErrorResponseDto };

@ApiTags('Auth')
@Controller('auth')
export class OidcController {
  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly oidc: OidcService,
  ) {}

  /** The ways to sign in: password (unless CAS_PASSWORD_LOGIN=false) and each configured OpenID Connect provider. */
  @Public()
  @Get('providers')
  @ApiOkResponse({ type: AuthProviderDto, isArray: true })
  @ApiErrors(400)
  listAuthProviders(): AuthProviderDto[] {
    const password: AuthProviderDto[] = this.config.passwordLogin
      ? [{ id: 'password', type: 'password', displayName: 'Username and password', loginUrl: null }]
      : [];
    return [
      ...password,
      ...this.oidc.list().map((p) => ({
        id: p.id,
        type: 'oidc' as const,
        displayName: p.displayName,
        loginUrl: OIDC_LOGIN_PATH(p.id),
      })),
    ];
  }

  /**
   * Starts single sign-on: redirects the browser to the provider (authorization code with PKCE S256,
   * `state` and `nonce`), binding them to a short-lived HttpOnly sealed cookie.
   */
  @Public()
  @Get('oidc/:provider/login')
  @ApiResponse({ status: 302, description: 'To the provider’s authorization endpoint' })
  @ApiResponse({ status: 400, description: 'Invalid query', ...ERROR })
  @ApiResponse({ status: 404, description: 'No such provider', ...ERROR })
  @ApiResponse({ status: 502, description: 'The provider could not be reached', ...ERROR })
  async startOidcLogin(
    @Param('provider') providerId: string,
    @Query() query: OidcLoginQueryDto,
    @Req() request: FastifyRequest,
    @Res() reply: FastifyReply,
  ): Promise<void> {
    const provider = this.oidc.provider(providerId);
    const started = await this.oidc.start(provider.id, query.redirect);
    reply.setCookie(stateCookie(provider.id), started.cookie, {
      path: this.oidc.cookiePath(provider),
      httpOnly: true,
      sameSite: 'lax',
      secure: request.protocol === 'https' || this.config.oidc.publicUrl.startsWith('https:'),
      maxAge: SIGN_IN_STATE_SECONDS,
    });
    await reply.code(302).header('cache-control', 'no-store').header('location', started.location).send();
  }

  /**
   * Where the provider sends the browser back: verifies the answer, creates or updates the user,
   * starts a session (the `cas_session` cookie) and redirects to the path given at login.
   */
  @Public()
  @Get('oidc/:provider/callback')
  @ApiResponse({ status: 302, description: 'Signed in; to the path given at login (or `/`)' })
  @ApiResponse({ status: 400, description: 'No sign-in in progress, state mismatch, invalid query', ...ERROR })
  @ApiResponse({ status: 401, description: 'The provider refused, or its answer failed verification', ...ERROR })
  @ApiResponse({ status: 403, description: 'The provider’s claims cannot make a user here', ...ERROR })
  @ApiResponse({ status: 404, description: 'No such provider', ...ERROR })
  @ApiResponse({ status: 409, description: 'The username belongs to another account', ...ERROR })
  @ApiResponse({ status: 502, description: 'The provider could not be reached', ...ERROR })
  async completeOidcLogin(
    @Param('provider') providerId: string,
    @Query() query: OidcCallbackQueryDto,
    @Req() request: FastifyRequest,
    @Res() reply: FastifyReply,
  ): Promise<void> {
    const provider = this.oidc.provider(providerId);
    // The sign-in state is single-use whatever happens next.
    reply.clearCookie(stateCookie(provider.id), { path: this.oidc.cookiePath(provider) });
    const at = request.url.indexOf('?');
    const rawQuery = at >= 0 ? request.url.slice(at) : '';
    // A sign-in starts a session: audited like a password login, though it arrives as a GET.
    noteAudit(request, { changesState: true });
    const done = await this.oidc.complete(provider.id, query, rawQuery, request.cookies?.[stateCookie(provider.id)]);
    noteAudit(request, {
      actor: { kind: 'user', id: done.user.id, name: done.user.username },
      target: { kind: 'user', id: String(done.user.id) },
    });
    setSessionCookie(request, reply, done.token, this.config.session.maxSeconds);
    await reply.code(302).header('cache-control', 'no-store').header('location', done.redirect).send();
  }
}
