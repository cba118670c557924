import {
  Body,
  Controller,
  Delete,
  ForbiddenException,
  Get,
  HttpCode,
  Inject,
  Param,
  Post,
  Req,
  Res,
} from '@nestjs/common';
import { ApiCreatedResponse, ApiExtraModels, ApiOkResponse, ApiTags, getSchemaPath } from '@nestjs/swagger';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { noteAudit } from '../common/audit-facts.js';
import { ApiErrors } from '../common/api-errors.js';
import { SuccessResponseDto } from '../common/error-response.dto.js';
import { ApiIdParam, ParseIdPipe } from '../common/id.pipe.js';
import { APP_CONFIG, type AppConfig } from '../config/config.js';
import { toUserDetailResponse } from '../users/user.mapper.js';
import { UsersService } from '../users/users.service.js';
import { ApiKeysService } from './api-keys.service.js';
import { Auth, Authenticated, Public } from './auth.decorators.js';
import { AuthService } from './auth.service.js';
import type { Caller } from '../access/caller.js';
import { ApiKeyDto, CreateApiKeyDto, CreatedApiKeyDto } from './dto/api-key.dto.js';
import {
  CurrentUserIsApiKeyDto,
  CurrentUserIsUserDto,
  LoginDto,
  LoginResponseDto,
  type CurrentUserDto,
} from './dto/auth.dto.js';
import { clearSessionCookie, setSessionCookie } from './session-cookie.js';

const SESSION_COOKIE_HEADER = (description: string) => ({
  description,
  required: true,
  schema: { type: 'string' as const },
});

@ApiTags('Auth')
@Controller('auth')
export class AuthController {
  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly auth: AuthService,
    private readonly users: UsersService,
  ) {}

  /**
   * Signs in with username and password; returns a session token and sets the session cookie.
   * With CAS_PASSWORD_LOGIN=false only the super user may (break-glass); others use single sign-on.
   */
  @Public()
  @Post('login')
  @HttpCode(200)
  @ApiOkResponse({
    type: LoginResponseDto,
    headers: {
      'Set-Cookie': SESSION_COOKIE_HEADER(
        'Sets the HttpOnly session cookie: `cas_session`, or over https `__Host-cas_session` (Secure)',
      ),
    },
  })
  @ApiErrors(400, {
    401: 'Unknown user, wrong password or disabled user (the same answer for each)',
    429: 'Too many failed logins for this username or client address; try again after `Retry-After` seconds',
  })
  async login(
    @Body() dto: LoginDto,
    @Req() request: FastifyRequest,
    @Res({ passthrough: true }) reply: FastifyReply,
  ): Promise<LoginResponseDto> {
    noteAudit(request, { actor: { kind: 'user', id: null, name: dto.username } });
    const result = await this.auth.login(dto.username, dto.password, request.ip);
    noteAudit(request, {
      actor: { kind: 'user', id: result.user.id, name: result.user.username },
      target: { kind: 'user', id: String(result.user.id) },
    });
    setSessionCookie(request, reply, result.token, this.config.session.maxSeconds);
    return { token: result.token, expiresAt: result.expiresAt.toISOString(), user: toUserDetailResponse(result.user) };
  }

  /** Ends the caller's session (and clears the cookie). */
  @Authenticated({ withoutRole: true })
  @Post('logout')
  @HttpCode(200)
  @ApiOkResponse({
    type: SuccessResponseDto,
    headers: { 'Set-Cookie': SESSION_COOKIE_HEADER('Clears the session cookie') },
  })
  async logout(
    @Auth() caller: Caller,
    @Req() request: FastifyRequest,
    @Res({ passthrough: true }) reply: FastifyReply,
  ): Promise<SuccessResponseDto> {
    if (caller.sessionId !== null) await this.auth.logout(caller.sessionId);
    clearSessionCookie(request, reply);
    return { success: true };
  }

  /** Who the caller is: a user, or an API key with its role. */
  @Authenticated({ withoutRole: true })
  @Get('me')
  @ApiExtraModels(CurrentUserIsUserDto, CurrentUserIsApiKeyDto)
  @ApiOkResponse({
    description: 'The caller, told apart by `kind`',
    schema: {
      oneOf: [{ $ref: getSchemaPath(CurrentUserIsUserDto) }, { $ref: getSchemaPath(CurrentUserIsApiKeyDto) }],
      discriminator: {
        propertyName: 'kind',
        mapping: { user: getSchemaPath(CurrentUserIsUserDto), apiKey: getSchemaPath(CurrentUserIsApiKeyDto) },
      },
    },
  })
  async getCurrentUser(@Auth() caller: Caller): Promise<CurrentUserDto> {
    if (caller.kind === 'user' && caller.id !== null) {
      return { kind: 'user', user: toUserDetailResponse(await this.users.getUser(caller.id)), roles: caller.roles };
    }
    return { kind: 'apiKey', apiKey: { id: caller.id ?? 0, name: caller.name }, roles: caller.roles };
  }
}

@ApiTags('API keys')
@Controller('admin/apikeys')
export class ApiKeysController {
  constructor(private readonly apiKeys: ApiKeysService) {}

  /** Lists every user's API keys (never the keys themselves). */
  @Authenticated({ admin: true })
  @Get()
  @ApiOkResponse({ type: ApiKeyDto, isArray: true })
  listApiKeys(): Promise<ApiKeyDto[]> {
    return this.apiKeys.listApiKeys();
  }

  /** One API key of any user (never the key itself). */
  @Authenticated({ admin: true })
  @Get(':id')
  @ApiIdParam()
  @ApiOkResponse({ type: ApiKeyDto })
  @ApiErrors(400, 404)
  getApiKey(@Param('id', ParseIdPipe) id: number): Promise<ApiKeyDto> {
    return this.apiKeys.getApiKey(id);
  }

  /**
   * Creates an API key owned by the caller; the key is in this response only. Created with an API
   * key, it expires no later than that key. 409 for a name the caller's keys already use, or past
   * CAS_API_KEYS_PER_USER keys.
   */
  @Authenticated({ admin: true })
  @Post()
  @ApiCreatedResponse({ type: CreatedApiKeyDto })
  @ApiErrors(400, 409)
  createApiKey(@Auth() caller: Caller, @Body() dto: CreateApiKeyDto): Promise<CreatedApiKeyDto> {
    return this.apiKeys.createApiKey(dto, caller);
  }

  /** Deletes any user's API key; it stops working at once. */
  @Authenticated({ admin: true })
  @Delete(':id')
  @ApiIdParam()
  @ApiOkResponse({ type: SuccessResponseDto })
  @ApiErrors(400, 404)
  async deleteApiKey(@Param('id', ParseIdPipe) id: number): Promise<SuccessResponseDto> {
    await this.apiKeys.deleteApiKey(id);
    return { success: true };
  }
}

/** The caller's own API keys (an API key caller manages its owner's keys). */
@ApiTags('API keys')
@Controller('auth/apikeys')
export class OwnApiKeysController {
  constructor(private readonly apiKeys: ApiKeysService) {}

  /** Lists the caller's own API keys (never the keys themselves). */
  @Authenticated()
  @Get()
  @ApiOkResponse({ type: ApiKeyDto, isArray: true })
  listOwnApiKeys(@Auth() caller: Caller): Promise<ApiKeyDto[]> {
    return this.apiKeys.listApiKeys(ownerOf(caller));
  }

  /** One of the caller's own API keys (another user's key: 404); never the key itself. */
  @Authenticated()
  @Get(':id')
  @ApiIdParam()
  @ApiOkResponse({ type: ApiKeyDto })
  @ApiErrors(400, 404)
  getOwnApiKey(@Auth() caller: Caller, @Param('id', ParseIdPipe) id: number): Promise<ApiKeyDto> {
    return this.apiKeys.getApiKey(id, ownerOf(caller));
  }

  /**
   * Creates an API key for the caller with roles the caller holds (403 otherwise); the key is in this
   * response only. Created with an API key, it expires no later than that key. 409 for a name the
   * caller's keys already use, or past CAS_API_KEYS_PER_USER keys.
   */
  @Authenticated()
  @Post()
  @ApiCreatedResponse({ type: CreatedApiKeyDto })
  @ApiErrors(400, 409)
  createOwnApiKey(@Auth() caller: Caller, @Body() dto: CreateApiKeyDto): Promise<CreatedApiKeyDto> {
    return this.apiKeys.createApiKey(dto, caller);
  }

  /** Deletes one of the caller's own API keys (another user's key: 404); it stops working at once. */
  @Authenticated()
  @Delete(':id')
  @ApiIdParam()
  @ApiOkResponse({ type: SuccessResponseDto })
  @ApiErrors(400, 404)
  async deleteOwnApiKey(@Auth() caller: Caller, @Param('id', ParseIdPipe) id: number): Promise<SuccessResponseDto> {
    await this.apiKeys.deleteApiKey(id, ownerOf(caller));
    return { success: true };
  }
}

function ownerOf(caller: Caller): number {
  if (caller.userId === null) throw new ForbiddenException('API keys belong to users: sign in first');
  return caller.userId;
}
