import {
  BadGatewayException,
  BadRequestException,
  HttpException,
  Inject,
  Injectable,
  Logger,
  NotFoundException,
  OnApplicationBootstrap,
  UnauthorizedException,
} from '@nestjs/common';
import { InjectRepository } from '@nestjs/typeorm';
import * as client from 'openid-client';
import { In, Repository } from 'typeorm';
import { APP_CONFIG, type AppConfig, type OidcProviderConfig } from '../../config/config.js';
import { RoleEntity, type RoleName } from '../../users/role.entity.js';
import type { UserEntity } from '../../users/user.entity.js';
import { UsersService } from '../../users/users.service.js';
import { AuthService, type StartedSession } from '../auth.service.js';
import { externalUserFrom } from './claims.js';
import type { OidcCallbackQueryDto } from './dto/oidc.dto.js';
import { safeRedirect, sameSecret, SIGN_IN_STATE_SECONDS, SignInStateBox } from './sign-in-state.js';

/**
 * A provider's discovery document (and with it openid-client's JWKS cache, which belongs to it) is
 * kept this long per replica, then fetched again at the next sign-in. The provider is the only
 * source of truth, so there is nothing to invalidate across replicas. Within that time openid-client
 * re-reads the JWKS every 5 minutes, and at once on an unknown `kid` when its copy is a minute old.
 */
const DISCOVERY_TTL_MS = 60 * 60 * 1000;

export const OIDC_CALLBACK_PATH = (id: string) => `/api/v1/auth/oidc/${id}/callback`;
export const OIDC_LOGIN_PATH = (id: string) => `/api/v1/auth/oidc/${id}/login`;

export interface StartedSignIn {
  /** The provider's authorization URL to send the browser to. */
  location: string;
  /** The sealed sign-in state for the cookie. */
  cookie: string;
}

export interface CompletedSignIn extends StartedSession {
  user: UserEntity;
  redirect: string;
}

function isLoopbackHttp(url: string): boolean {
  return new URL(url).protocol === 'http:';
}

@Injectable()
export class OidcService implements OnApplicationBootstrap {
  private readonly logger = new Logger(OidcService.name);
  private readonly providers: Map<string, OidcProviderConfig>;
  private readonly discovered = new Map<string, { at: number; config: Promise<client.Configuration> }>();
  private readonly stateBox: SignInStateBox;

  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly auth: AuthService,
    private readonly users: UsersService,
    @InjectRepository(RoleEntity) private readonly roles: Repository<RoleEntity>,
  ) {
    this.providers = new Map(config.oidc.providers.map((p) => [p.id, p]));
    this.stateBox = new SignInStateBox(config);
  }

  /** A role map naming a role that does not exist is only warned about: roles can be created after start. */
  async onApplicationBootstrap(): Promise<void> {
    for (const provider of this.providers.values()) {
      if (!provider.roleMap) {
        this.logger.log(`OpenID provider '${provider.id}': no role map; administrators assign its users' roles`);
        continue;
      }
      const named = [...new Set([...provider.roleMap.values()].flat())];
      const known = new Set((await this.roles.findBy({ name: In(named as RoleName[]) })).map((r) => r.name as string));
      for (const role of named.filter((r) => !known.has(r))) {
        this.logger.warn(
          `CAS_OIDC_${provider.id.toUpperCase()}_ROLE_MAP names role '${role}', which does not exist; it is skipped until it does`,
        );
      }
    }
  }

  list(): OidcProviderConfig[] {
    return [...this.providers.values()];
  }

  provider(id: string): OidcProviderConfig {
    const provider = this.providers.get(id);
    if (!provider) throw new NotFoundException(`no OpenID provider '${id.slice(0, 64)}' is configured`);
    return provider;
  }

  redirectUri(provider: OidcProviderConfig): string {
    return this.config.oidc.publicUrl + OIDC_CALLBACK_PATH(provider.id);
  }

  /** The cookie path: only the callback ever receives the sign-in state. */
  cookiePath(provider: OidcProviderConfig): string {
    return new URL(this.redirectUri(provider)).pathname;
  }

  /** Step 1: where to send the browser, with PKCE (S256), state and nonce bound to the sealed cookie. */
  async start(id: string, redirect: string | undefined): Promise<StartedSignIn> {
    const provider = this.provider(id);
    const configuration = await this.configuration(provider);
    const verifier = client.randomPKCECodeVerifier();
    const state = client.randomState();
    const nonce = client.randomNonce();
    const location = client.buildAuthorizationUrl(configuration, {
      redirect_uri: this.redirectUri(provider),
      scope: provider.scopes.join(' '),
      response_type: 'code',
      code_challenge: await client.calculatePKCECodeChallenge(verifier),
      code_challenge_method: 'S256',
      state,
      nonce,
    });
    const cookie = this.stateBox.seal(provider.id, {
      state,
      nonce,
      verifier,
      redirect: safeRedirect(redirect),
      expiresAt: Date.now() + SIGN_IN_STATE_SECONDS * 1000,
    });
    return { location: location.href, cookie };
  }

  /**
   * Step 2: the provider sent the browser back. The state must match the cookie; the code is
   * exchanged (with the PKCE verifier) and the ID token verified (signature against the provider's
   * JWKS, `iss`, `aud`, `exp`, `nonce`, the one configured algorithm); then the user is created or
   * updated and a session starts.
   */
  async complete(id: string, query: OidcCallbackQueryDto, rawQuery: string, cookie: string | undefined) {
    const provider = this.provider(id);
    const signIn = this.stateBox.open(provider.id, cookie);
    if (!signIn) {
      throw new BadRequestException(
        `no sign-in with provider '${provider.id}' is in progress in this browser (its cookie is missing, expired or altered); start again at ${OIDC_LOGIN_PATH(provider.id)}`,
      );
    }
    if (!query.state || !sameSecret(query.state, signIn.state)) {
      throw new BadRequestException('the state parameter does not match this sign-in; start again');
    }
    if (query.error) {
      const detail = query.error_description ? `: ${query.error_description.slice(0, 200)}` : '';
      throw new UnauthorizedException(`provider '${provider.id}' refused the sign-in (${query.error}${detail})`);
    }
    if (!query.code) throw new BadRequestException('the provider sent no authorization code');

    const configuration = await this.configuration(provider);
    const currentUrl = new URL(this.redirectUri(provider));
    currentUrl.search = rawQuery;
    let claims: Record<string, unknown>;
    try {
      const tokens = await client.authorizationCodeGrant(configuration, currentUrl, {
        pkceCodeVerifier: signIn.verifier,
        expectedState: signIn.state,
        expectedNonce: signIn.nonce,
        idTokenExpected: true,
      });
      claims = { ...(tokens.claims() ?? {}) };
      const needsUserInfo = !(provider.usernameClaim in claims) || !(provider.groupsClaim in claims);
      if (needsUserInfo && tokens.access_token) {
        const info = await client.fetchUserInfo(configuration, tokens.access_token, String(claims.sub));
        claims = { ...info, ...claims };
      }
    } catch (error) {
      throw this.providerFailure(provider, error, 'sign-in');
    }
    const external = externalUserFrom(provider, claims);
    const user = await this.users.signInExternalUser(external);
    const session = await this.auth.startSession(user.id);
    this.logger.log(`user '${user.username}' signed in with ${external.provider}`);
    return { ...session, user, redirect: signIn.redirect } satisfies CompletedSignIn;
  }

  /** openid-client's discovery, cached (see DISCOVERY_TTL_MS); failures are not cached. */
  private configuration(provider: OidcProviderConfig): Promise<client.Configuration> {
    const cached = this.discovered.get(provider.id);
    if (cached && Date.now() - cached.at < DISCOVERY_TTL_MS) return cached.config;
    const config = client
      .discovery(
        new URL(provider.issuer),
        provider.clientId,
        {
          id_token_signed_response_alg: provider.idTokenAlg,
          [client.clockTolerance]: this.config.oidc.clockToleranceSeconds,
        },
        client.ClientSecretBasic(provider.clientSecret),
        {
          algorithm: 'oidc',
          timeout: this.config.oidc.timeoutSeconds,
          execute: isLoopbackHttp(provider.issuer) ? [client.allowInsecureRequests] : [],
        },
      )
      .then((configuration) => {
        // ID tokens are verified against the provider's keys even though they come straight from its token endpoint.
        client.enableNonRepudiationChecks(configuration);
        return configuration;
      })
      .catch((error: unknown) => {
        this.discovered.delete(provider.id);
        throw this.providerFailure(provider, error, 'discovery');
      });
    this.discovered.set(provider.id, { at: Date.now(), config });
    return config;
  }

  /** What went wrong with a provider, as the error the browser gets. */
  private providerFailure(provider: OidcProviderConfig, error: unknown, phase: 'discovery' | 'sign-in'): HttpException {
    if (error instanceof HttpException) return error;
    const name = `OpenID provider '${provider.id}' (${provider.issuer})`;
    if (error instanceof client.AuthorizationResponseError) {
      return new UnauthorizedException(`provider '${provider.id}' refused the sign-in (${error.error})`);
    }
    if (error instanceof client.ResponseBodyError) {
      if (error.status >= 500) return new BadGatewayException(`${name} failed: ${error.status} ${error.error}`);
      const detail = error.error_description ? `: ${error.error_description.slice(0, 200)}` : '';
      return new UnauthorizedException(
        `provider '${provider.id}' refused the authorization code (${error.error}${detail})`,
      );
    }
    const code = (error as { code?: unknown }).code;
    const errorName = (error as { name?: unknown }).name;
    if (
      (error instanceof TypeError && !(error instanceof client.ClientError) && error.message === 'fetch failed') ||
      errorName === 'TimeoutError' ||
      errorName === 'AbortError'
    ) {
      const cause = (error as { cause?: { code?: string; message?: string } }).cause;
      return new BadGatewayException(
        `${name} could not be reached: ${cause?.code ?? cause?.message ?? (error as Error).message}`,
      );
    }
    if (error instanceof client.ClientError && (code === 'OAUTH_TIMEOUT' || code === 'OAUTH_ABORT')) {
      return new BadGatewayException(
        `${name} could not be reached: no answer within ${this.config.oidc.timeoutSeconds} s`,
      );
    }
    if (error instanceof client.ClientError) {
      if (
        phase === 'discovery' ||
        code === 'OAUTH_RESPONSE_IS_NOT_CONFORM' ||
        code === 'OAUTH_RESPONSE_IS_NOT_JSON' ||
        code === 'OAUTH_PARSE_ERROR'
      ) {
        return new BadGatewayException(`${name} answered unexpectedly: ${this.describe(error)}`);
      }
      return new UnauthorizedException(
        `the ID token from provider '${provider.id}' was refused: ${this.describe(error)}`,
      );
    }
    this.logger.error(`${name}: unexpected failure`, error instanceof Error ? error.stack : String(error));
    return new BadGatewayException(`${name} failed unexpectedly`);
  }

  private describe(error: Error): string {
    const cause = error.cause instanceof Error ? error.cause.message : '';
    return (cause && cause !== error.message ? `${error.message} (${cause})` : error.message).slice(0, 300);
  }
}
