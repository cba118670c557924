import { Injectable } from '@nestjs/common';
import { DataSource, EntityManager, QueryFailedError } from 'typeorm';
import { AppLockEntity } from './app-lock.entity.js';

export type LockName = 'users' | 'clusters';

/**
 * Runs work in a database transaction, optionally holding named lock rows for its whole length.
 *
 * SQLite through better-sqlite3 has one connection, on which TypeORM cannot nest two concurrent
 * transactions, so transactions are queued in-process there (one process owns a SQLite file).
 * PostgreSQL serialises through the lock rows, across every replica.
 */
@Injectable()
export class Transactions {
  private sqliteQueue: Promise<unknown> = Promise.resolve();

  constructor(private readonly dataSource: DataSource) {}

  run<T>(locks: LockName[], work: (manager: EntityManager) => Promise<T>): Promise<T> {
    const attempt = () =>
      this.dataSource.transaction(async (manager) => {
        for (const name of [...locks].sort()) {
          const result = await manager
            .createQueryBuilder()
            .update(AppLockEntity)
            .set({ version: () => 'version + 1' })
            .where('name = :name', { name })
            .execute();
          if (result.affected !== 1) throw new Error(`lock row '${name}' is missing; migrations did not run`);
        }
        return work(manager);
      });
    if (this.dataSource.options.type !== 'better-sqlite3') return attempt();
    const next = this.sqliteQueue.then(attempt, attempt);
    this.sqliteQueue = next.catch(() => undefined);
    return next;
  }
}

/** True when a write failed on a unique constraint (both dialects). */
export function isUniqueViolation(error: unknown): boolean {
  if (!(error instanceof QueryFailedError)) return false;
  const driverError = (error as QueryFailedError & { driverError?: { code?: string } }).driverError;
  return driverError?.code === '23505' || driverError?.code === 'SQLITE_CONSTRAINT_UNIQUE';
}
