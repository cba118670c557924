import { isIP } from 'node:net';
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
  /** Unattended installs: the super user, and a kubeconfig file or the in-cluster flag to import (CONTRACT §4). */
  bootstrap: { username?: string; password?: string; name?: string; kubeconfigFile?: string; inCluster: boolean };
  clusters: ClustersConfig;
  /** Time-out of one request to a cluster on the resource routes. */
  clusterRequestTimeoutSeconds: number;
  /** After SIGTERM, how long requests in flight (a waited delete, say) may take to finish. */
  shutdownGraceSeconds: number;
  limits: LimitsConfig;
}

/** Bounds on what one client can make the service do (issue 9). */
export interface LimitsConfig {
  /** JSON bodies nested deeper than this are refused with 400 while they are parsed. */
  maxJsonDepth: number;
  /** Time to receive a whole request (headers and body); the response may take longer. */
  requestTimeoutSeconds: number;
  /** A connection with no traffic either way for this long is closed (0: never); streams send heartbeats. */
  connectionTimeoutSeconds: number;
  /** How long an idle kept-alive connection stays open between requests. */
  keepAliveTimeoutSeconds: number;
  /** Open connections allowed from one client address (0: no cap). */
  maxConnectionsPerAddress: number;
  /** Password hashes/verifications (argon2id, 64 MiB each) computed at once. */
  passwordHashConcurrency: number;
  /** Password operations that may wait for a slot; beyond that, 503 with Retry-After. */
  passwordHashQueue: number;
  /** Cluster servers on link-local or cloud-metadata addresses (169.254.0.0/16, fe80::/10) are refused unless true. */
  allowLinkLocalClusters: boolean;
}

export interface ClustersConfig {
  /** How often every enabled cluster's version and status are refreshed in the background; 0 turns it off. */
  healthIntervalSeconds: number;
  /** Time-out of one health probe (`GET /version`); create and update wait at most this long for it. */
  probeTimeoutMs: number;
  /** Where a cluster with `inCluster: true` reads the service account's `token` and `ca.crt`. */
  inClusterDir: string;
  /** The API server of the cluster the service runs in, or '' when it does not run in one. */
  inClusterServer: string;
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

function httpsUrl(name: string, raw: string): string {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new ConfigError(`${name} is not a valid URL: '${raw}'`);
  }
  if (url.protocol !== 'https:' || url.username || url.password || url.search || url.hash) {
    throw new ConfigError(`${name} must be an https:// URL without credentials, query or fragment, got '${raw}'`);
  }
  return raw.replace(/\/+$/, '');
}

/** CAS_IN_CLUSTER_SERVER, else the address Kubernetes gives every pod, else '' (not running in a cluster). */
function inClusterServerFrom(env: Env): string {
  if (env.CAS_IN_CLUSTER_SERVER) return httpsUrl('CAS_IN_CLUSTER_SERVER', env.CAS_IN_CLUSTER_SERVER);
  const host = env.KUBERNETES_SERVICE_HOST;
  if (!host) return '';
  const port = env.KUBERNETES_SERVICE_PORT || '443';
  return httpsUrl('KUBERNETES_SERVICE_HOST', `https://${isIP(host) === 6 ? `[${host}]` : host}:${port}`);
}

function clustersFrom(env: Env): ClustersConfig {
  return {
    healthIntervalSeconds: integer(env, 'CAS_CLUSTER_HEALTH_INTERVAL_SECONDS', 60, 0, 86400),
    probeTimeoutMs: integer(env, 'CAS_CLUSTER_PROBE_TIMEOUT_MS', 3000, 100, 60000),
    inClusterDir: resolve(env.CAS_IN_CLUSTER_DIR || '/var/run/secrets/kubernetes.io/serviceaccount'),
    inClusterServer: inClusterServerFrom(env),
  };
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
    kubeconfigFile: env.CAS_BOOTSTRAP_KUBECONFIG_FILE ? resolve(env.CAS_BOOTSTRAP_KUBECONFIG_FILE) : undefined,
    inCluster: boolean(env, 'CAS_BOOTSTRAP_IN_CLUSTER', false),
  };
  if (Boolean(bootstrap.username) !== Boolean(bootstrap.password)) {
    throw new ConfigError('CAS_BOOTSTRAP_USERNAME and CAS_BOOTSTRAP_PASSWORD must be set together');
  }
  if (bootstrap.kubeconfigFile && bootstrap.inCluster) {
    throw new ConfigError('set CAS_BOOTSTRAP_KUBECONFIG_FILE or CAS_BOOTSTRAP_IN_CLUSTER, not both');
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
    clusters: clustersFrom(env),
    clusterRequestTimeoutSeconds: integer(env, 'CAS_CLUSTER_REQUEST_TIMEOUT_SECONDS', 30, 1, 3600),
    shutdownGraceSeconds: integer(env, 'CAS_SHUTDOWN_GRACE_SECONDS', 30, 0, 3600),
    limits: {
      maxJsonDepth: integer(env, 'CAS_MAX_JSON_DEPTH', 64, 2, 1000),
      requestTimeoutSeconds: integer(env, 'CAS_REQUEST_TIMEOUT_SECONDS', 30, 1, 3600),
      connectionTimeoutSeconds: integer(env, 'CAS_CONNECTION_TIMEOUT_SECONDS', 300, 0, 86400),
      keepAliveTimeoutSeconds: integer(env, 'CAS_KEEP_ALIVE_TIMEOUT_SECONDS', 72, 1, 3600),
      maxConnectionsPerAddress: integer(env, 'CAS_MAX_CONNECTIONS_PER_ADDRESS', 256, 0, 1_000_000),
      passwordHashConcurrency: integer(env, 'CAS_PASSWORD_HASH_CONCURRENCY', 2, 1, 64),
      passwordHashQueue: integer(env, 'CAS_PASSWORD_HASH_QUEUE', 32, 0, 10000),
      allowLinkLocalClusters: boolean(env, 'CAS_CLUSTER_ALLOW_LINK_LOCAL', false),
    },
  };
}

export const APP_CONFIG = Symbol('APP_CONFIG');
