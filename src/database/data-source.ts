import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import pg from 'pg';
import type { DataSourceOptions, MixedList } from 'typeorm';
import type { AppConfig } from '../config/config.js';
import { POSTGRES_MIGRATIONS } from './migrations/postgres/index.js';
import { SQLITE_MIGRATIONS } from './migrations/sqlite/index.js';

const PG_TIMESTAMP_WITHOUT_TZ = 1114;

/**
 * Timestamps are stored as UTC in both dialects. `timestamp without time zone` columns are written
 * and read as UTC by pg (instead of the process's local zone), and the session zone is UTC so that
 * `now()` defaults agree.
 */
function makePgUtc(): void {
  pg.defaults.parseInputDatesAsUTC = true;
  pg.types.setTypeParser(PG_TIMESTAMP_WITHOUT_TZ, (value: string) => new Date(`${value.replace(' ', 'T')}Z`));
}

/** `entities`: every entity of the service (src/entities.ts). */
export function dataSourceOptions(
  config: Pick<AppConfig, 'database'>,
   
  entities: MixedList<Function> = [],
): DataSourceOptions {
  const common = { entities, synchronize: false, migrationsRun: false, logging: false } as const;
  if (config.database.type === 'postgres') {
    makePgUtc();
    return {
      ...common,
      type: 'postgres',
      url: config.database.url,
      migrations: POSTGRES_MIGRATIONS,
      extra: { options: '-c TimeZone=UTC', max: 10, connectionTimeoutMillis: 5000 },
    };
  }
  mkdirSync(dirname(config.database.path), { recursive: true, mode: 0o700 });
  return {
    ...common,
    type: 'better-sqlite3',
    database: config.database.path,
    migrations: SQLITE_MIGRATIONS,
    enableWAL: true,
    timeout: 5000,
    prepareDatabase: (db: { pragma(s: string): unknown }) => {
      db.pragma('foreign_keys = ON');
      db.pragma('busy_timeout = 5000');
    },
  };
}
