import { Inject, Injectable, UnauthorizedException } from '@nestjs/common';
import { InjectRepository } from '@nestjs/typeorm';
import { Repository } from 'typeorm';
import type { AccessRule, GrantedRule } from '../access/rules.js';
import { APP_CONFIG, type AppConfig } from '../config/config.js';
import { LocalWrites } from '../database/local-writes.js';
import { dbDate, runSql } from '../database/sql.js';
import { ROLE_ADMIN } from '../users/role.entity.js';
import { ApiKeyEntity } from './api-key.entity.js';
import type { Caller } from '../access/caller.js';
import { SessionEntity } from './session.entity.js';
import { API_KEY_PREFIX, SESSION_TOKEN_PREFIX, sha256Hex } from './tokens.js';

/** Writes of "last seen" times are skipped when the stored one is this recent: no write on every request. */
const TOUCH_INTERVAL_MS = 60_000;

/**
 * How long a resolved caller (or a refusal) is trusted: the bound on how late a revoked session, a
 * disabled or deleted user, a deleted key or a role change made through another replica is seen.
 * Writes through this replica are seen by its next request at once (`LocalWrites`).
 */
export const CALLER_TTL_MS = 1000;
/** Past this many cached credentials the cache starts over (bounded memory under a flood of tokens). */
const MAX_CACHED_CALLERS = 10_000;
/** New sessions and keys cannot be in the cache yet: their inserts need not empty it (logins stay cheap). */
const NEW_CREDENTIAL_TABLES = new Set(['sessions', 'api_keys']);

const INVALID = 'invalid or expired credentials';

interface RoleColumns {
  role: string | null;
  rules: string | null;
}

interface SessionRow extends RoleColumns {
  session_id: number;
  last_seen_at: Date | string;
  expires_at: Date | string;
  user_id: number;
  username: string;
  enabled: boolean | number;
}

interface ApiKeyRow extends RoleColumns {
  key_id: number;
  name: string;
  expires_at: Date | string | null;
  last_used_at: Date | string | null;
  owner_id: number;
  owner_username: string;
  owner_enabled: boolean | number;
  /** 1 when the owner holds this role (or is an admin, who holds every role); 0 otherwise. */
  owner_holds: number | string;
}

/** Roles and rules from the role columns of the rows (one row per role; none when the LEFT JOIN found none). */
function rolesOf(rows: RoleColumns[]): { roles: string[]; rules: GrantedRule[] } {
  const roles: string[] = [];
  const rules: GrantedRule[] = [];
  for (const row of rows) {
    if (row.role === null) continue;
    roles.push(row.role);
    for (const rule of JSON.parse(row.rules ?? '[]') as AccessRule[]) rules.push({ role: row.role, ...rule });
  }
  return { roles, rules };
}

interface CachedCaller {
  caller: Promise<Caller>;
  resolvedAt: number;
}

/**
 * Turns a presented session token or API key into a caller, or refuses it. `resolve()` is the single
 * entry point and runs on every request: one indexed query per credential kind, no entity hydration.
 */
@Injectable()
export class CredentialsService {
  private readonly callers = new Map<string, CachedCaller>();

  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    @InjectRepository(SessionEntity) private readonly sessions: Repository<SessionEntity>,
    @InjectRepository(ApiKeyEntity) private readonly apiKeys: Repository<ApiKeyEntity>,
    localWrites: LocalWrites,
  ) {
    localWrites.subscribe(
      () => this.callers.clear(),
      (table, kind) => !(kind === 'insert' && NEW_CREDENTIAL_TABLES.has(table)),
    );
  }

  /**
   * The caller a session token or API key stands for, from a cache of at most CALLER_TTL_MS
   * (concurrent requests with one credential share one look-up). The Caller is shared: read-only.
   */
  resolve(secret: string): Promise<Caller> {
    if (!secret.startsWith(SESSION_TOKEN_PREFIX) && !secret.startsWith(API_KEY_PREFIX)) {
      return Promise.reject(new UnauthorizedException(INVALID));
    }
    const hash = sha256Hex(secret);
    const now = Date.now();
    const cached = this.callers.get(hash);
    if (cached && now - cached.resolvedAt < CALLER_TTL_MS) return cached.caller;
    if (this.callers.size >= MAX_CACHED_CALLERS) this.callers.clear();
    const caller = secret.startsWith(SESSION_TOKEN_PREFIX) ? this.resolveSession(hash) : this.resolveApiKey(hash);
    // A refusal is cached like a caller; each request awaiting it gets the 401.
    caller.catch(() => undefined);
    this.callers.set(hash, { caller, resolvedAt: now });
    return caller;
  }

  private async resolveSession(hash: string): Promise<Caller> {
    const rows = await runSql<SessionRow>(
      this.sessions.manager.connection,
      `SELECT s.id AS session_id, s.last_seen_at, s.expires_at, u.id AS user_id, u.username, u.enabled,
              r.name AS role, r.rules AS rules
         FROM sessions s
         INNER JOIN users u ON u.id = s.user_id
         LEFT JOIN user_roles ur ON ur.user_id = u.id
         LEFT JOIN roles r ON r.id = ur.role_id
        WHERE s.token_hash = :hash`,
      { hash },
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
      // Hand-written SQL: a "last seen" time is nothing a cache depends on (LocalWrites does not see it).
      await runSql(this.sessions.manager.connection, 'UPDATE sessions SET last_seen_at = :now WHERE id = :id', {
        now: new Date(now),
        id: session.session_id,
      });
    }
    const { roles, rules } = rolesOf(rows);
    return {
      kind: 'user',
      id: session.user_id,
      name: session.username,
      roles,
      isAdmin: roles.includes(ROLE_ADMIN),
      rules,
      userId: session.user_id,
      userName: session.username,
      keyExpiresAt: null,
      sessionId: session.session_id,
    };
  }

  /**
   * A key acts with those of its roles that its owner holds now (an admin holds every role), and
   * not at all once its owner is disabled or deleted (deleting the owner deletes its keys).
   */
  private async resolveApiKey(hash: string): Promise<Caller> {
    const rows = await runSql<ApiKeyRow>(
      this.apiKeys.manager.connection,
      `SELECT k.id AS key_id, k.name, k.expires_at, k.last_used_at, u.id AS owner_id, u.username AS owner_username,
              u.enabled AS owner_enabled,
              r.name AS role, r.rules AS rules,
              CASE WHEN EXISTS (
                SELECT 1 FROM user_roles ur INNER JOIN roles o ON o.id = ur.role_id
                 WHERE ur.user_id = u.id AND (o.id = r.id OR o.name = :admin)
              ) THEN 1 ELSE 0 END AS owner_holds
         FROM api_keys k
         INNER JOIN users u ON u.id = k.owner_id
         LEFT JOIN api_key_roles kr ON kr.api_key_id = k.id
         LEFT JOIN roles r ON r.id = kr.role_id
        WHERE k.key_hash = :hash`,
      { hash, admin: ROLE_ADMIN },
    );
    if (rows.length === 0) throw new UnauthorizedException(INVALID);
    const apiKey = rows[0];
    const now = Date.now();
    if (apiKey.expires_at && dbDate(apiKey.expires_at).getTime() <= now) {
      throw new UnauthorizedException('API key expired');
    }
    if (!apiKey.owner_enabled) throw new UnauthorizedException("the API key's owner is disabled");
    if (!apiKey.last_used_at || now - dbDate(apiKey.last_used_at).getTime() > TOUCH_INTERVAL_MS) {
      // Hand-written SQL: a "last used" time is nothing a cache depends on (LocalWrites does not see it).
      await runSql(this.apiKeys.manager.connection, 'UPDATE api_keys SET last_used_at = :now WHERE id = :id', {
        now: new Date(now),
        id: apiKey.key_id,
      });
    }
    const { roles, rules } = rolesOf(rows.filter((r) => Number(r.owner_holds) === 1));
    return {
      kind: 'apiKey',
      id: apiKey.key_id,
      name: apiKey.name,
      roles,
      isAdmin: roles.includes(ROLE_ADMIN),
      rules,
      userId: apiKey.owner_id,
      userName: apiKey.owner_username,
      keyExpiresAt: apiKey.expires_at ? dbDate(apiKey.expires_at).getTime() : null,
      sessionId: null,
    };
  }
}
