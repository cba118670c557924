import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { DataSource } from 'typeorm';
import { createApp } from '../../src/app.js';
import { loadConfig, type AppConfig } from '../../src/config/config.js';

/**
 * Which database the HTTP tests run on: SQLite in a temp directory (default), or PostgreSQL when
 * TEST_DATABASE_URL names a server (each app then gets a fresh database of its own).
 */
export const TEST_DATABASE_URL = process.env.TEST_DATABASE_URL ?? '';
export const onPostgres = TEST_DATABASE_URL.startsWith('postgres');

export interface TestApp {
  app: NestFastifyApplication;
  config: AppConfig;
  dataSource: DataSource;
  dataDir: string;
  /** DATABASE_URL of this app's database (a sqlite: path or a postgres:// URL). */
  databaseUrl: string;
  close(): Promise<void>;
}

/** Creates a fresh PostgreSQL database and returns its URL and a function that drops it. */
export async function createPostgresDatabase(): Promise<{ url: string; drop(): Promise<void> }> {
  const name = `cas_test_${process.pid}_${randomBytes(4).toString('hex')}`;
  const admin = new pg.Client({ connectionString: TEST_DATABASE_URL });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  const url = new URL(TEST_DATABASE_URL);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    drop: async () => {
      const client = new pg.Client({ connectionString: TEST_DATABASE_URL });
      await client.connect();
      await client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await client.end();
    },
  };
}

/**
 * Starts the real application (real pipe, guard, filter, migrations) on a database of its own.
 * `env` adds or overrides configuration variables; pass `databaseUrl` to share a database between
 * several apps (replicas).
 */
export async function startTestApp(
  options: { env?: Record<string, string>; databaseUrl?: string } = {},
): Promise<TestApp> {
  const dataDir = await mkdtemp(join(tmpdir(), 'cas-test-'));
  let databaseUrl = options.databaseUrl;
  let dropDatabase: (() => Promise<void>) | undefined;
  if (!databaseUrl) {
    if (onPostgres) {
      const db = await createPostgresDatabase();
      databaseUrl = db.url;
      dropDatabase = db.drop;
    } else {
      databaseUrl = `sqlite:${join(dataDir, 'cas.sqlite')}`;
    }
  }
  const config = loadConfig({ CAS_DATA_DIR: dataDir, LOG_LEVEL: 'silent', DATABASE_URL: databaseUrl, ...options.env });
  const app = await createApp(config);
  return {
    app,
    config,
    dataSource: app.get(DataSource),
    dataDir,
    databaseUrl,
    close: async () => {
      await app.close();
      await dropDatabase?.();
      await rm(dataDir, { recursive: true, force: true });
    },
  };
}
