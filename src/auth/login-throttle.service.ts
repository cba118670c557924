import { HttpException, HttpStatus, Inject, Injectable } from '@nestjs/common';
import { InjectDataSource, InjectRepository } from '@nestjs/typeorm';
import { DataSource, Repository } from 'typeorm';
import { APP_CONFIG, type AppConfig } from '../config/config.js';
import { dbDate, runSql } from '../database/sql.js';
import { LoginThrottleEntity } from './login-throttle.entity.js';

export interface ThrottleKeys {
  user: string;
  address: string;
}

/**
 * Counts login attempts per username and per client address in the database, so every replica
 * sees the same counts. An attempt is counted (reserved) *before* its password is verified, in one
 * atomic statement per key: of any number of concurrent attempts, on any number of replicas, at
 * most the limit get verified and the rest get 429. A successful login gives its reservation back.
 */
/** How long this replica remembers that a key was over its limit (refusing without the database). */
const BLOCK_MEMORY_MS = 1000;
const MAX_REMEMBERED_BLOCKS = 10_000;

@Injectable()
export class LoginThrottleService {
  private readonly blocked = new Map<string, { until: number; windowEndsAt: number }>();

  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    @InjectDataSource() private readonly dataSource: DataSource,
    @InjectRepository(LoginThrottleEntity) private readonly rows: Repository<LoginThrottleEntity>,
  ) {}

  static keys(username: string, address: string): ThrottleKeys {
    return { user: `u:${username.toLowerCase().slice(0, 190)}`, address: `a:${address}` };
  }

  /** Counts one attempt on both keys; 429 (with the seconds until the window ends) when either is over its limit. */
  async reserve(keys: ThrottleKeys): Promise<void> {
    const { maxFailuresPerUsername, maxFailuresPerAddress } = this.config.loginThrottle;
    await this.count(keys.address, maxFailuresPerAddress, 'failed logins');
    await this.count(keys.user, maxFailuresPerUsername, 'failed logins');
  }

  /**
   * Counts one call of the public `create_super_user` from this address, before any other work:
   * past the limit within the window it is a 429, so no address can keep the route busy.
   */
  async reserveBootstrap(address: string): Promise<void> {
    await this.count(`s:${address}`, this.config.loginThrottle.maxBootstrapAttemptsPerAddress, 'attempts');
  }

  private async count(key: string, limit: number, what: string): Promise<void> {
    const now = Date.now();
    const blocked = this.blocked.get(key);
    // A key found over its limit a moment ago is refused without a database write: a flood of
    // attempts costs nothing. The database stays the rule (successful logins give reservations back).
    if (blocked && now < blocked.until) throw this.tooMany(what, blocked.windowEndsAt);
    const { failures, windowStartedAt } = await this.increment(key);
    if (failures <= limit) return;
    const windowEndsAt = windowStartedAt.getTime() + this.config.loginThrottle.windowSeconds * 1000;
    if (this.blocked.size >= MAX_REMEMBERED_BLOCKS) this.blocked.clear();
    this.blocked.set(key, { until: Math.min(windowEndsAt, Date.now() + BLOCK_MEMORY_MS), windowEndsAt });
    throw this.tooMany(what, windowEndsAt);
  }

  private tooMany(what: string, windowEndsAt: number): HttpException {
    const retryAfter = Math.max(1, Math.ceil((windowEndsAt - Date.now()) / 1000));
    return new HttpException(
      { message: `too many ${what}; try again in ${retryAfter} s`, retryAfter },
      HttpStatus.TOO_MANY_REQUESTS,
    );
  }

  /** One atomic statement: a new window starts at 1, otherwise the count goes up; returns the new count. */
  private async increment(key: string): Promise<{ failures: number; windowStartedAt: Date }> {
    const now = new Date();
    const windowStart = new Date(now.getTime() - this.config.loginThrottle.windowSeconds * 1000);
    const rows = await runSql<{ failures: number | string; window_started_at: Date | string }>(
      this.dataSource,
      `INSERT INTO login_throttle (key, failures, window_started_at) VALUES (:key, 1, :now)
       ON CONFLICT (key) DO UPDATE SET
         failures = CASE WHEN login_throttle.window_started_at < :windowStart THEN 1 ELSE login_throttle.failures + 1 END,
         window_started_at = CASE WHEN login_throttle.window_started_at < :windowStart THEN :now ELSE login_throttle.window_started_at END
       RETURNING failures, window_started_at`,
      { key, now, windowStart },
    );
    return { failures: Number(rows[0].failures), windowStartedAt: dbDate(rows[0].window_started_at) };
  }

  /**
   * A successful login (or an attempt that was never verified) gives its reservation back: the
   * username's count is cleared, the address's goes down by one (it still limits guessing many accounts).
   */
  async release(keys: ThrottleKeys, options: { clearUser: boolean }): Promise<void> {
    if (options.clearUser) await this.rows.delete({ key: keys.user });
    else await this.decrement(keys.user);
    await this.decrement(keys.address);
  }

  private async decrement(key: string): Promise<void> {
    await runSql(
      this.dataSource,
      `UPDATE login_throttle SET failures = failures - 1 WHERE key = :key AND failures > 0`,
      {
        key,
      },
    );
  }
}
