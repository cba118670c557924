import { Inject, Injectable, UnauthorizedException } from '@nestjs/common';
import { InjectRepository } from '@nestjs/typeorm';
import { LessThan, Repository } from 'typeorm';
import { APP_CONFIG, type AppConfig } from '../config/config.js';
import { ROLE_ADMIN, type RoleName } from '../users/role.entity.js';
import { ApiKeyEntity } from './api-key.entity.js';
import type { Caller } from './caller.js';
import { SessionEntity } from './session.entity.js';
import { API_KEY_PREFIX, SESSION_TOKEN_PREFIX, sha256Hex } from './tokens.js';

/** Writes of "last seen" times are skipped when the stored one is this recent: no write on every request. */
const TOUCH_INTERVAL_MS = 60_000;

const INVALID = 'invalid or expired credentials';

/** Turns a presented session token or API key into a caller, or refuses it. */
@Injectable()
export class CredentialsService {
  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    @InjectRepository(SessionEntity) private readonly sessions: Repository<SessionEntity>,
    @InjectRepository(ApiKeyEntity) private readonly apiKeys: Repository<ApiKeyEntity>,
  ) {}

  async resolve(secret: string): Promise<Caller> {
    if (secret.startsWith(SESSION_TOKEN_PREFIX)) return this.resolveSession(secret);
    if (secret.startsWith(API_KEY_PREFIX)) return this.resolveApiKey(secret);
    throw new UnauthorizedException(INVALID);
  }

  private async resolveSession(token: string): Promise<Caller> {
    const session = await this.sessions.findOne({
      where: { tokenHash: sha256Hex(token) },
      relations: { user: { roles: true } },
    });
    if (!session) throw new UnauthorizedException(INVALID);
    const now = Date.now();
    const idleLimit = session.lastSeenAt.getTime() + this.config.session.idleSeconds * 1000;
    if (session.expiresAt.getTime() <= now || idleLimit <= now) {
      await this.sessions.delete({ id: session.id });
      throw new UnauthorizedException('session expired; sign in again');
    }
    if (!session.user.enabled) throw new UnauthorizedException('user is disabled');
    if (now - session.lastSeenAt.getTime() > TOUCH_INTERVAL_MS) {
      await this.sessions.update({ id: session.id }, { lastSeenAt: new Date(now) });
    }
    const roles = session.user.roles.map((r) => r.name);
    return {
      kind: 'user',
      id: session.user.id,
      name: session.user.username,
      roles,
      isAdmin: roles.includes(ROLE_ADMIN),
      sessionId: session.id,
    };
  }

  private async resolveApiKey(key: string): Promise<Caller> {
    const apiKey = await this.apiKeys.findOne({ where: { keyHash: sha256Hex(key) } });
    if (!apiKey) throw new UnauthorizedException(INVALID);
    const now = Date.now();
    if (apiKey.expiresAt && apiKey.expiresAt.getTime() <= now) throw new UnauthorizedException('API key expired');
    if (!apiKey.lastUsedAt || now - apiKey.lastUsedAt.getTime() > TOUCH_INTERVAL_MS) {
      await this.apiKeys.update({ id: apiKey.id }, { lastUsedAt: new Date(now) });
    }
    const role: RoleName = apiKey.role.name;
    return {
      kind: 'apiKey',
      id: apiKey.id,
      name: apiKey.name,
      roles: [role],
      isAdmin: role === ROLE_ADMIN,
      sessionId: null,
    };
  }

  /** Removes sessions past their absolute expiry (expired ones are refused anyway; this keeps the table small). */
  async pruneExpiredSessions(): Promise<void> {
    await this.sessions.delete({ expiresAt: LessThan(new Date()) });
  }
}
