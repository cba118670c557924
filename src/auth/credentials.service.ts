import { Inject, Injectable, UnauthorizedException } from '@nestjs/common';
import { InjectRepository } from '@nestjs/typeorm';
import { Repository } from 'typeorm';
import { APP_CONFIG, type AppConfig } from '../config/config.js';
import { dbDate, runSql } from '../database/sql.js';
import { ROLE_ADMIN, type RoleName } from '../users/role.entity.js';
import { ApiKeyEntity } from './api-key.entity.js';
import type { Caller } from './caller.js';
import { SessionEntity } from './session.entity.js';
import { API_KEY_PREFIX, SESSION_TOKEN_PREFIX, sha256Hex } from './tokens.js';

/** Writes of "last seen" times are skipped when the stored one is this recent: no write on every request. */
const TOUCH_INTERVAL_MS = 60_000;

const INVALID = 'invalid or expired credentials';

interface SessionRow {
  session_id: number;
  last_seen_at: Date | string;
  expires_at: Date | string;
  user_id: number;
  username: string;
  enabled: boolean | number;
  role: RoleName | null;
}

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

  /** Every authenticated request runs this: one indexed query, no entity hydration. */
  private async resolveSession(token: string): Promise<Caller> {
    const rows = await runSql<SessionRow>(
      this.sessions.manager.connection,
      `SELECT s.id AS session_id, s.last_seen_at, s.expires_at, u.id AS user_id, u.username, u.enabled, r.name AS role
         FROM sessions s
         INNER JOIN users u ON u.id = s.user_id
         LEFT JOIN user_roles ur ON ur.user_id = u.id
         LEFT JOIN roles r ON r.id = ur.role_id
        WHERE s.token_hash = :hash`,
      { hash: sha256Hex(token) },
    );
    if (rows.length === 0) throw new UnauthorizedException(INVALID);
    const session = rows[0];
    const now = Date.now();
    const lastSeenAt = dbDate(session.last_seen_at).getTime();
    if (dbDate(session.expires_at).getTime() <= now || lastSeenAt + this.config.session.idleSeconds * 1000 <= now) {
      await this.sessions.delete({ id: session.session_id });
      throw new UnauthorizedException('session expired; sign in again');
    }
    if (!session.enabled) throw new UnauthorizedException('user is disabled');
    if (now - lastSeenAt > TOUCH_INTERVAL_MS) {
      await this.sessions.update({ id: session.session_id }, { lastSeenAt: new Date(now) });
    }
    const roles = rows.map((r) => r.role).filter((r): r is RoleName => r !== null);
    return {
      kind: 'user',
      id: session.user_id,
      name: session.username,
      roles,
      isAdmin: roles.includes(ROLE_ADMIN),
      sessionId: session.session_id,
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
}
