import { isAbsolute, resolve } from 'node:path';

export type LogLevel = 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';

export interface AppConfig {
  port: number;
  host: string;
  dataDir: string;
  database: { type: 'sqlite'; path: string } | { type: 'postgres'; url: string };
  /** Base64 of 32 bytes, or undefined to use (and create) the key file in the data directory. */
  encryptionKey?: Buffer;
  corsOrigins: string[];
  logLevel: LogLevel;
  session: { idleSeconds: number; maxSeconds: number };
  loginThrottle: { windowSeconds: number; maxFailuresPerUsername: number; maxFailuresPerAddress: number };
  /** Trust X-Forwarded-For from a proxy in front of the service (for per-address login throttling). */
  trustProxy: boolean;
  bootstrap: { username?: string; password?: string; name?: string };
}

export class ConfigError extends Error {}

const LOG_LEVELS: LogLevel[] = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

type Env = Record<string, string | undefined>;

function integer(env: Env, name: string, fallback: number, min: number, max: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  if (!/^\d+$/.test(raw) || Number(raw) < min || Number(raw) > max) {
    throw new ConfigError(`${name} must be an integer from ${min} to ${max}, got '${raw}'`);
  }
  return Number(raw);
}

function boolean(env: Env, name: string, fallback: boolean): boolean {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  if (['true', '1', 'yes'].includes(raw.toLowerCase())) return true;
  if (['false', '0', 'no'].includes(raw.toLowerCase())) return false;
  throw new ConfigError(`${name} must be true or false, got '${raw}'`);
}

function databaseFrom(env: Env, dataDir: string): AppConfig['database'] {
  const url = env.DATABASE_URL;
  if (url === undefined || url === '') return { type: 'sqlite', path: resolve(dataDir, 'cas.sqlite') };
  if (/^postgres(ql)?:\/\//.test(url)) {
    try {
      new URL(url);
    } catch {
      throw new ConfigError('DATABASE_URL is not a valid URL');
    }
    return { type: 'postgres', url };
  }
  if (url.startsWith('sqlite:')) {
    const path = url.slice('sqlite:'.length).replace(/^\/\//, '');
    if (!path) throw new ConfigError('DATABASE_URL sqlite: needs a file path');
    return { type: 'sqlite', path: isAbsolute(path) ? path : resolve(path) };
  }
  throw new ConfigError('DATABASE_URL must start with postgres:// (or sqlite: followed by a file path)');
}

function encryptionKeyFrom(env: Env): Buffer | undefined {
  const raw = env.CAS_ENCRYPTION_KEY;
  if (raw === undefined || raw === '') return undefined;
  const key = Buffer.from(raw, 'base64');
  if (key.length !== 32 || !/^[A-Za-z0-9+/]+={0,2}$/.test(raw)) {
    throw new ConfigError('CAS_ENCRYPTION_KEY must be 32 bytes encoded in base64 (openssl rand -base64 32)');
  }
  return key;
}

function originsFrom(env: Env): string[] {
  const raw = env.CORS_ORIGINS ?? '';
  const origins = raw
    .split(',')
    .map((o) => o.trim())
    .filter(Boolean);
  for (const origin of origins) {
    let parsed: URL;
    try {
      parsed = new URL(origin);
    } catch {
      throw new ConfigError(`CORS_ORIGINS has an invalid origin '${origin}'`);
    }
    if (parsed.origin !== origin || !['http:', 'https:'].includes(parsed.protocol)) {
      throw new ConfigError(`CORS_ORIGINS entries must be bare origins like https://app.example.com, got '${origin}'`);
    }
  }
  return origins;
}

/** Reads and validates the configuration; any bad value stops start-up with a message naming the variable. */
export function loadConfig(env: Env = process.env): AppConfig {
  const dataDir = resolve(env.CAS_DATA_DIR || './data');
  const logLevel = (env.LOG_LEVEL || 'info') as LogLevel;
  if (!LOG_LEVELS.includes(logLevel)) {
    throw new ConfigError(`LOG_LEVEL must be one of ${LOG_LEVELS.join(', ')}, got '${env.LOG_LEVEL}'`);
  }
  const host = env.HOST || '0.0.0.0';
  if (!/^[A-Za-z0-9.:-]+$/.test(host)) throw new ConfigError(`HOST is not a valid address: '${host}'`);
  const idleSeconds = integer(env, 'CAS_SESSION_IDLE_SECONDS', 2 * 3600, 60, 30 * 86400);
  const maxSeconds = integer(env, 'CAS_SESSION_MAX_SECONDS', 24 * 3600, 60, 365 * 86400);
  if (idleSeconds > maxSeconds) {
    throw new ConfigError('CAS_SESSION_IDLE_SECONDS must not exceed CAS_SESSION_MAX_SECONDS');
  }
  const bootstrap = {
    username: env.CAS_BOOTSTRAP_USERNAME || undefined,
    password: env.CAS_BOOTSTRAP_PASSWORD || undefined,
    name: env.CAS_BOOTSTRAP_NAME || undefined,
  };
  if (Boolean(bootstrap.username) !== Boolean(bootstrap.password)) {
    throw new ConfigError('CAS_BOOTSTRAP_USERNAME and CAS_BOOTSTRAP_PASSWORD must be set together');
  }
  return {
    port: integer(env, 'PORT', 8080, 0, 65535),
    host,
    dataDir,
    database: databaseFrom(env, dataDir),
    encryptionKey: encryptionKeyFrom(env),
    corsOrigins: originsFrom(env),
    logLevel,
    session: { idleSeconds, maxSeconds },
    loginThrottle: {
      windowSeconds: integer(env, 'CAS_LOGIN_THROTTLE_WINDOW_SECONDS', 900, 1, 86400),
      maxFailuresPerUsername: integer(env, 'CAS_LOGIN_MAX_FAILURES_PER_USERNAME', 5, 1, 10000),
      maxFailuresPerAddress: integer(env, 'CAS_LOGIN_MAX_FAILURES_PER_ADDRESS', 20, 1, 100000),
    },
    trustProxy: boolean(env, 'CAS_TRUST_PROXY', false),
    bootstrap,
  };
}

export const APP_CONFIG = Symbol('APP_CONFIG');
