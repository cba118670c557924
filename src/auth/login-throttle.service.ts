import { HttpException, HttpStatus, Inject, Injectable } from '@nestjs/common';
import { InjectDataSource, InjectRepository } from '@nestjs/typeorm';
import { DataSource, In, MoreThanOrEqual, Repository } from 'typeorm';
import { APP_CONFIG, type AppConfig } from '../config/config.js';
import { runSql } from '../database/sql.js';
import { LoginThrottleEntity } from './login-throttle.entity.js';

/**
 * Counts failed logins per username and per client address in the database, so every replica
 * sees the same counts; over the limit within the window, logins are refused with 429.
 */
@Injectable()
export class LoginThrottleService {
  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    @InjectDataSource() private readonly dataSource: DataSource,
    @InjectRepository(LoginThrottleEntity) private readonly rows: Repository<LoginThrottleEntity>,
  ) {}

  static keys(username: string, address: string) {
    return { user: `u:${username.toLowerCase().slice(0, 190)}`, address: `a:${address}` };
  }

  async assertAllowed(keys: { user: string; address: string }): Promise<void> {
    const { windowSeconds, maxFailuresPerUsername, maxFailuresPerAddress } = this.config.loginThrottle;
    const windowStart = new Date(Date.now() - windowSeconds * 1000);
    const rows = await this.rows.find({
      where: { key: In([keys.user, keys.address]), windowStartedAt: MoreThanOrEqual(windowStart) },
    });
    for (const row of rows) {
      const limit = row.key === keys.user ? maxFailuresPerUsername : maxFailuresPerAddress;
      if (row.failures >= limit) {
        const retryAfter = Math.max(
          1,
          Math.ceil((row.windowStartedAt.getTime() + windowSeconds * 1000 - Date.now()) / 1000),
        );
        throw new HttpException(
          { message: `too many failed logins; try again in ${retryAfter} s`, retryAfter },
          HttpStatus.TOO_MANY_REQUESTS,
        );
      }
    }
  }

  async recordFailure(keys: { user: string; address: string }): Promise<void> {
    const now = new Date();
    const windowStart = new Date(now.getTime() - this.config.loginThrottle.windowSeconds * 1000);
    for (const key of [keys.user, keys.address]) {
      // One atomic statement per key: concurrent failures on any replica all count.
      await runSql(
        this.dataSource,
        `INSERT INTO login_throttle (key, failures, window_started_at) VALUES (:key, 1, :now)
         ON CONFLICT (key) DO UPDATE SET
           failures = CASE WHEN login_throttle.window_started_at < :windowStart THEN 1 ELSE login_throttle.failures + 1 END,
           window_started_at = CASE WHEN login_throttle.window_started_at < :windowStart THEN :now ELSE login_throttle.window_started_at END`,
        { key, now, windowStart },
      );
    }
  }

  /** A successful login clears its username's count (the address count stays: it limits guessing many accounts). */
  async clearUser(keys: { user: string }): Promise<void> {
    await this.rows.delete({ key: keys.user });
  }
}
