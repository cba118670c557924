import { readFileSync } from 'node:fs';
import { isIP } from 'node:net';
import { isAbsolute, resolve } from 'node:path';
import { imageProblem } from '../k8s/container-input.js';

export type LogLevel = 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';

export interface AppConfig {
  port: number;
  host: string;
  dataDir: string;
  database: { type: 'sqlite'; path: string } | { type: 'postgres'; url: string };
  /** Base64 of 32 bytes, or undefined to use (and create) the key file in the data directory. */
  encryptionKey?: Buffer;
  corsOrigins: string[];
  /** `Access-Control-Max-Age` of CORS preflights: how long a browser may reuse one (CAS_CORS_MAX_AGE_SECONDS). */
  corsMaxAgeSeconds: number;
  logLevel: LogLevel;
  session: { idleSeconds: number; maxSeconds: number };
  loginThrottle: {
    windowSeconds: number;
    maxFailuresPerUsername: number;
    maxFailuresPerAddress: number;
    /** Calls of the public `create_super_user` from one address within the window (all count, not only failures). */
    maxBootstrapAttemptsPerAddress: number;
  };
  /**
   * Which proxies in front of the service to believe about the client (X-Forwarded-For, -Proto, -Host),
   * in a form Fastify's `trustProxy` takes: false (none), the addresses/CIDRs of the proxies, or a hop
   * count (a function: Fastify treats a plain number as "trust nothing"). Never `true`, which would
   * take the client's own left-most entry as its address.
   */
  trustProxy: TrustProxy;
  /** Unattended installs: the super user, and a kubeconfig file or the in-cluster flag to import (docs/DEPLOYMENT.md). */
  bootstrap: { username?: string; password?: string; name?: string; kubeconfigFile?: string; inCluster: boolean };
  clusters: ClustersConfig;
  /** Time-out of one request to a cluster on the resource routes. */
  clusterRequestTimeoutSeconds: number;
  /** After SIGTERM, how long requests in flight (a waited delete, say) may take to finish. */
  shutdownGraceSeconds: number;
  limits: LimitsConfig;
  /** Watch streams (`?watch=true`): limits and timers. */
  watch: WatchConfig;
  /** The list caches behind paged list queries (docs/LISTS.md). */
  listCache: {
    maxObjects: number;
    /** UTF-8 bytes of the objects' JSON all list caches hold together. */
    maxBytes: number;
    idleSeconds: number;
  };
  /** Terminal sessions (exec, attach, port-forward): limits and timers (docs/TERMINAL.md). */
  exec: ExecConfig;
  /** Debug containers and node shells (docs/TERMINAL.md, debugging). */
  debug: DebugConfig;
  audit: AuditConfig;
  metrics: MetricsConfig;
  /** API keys one user may own (CAS_API_KEYS_PER_USER); creating one more is a 409. */
  apiKeysPerUser: number;
  /** Whether password login is open to every password user; when false only the super user may (break-glass). */
  passwordLogin: boolean;
  /** Single sign-on with OpenID Connect providers (CAS_OIDC_<ID>_*). */
  oidc: OidcConfig;
  /** The Kubernetes API through the service: what generated kubeconfigs say. */
  kube: KubeConfig;
  /** Served over TLS by the service itself (CAS_TLS_CERT_FILE and CAS_TLS_KEY_FILE); undefined: plain HTTP. */
  tls?: TlsConfig;
  /** Helm's write routes: the real `helm` CLI run as a child process. */
  helm: HelmConfig;
}

export interface HelmConfig {
  /** `CAS_HELM_BINARY`: the helm executable (a path, or a name looked up on PATH). */
  binary: string;
  /** `CAS_HELM_MAX_PROCESSES`: Helm processes of this replica at once; more → 429. */
  maxProcesses: number;
  /** `CAS_HELM_MAX_PROCESSES_PER_USER`: Helm processes of one user (keys included) at once; more → 429. */
  maxProcessesPerUser: number;
  /** `CAS_HELM_TIMEOUT_SECONDS`: the longest a Helm operation may take (its process is then killed: 504). */
  timeoutSeconds: number;
  /** `CAS_HELM_REPO_ALLOW_LOOPBACK`: chart repositories on loopback or private addresses are allowed. */
  repoAllowLoopback: boolean;
  /** `CAS_HELM_REPO_CA_FILE`: a PEM CA that chart repositories' certificates may also be signed by. */
  repoCaFile?: string;
}

export interface KubeConfig {
  /** `CAS_PUBLIC_URL`: kubeconfigs point at `<publicUrl>/api/v1/clusters/<name>/k8s`. */
  publicUrl: string;
  /** `CAS_PUBLIC_CA_FILE`: the CA of the public certificate, as kubeconfigs' `certificate-authority-data`. */
  publicCaFile?: string;
  /** The longest lifetime of a kubeconfig's key (`CAS_KUBECONFIG_MAX_SECONDS`). */
  kubeconfigMaxSeconds: number;
}

export interface TlsConfig {
  /** PEM certificate chain and private key; both are read again when either file changes. */
  certFile: string;
  keyFile: string;
}

export interface OidcProviderConfig {
  /** Lower-cased <ID> of CAS_OIDC_<ID>_*: the path segment of its routes; users get provider `oidc:<id>`. */
  id: string;
  displayName: string;
  issuer: string;
  clientId: string;
  clientSecret: string;
  scopes: string[];
  usernameClaim: string;
  groupsClaim: string;
  /** Group → role names; null when CAS_OIDC_<ID>_ROLE_MAP is unset (then administrators assign roles). */
  roleMap: Map<string, string[]> | null;
  /** The one ID token signing algorithm accepted (an asymmetric one; never `none` or a shared-secret HMAC). */
  idTokenAlg: string;
}

export interface OidcConfig {
  providers: OidcProviderConfig[];
  /** The service's own URL as browsers reach it; callbacks are `<publicUrl>/api/v1/auth/oidc/<id>/callback`. */
  publicUrl: string;
  /** Time-out of each request to a provider (discovery, token, user info, keys). */
  timeoutSeconds: number;
  /** Allowed clock difference when checking an ID token's `iat`/`exp`. */
  clockToleranceSeconds: number;
}

export interface MetricsConfig {
  /** Bearer token that `GET /metrics` requires; undefined: not served on the main port (unless on its own port). */
  token?: string;
  /** A separate listener serving only `GET /metrics`; undefined: none. 0 picks a free port (tests). */
  port?: number;
  /** Address of that listener. */
  host: string;
  /** Time-out of one query to a cluster's metrics endpoint (its Prometheus). */
  queryTimeoutSeconds: number;
}

export interface ExecConfig {
  /** Concurrent terminal sessions (exec, attach, port-forward) of the whole process; more → 429. */
  maxSessions: number;
  /** Concurrent terminal sessions of one user (its sessions and API keys together) in this process; more → 429. */
  maxSessionsPerCaller: number;
  /** A session with no traffic either way for this long is closed. */
  idleMs: number;
  /** A session is closed after this long, whatever it does. */
  maxMs: number;
  /** WebSocket ping interval. */
  pingMs: number;
  /** `output`: each session's output is kept as an asciicast v2 recording with its audit row. */
  recording: 'off' | 'output';
  /** How long a resumable session whose client dropped waits for it to come back (CAS_SESSION_RESUME_SECONDS). */
  resumeMs: number;
  /** The latest output bytes a resumable session keeps for a client that comes back (CAS_SESSION_RESUME_BYTES). */
  resumeBytes: number;
  /** This replica's address for the other replicas (CAS_REPLICA_URL): registered, so resumptions reach it. */
  replicaUrl?: string;
  /** The replicas' shared secret (CAS_REPLICA_SECRET): signs a resumption forwarded to the replica holding it. */
  replicaSecret?: string;
}

export interface DebugConfig {
  /** How long the debug route and a node shell wait for their container to run. */
  startMs: number;
  /** The namespace of node-shell pods; undefined: node shells are off (404). */
  nodeShellNamespace?: string;
  /** The node-shell pod's image (it needs `nsenter` and `sh`). */
  nodeShellImage: string;
  /** How often each replica deletes node-shell pods whose session no longer exists. */
  sweepMs: number;
}

export interface AuditConfig {
  /** Audit rows older than this many days are deleted (by the replica holding the lease); 0 keeps them forever. */
  retentionDays: number;
  /** `stdout`: every audit row is also written to standard output as one JSON line. */
  log: 'off' | 'stdout';
}

export interface WatchConfig {
  /** Concurrent streams of the whole process; more → 429. */
  maxStreams: number;
  /** Concurrent streams of one user (its sessions and API keys together) in this process; more → 429. */
  maxStreamsPerCaller: number;
  /** Bytes of recent events all shared watches of this process keep together; past it, new streams → 429. */
  memoryBytes: number;
  /** Concurrent pod log streams of the whole process, and of one user; more → 429. */
  maxLogStreams: number;
  maxLogStreamsPerUser: number;
  /** Bytes a subscriber may have waiting to be sent before it is cut off as too slow. */
  subscriberBufferBytes: number;
  /** Recent events each shared watch keeps for late subscribers (older resourceVersions → 410). */
  windowEvents: number;
  /** How long a shared watch stays open after its last subscriber left. */
  lingerMs: number;
  /** How often each stream's credential and permission are checked again. */
  reauthMs: number;
  /** SSE comment heartbeat interval. */
  heartbeatMs: number;
  /** The `timeoutSeconds` of each upstream watch: the cluster ends it then and it is resumed at once. */
  upstreamTimeoutSeconds: number;
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

/** `hop` 0 is the peer of the socket, 1 the address that peer put last in X-Forwarded-For, and so on. */
export type TrustHops = ((address: string, hop: number) => boolean) & { hops: number };
export type TrustProxy = false | string[] | TrustHops;

/** Trusts the nearest `hops` addresses: the client is the one the farthest trusted proxy saw. */
function trustHops(hops: number): TrustHops {
  return Object.assign((_address: string, hop: number) => hop < hops, { hops });
}

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

/** proxy-addr's names for address ranges, accepted in the list as Fastify accepts them. */
const PROXY_RANGE_NAMES = ['loopback', 'linklocal', 'uniquelocal'];

/**
 * CAS_TRUST_PROXY: unset/false (none), true (one hop, the proxy right in front), a hop count, or a
 * comma-separated list of proxy addresses and CIDRs.
 */
function trustProxyFrom(env: Env): TrustProxy {
  const name = 'CAS_TRUST_PROXY';
  const raw = (env[name] ?? '').trim();
  if (raw === '' || ['false', 'no', '0'].includes(raw.toLowerCase())) return false;
  if (['true', 'yes'].includes(raw.toLowerCase())) return trustHops(1);
  if (/^\d+$/.test(raw)) {
    if (Number(raw) > 100) throw new ConfigError(`${name} as a hop count must be from 0 to 100, got '${raw}'`);
    return trustHops(Number(raw));
  }
  const entries = raw.split(',').map((e) => e.trim());
  for (const entry of entries) {
    if (PROXY_RANGE_NAMES.includes(entry)) continue;
    const [address, prefix, extra] = entry.split('/');
    const family = isIP(address);
    const maxPrefix = family === 4 ? 32 : 128;
    const prefixOk = prefix === undefined || (/^\d{1,3}$/.test(prefix) && Number(prefix) <= maxPrefix);
    if (!family || !prefixOk || extra !== undefined) {
      throw new ConfigError(
        `${name} must be true, false, a hop count, or a comma-separated list of proxy addresses or CIDRs ` +
          `(e.g. 10.0.0.0/8,fd00::/8); '${entry}' is none of these`,
      );
    }
  }
  return entries;
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

function watchFrom(env: Env): WatchConfig {
  const maxStreams = integer(env, 'CAS_WATCH_MAX_STREAMS', 2000, 1, 100000);
  const maxStreamsPerCaller = integer(env, 'CAS_WATCH_MAX_STREAMS_PER_CALLER', 50, 1, 100000);
  return {
    maxStreams,
    maxStreamsPerCaller: Math.min(maxStreamsPerCaller, maxStreams),
    subscriberBufferBytes: integer(env, 'CAS_WATCH_SUBSCRIBER_BUFFER_BYTES', 4 * 1024 * 1024, 65536, 1024 ** 3),
    memoryBytes: integer(env, 'CAS_WATCH_MEMORY_BYTES', 16 * 1024 * 1024, 1024 * 1024, 64 * 1024 ** 3),
    maxLogStreams: integer(env, 'CAS_LOG_MAX_STREAMS', 1000, 1, 100000),
    maxLogStreamsPerUser: integer(env, 'CAS_LOG_MAX_STREAMS_PER_USER', 20, 1, 100000),
    windowEvents: integer(env, 'CAS_WATCH_WINDOW_EVENTS', 1000, 10, 1_000_000),
    lingerMs: integer(env, 'CAS_WATCH_LINGER_SECONDS', 5, 0, 3600) * 1000,
    reauthMs: integer(env, 'CAS_WATCH_REAUTH_SECONDS', 4, 1, 5) * 1000,
    heartbeatMs: integer(env, 'CAS_WATCH_HEARTBEAT_SECONDS', 15, 1, 300) * 1000,
    upstreamTimeoutSeconds: integer(env, 'CAS_WATCH_UPSTREAM_TIMEOUT_SECONDS', 240, 1, 3600),
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

const OIDC_SUFFIXES = [
  'ISSUER',
  'CLIENT_ID',
  'CLIENT_SECRET',
  'CLIENT_SECRET_FILE',
  'SCOPES',
  'USERNAME_CLAIM',
  'GROUPS_CLAIM',
  'ROLE_MAP',
  'DISPLAY_NAME',
  'ID_TOKEN_ALG',
] as const;
const OIDC_GLOBALS = new Set(['CAS_OIDC_TIMEOUT_SECONDS', 'CAS_OIDC_CLOCK_TOLERANCE_SECONDS']);
/** Asymmetric JWS algorithms only: `none` and HS* (signed with the client secret) are never accepted. */
export const OIDC_ID_TOKEN_ALGS = [
  'RS256',
  'RS384',
  'RS512',
  'PS256',
  'PS384',
  'PS512',
  'ES256',
  'ES384',
  'ES512',
  'EdDSA',
];
const OIDC_ID = /^[A-Z0-9](?:[A-Z0-9_]{0,25}[A-Z0-9])?$/;
const CLAIM_NAME = /^[A-Za-z0-9_.:/-]{1,100}$/;
const ROLE_NAME = /^[a-z0-9][a-z0-9._-]{0,31}$/;

function isLoopbackHost(hostname: string): boolean {
  return hostname === 'localhost' || hostname === '[::1]' || /^127\.\d+\.\d+\.\d+$/.test(hostname);
}

/** An https URL (http only on a loopback host, for tests and local trials), no credentials, query or fragment. */
function webUrl(name: string, raw: string): URL {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new ConfigError(`${name} is not a valid URL: '${raw}'`);
  }
  const secure = url.protocol === 'https:' || (url.protocol === 'http:' && isLoopbackHost(url.hostname));
  if (!secure || url.username || url.password || url.search || url.hash) {
    throw new ConfigError(
      `${name} must be an https:// URL (http:// only on a loopback address) without credentials, query or fragment, got '${raw}'`,
    );
  }
  return url;
}

function roleMapFrom(name: string, raw: string | undefined): Map<string, string[]> | null {
  if (raw === undefined || raw.trim() === '') return null;
  const map = new Map<string, string[]>();
  for (const entry of raw.split(',').map((e) => e.trim())) {
    const at = entry.lastIndexOf('=');
    const group = at > 0 ? entry.slice(0, at).trim() : '';
    const role = at > 0 ? entry.slice(at + 1).trim() : '';
    if (!group || group.length > 256 || !ROLE_NAME.test(role)) {
      throw new ConfigError(`${name} entries must look like group=role (e.g. platform-admins=admin), got '${entry}'`);
    }
    map.set(group, [...new Set([...(map.get(group) ?? []), role])]);
  }
  return map;
}

function oidcProviderFrom(env: Env, upperId: string): OidcProviderConfig {
  const v = (suffix: (typeof OIDC_SUFFIXES)[number]) => env[`CAS_OIDC_${upperId}_${suffix}`] || undefined;
  const prefix = `CAS_OIDC_${upperId}_`;
  if (!OIDC_ID.test(upperId)) {
    throw new ConfigError(
      `${prefix}ISSUER: the provider id '${upperId}' must be 1–27 capital letters, digits and underscores`,
    );
  }
  const issuer = webUrl(`${prefix}ISSUER`, v('ISSUER')!).href;
  const clientId = v('CLIENT_ID');
  if (!clientId || clientId.length > 256)
    throw new ConfigError(`${prefix}CLIENT_ID is required (up to 256 characters)`);
  let clientSecret = v('CLIENT_SECRET');
  const secretFile = v('CLIENT_SECRET_FILE');
  if (clientSecret && secretFile) {
    throw new ConfigError(`set ${prefix}CLIENT_SECRET or ${prefix}CLIENT_SECRET_FILE, not both`);
  }
  if (secretFile) {
    try {
      clientSecret = readFileSync(resolve(secretFile), 'utf8').trim();
    } catch (error) {
      throw new ConfigError(`${prefix}CLIENT_SECRET_FILE cannot be read: ${(error as Error).message}`);
    }
  }
  if (!clientSecret) throw new ConfigError(`${prefix}CLIENT_SECRET or ${prefix}CLIENT_SECRET_FILE is required`);
  const scopes = (v('SCOPES') ?? 'openid profile email groups').split(/[\s,]+/).filter(Boolean);
  if (!scopes.includes('openid')) throw new ConfigError(`${prefix}SCOPES must include openid`);
  if (scopes.some((s) => !/^[\x21\x23-\x5b\x5d-\x7e]{1,128}$/.test(s))) {
    throw new ConfigError(`${prefix}SCOPES has an invalid scope`);
  }
  const usernameClaim = v('USERNAME_CLAIM') ?? 'preferred_username';
  const groupsClaim = v('GROUPS_CLAIM') ?? 'groups';
  for (const [suffix, claim] of [
    ['USERNAME_CLAIM', usernameClaim],
    ['GROUPS_CLAIM', groupsClaim],
  ]) {
    if (!CLAIM_NAME.test(claim)) throw new ConfigError(`${prefix}${suffix} is not a valid claim name: '${claim}'`);
  }
  const idTokenAlg = v('ID_TOKEN_ALG') ?? 'RS256';
  if (!OIDC_ID_TOKEN_ALGS.includes(idTokenAlg)) {
    throw new ConfigError(`${prefix}ID_TOKEN_ALG must be one of ${OIDC_ID_TOKEN_ALGS.join(', ')}, got '${idTokenAlg}'`);
  }
  const displayName = v('DISPLAY_NAME') ?? upperId.toLowerCase();
  if (displayName.length > 100) throw new ConfigError(`${prefix}DISPLAY_NAME must be at most 100 characters`);
  return {
    id: upperId.toLowerCase(),
    displayName,
    issuer,
    clientId,
    clientSecret,
    scopes,
    usernameClaim,
    groupsClaim,
    roleMap: roleMapFrom(`${prefix}ROLE_MAP`, v('ROLE_MAP')),
    idTokenAlg,
  };
}

/** Every CAS_OIDC_<ID>_* group with an ISSUER is a provider; any other CAS_OIDC_ variable is a mistake and stops start-up. */
function oidcFrom(env: Env, port: number, tls: boolean): OidcConfig {
  const ids = new Set<string>();
  const seen: Array<{ name: string; id: string }> = [];
  for (const name of Object.keys(env).sort()) {
    if (!name.startsWith('CAS_OIDC_') || OIDC_GLOBALS.has(name) || env[name] === undefined) continue;
    const suffix = [...OIDC_SUFFIXES]
      .sort((a, b) => b.length - a.length)
      .find((s) => name.endsWith(`_${s}`) && name.length > `CAS_OIDC__${s}`.length);
    if (!suffix) throw new ConfigError(`${name} is not a known setting (CAS_OIDC_<ID>_${OIDC_SUFFIXES.join('|')})`);
    const id = name.slice('CAS_OIDC_'.length, name.length - suffix.length - 1);
    seen.push({ name, id });
    if (suffix === 'ISSUER' && env[name]) ids.add(id);
  }
  for (const { name, id } of seen) {
    if (!ids.has(id)) throw new ConfigError(`${name} is set, but CAS_OIDC_${id}_ISSUER is not`);
  }
  const providers = [...ids].map((id) => oidcProviderFrom(env, id));
  const publicUrlRaw = env.CAS_PUBLIC_URL || `${tls ? 'https' : 'http'}://localhost:${port}`;
  if (providers.length > 0 && !env.CAS_PUBLIC_URL) {
    throw new ConfigError('CAS_PUBLIC_URL is required with OpenID Connect providers (the address browsers use)');
  }
  const publicUrl = webUrl('CAS_PUBLIC_URL', publicUrlRaw).href.replace(/\/+$/, '');
  return {
    providers,
    publicUrl,
    timeoutSeconds: integer(env, 'CAS_OIDC_TIMEOUT_SECONDS', 10, 1, 120),
    clockToleranceSeconds: integer(env, 'CAS_OIDC_CLOCK_TOLERANCE_SECONDS', 30, 0, 300),
  };
}

/** A PEM file the service reads: it must exist and hold a PEM block of `label`, or start-up stops naming it. */
function pemFile(env: Env, name: string, label: RegExp): string | undefined {
  const raw = env[name];
  if (raw === undefined || raw === '') return undefined;
  const path = resolve(raw);
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    throw new ConfigError(`${name} cannot be read: ${(error as NodeJS.ErrnoException).code ?? 'error'} ${path}`);
  }
  if (!label.test(text)) throw new ConfigError(`${name} must be a PEM file (${path} has no PEM block of that kind)`);
  return path;
}

function tlsFrom(env: Env): TlsConfig | undefined {
  const certFile = pemFile(env, 'CAS_TLS_CERT_FILE', /-----BEGIN CERTIFICATE-----/);
  const keyFile = pemFile(env, 'CAS_TLS_KEY_FILE', /-----BEGIN [A-Z ]*PRIVATE KEY-----/);
  if (Boolean(certFile) !== Boolean(keyFile)) {
    throw new ConfigError('CAS_TLS_CERT_FILE and CAS_TLS_KEY_FILE must be set together');
  }
  return certFile && keyFile ? { certFile, keyFile } : undefined;
}

function kubeFrom(env: Env, publicUrl: string): KubeConfig {
  return {
    publicUrl,
    publicCaFile: pemFile(env, 'CAS_PUBLIC_CA_FILE', /-----BEGIN CERTIFICATE-----/),
    kubeconfigMaxSeconds: integer(env, 'CAS_KUBECONFIG_MAX_SECONDS', 7 * 86400, 60, 366 * 86400),
  };
}

function metricsFrom(env: Env, host: string): MetricsConfig {
  const token = env.CAS_METRICS_TOKEN || undefined;
  if (token !== undefined && !/^[\x21-\x7e]{16,512}$/.test(token)) {
    throw new ConfigError('CAS_METRICS_TOKEN must be 16–512 printable characters without spaces');
  }
  const metricsHost = env.CAS_METRICS_HOST || host;
  if (!/^[A-Za-z0-9.:-]+$/.test(metricsHost)) {
    throw new ConfigError(`CAS_METRICS_HOST is not a valid address: '${metricsHost}'`);
  }
  const port = env.CAS_METRICS_PORT ? integer(env, 'CAS_METRICS_PORT', 0, 0, 65535) : undefined;
  return {
    token,
    port,
    host: metricsHost,
    queryTimeoutSeconds: integer(env, 'CAS_METRICS_QUERY_TIMEOUT_SECONDS', 30, 1, 600),
  };
}

function execFrom(env: Env): ExecConfig {
  const recording = env.CAS_EXEC_RECORDING || 'off';
  if (recording !== 'off' && recording !== 'output') {
    throw new ConfigError(`CAS_EXEC_RECORDING must be off or output, got '${recording}'`);
  }
  const maxSessions = integer(env, 'CAS_EXEC_MAX_SESSIONS', 500, 1, 100000);
  return {
    maxSessions,
    maxSessionsPerCaller: Math.min(integer(env, 'CAS_EXEC_MAX_SESSIONS_PER_CALLER', 10, 1, 100000), maxSessions),
    idleMs: integer(env, 'CAS_EXEC_IDLE_SECONDS', 1800, 1, 7 * 86400) * 1000,
    maxMs: integer(env, 'CAS_EXEC_MAX_SECONDS', 86400, 1, 30 * 86400) * 1000,
    pingMs: integer(env, 'CAS_EXEC_PING_SECONDS', 30, 1, 300) * 1000,
    recording,
    resumeMs: integer(env, 'CAS_SESSION_RESUME_SECONDS', 60, 1, 3600) * 1000,
    resumeBytes: integer(env, 'CAS_SESSION_RESUME_BYTES', 1024 * 1024, 1024, 64 * 1024 * 1024),
    ...replicaFrom(env),
  };
}

function debugFrom(env: Env): DebugConfig {
  const namespace = env.CAS_NODE_SHELL_NAMESPACE || undefined;
  if (namespace !== undefined && (namespace.length > 63 || !/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/.test(namespace))) {
    throw new ConfigError(
      `CAS_NODE_SHELL_NAMESPACE must be a namespace (a DNS label), got '${namespace.slice(0, 80)}'`,
    );
  }
  const image = env.CAS_NODE_SHELL_IMAGE || 'busybox:1.36';
  const problem = imageProblem(image);
  if (problem) throw new ConfigError(`CAS_NODE_SHELL_IMAGE: ${problem}`);
  return {
    startMs: integer(env, 'CAS_DEBUG_START_SECONDS', 60, 1, 600) * 1000,
    nodeShellNamespace: namespace,
    nodeShellImage: image,
    sweepMs: integer(env, 'CAS_NODE_SHELL_SWEEP_SECONDS', 30, 1, 300) * 1000,
  };
}

function replicaFrom(env: Env): { replicaUrl?: string; replicaSecret?: string } {
  const raw = env.CAS_REPLICA_URL || undefined;
  const replicaSecret = env.CAS_REPLICA_SECRET || undefined;
  if (replicaSecret !== undefined && (replicaSecret.length < 32 || replicaSecret.length > 512)) {
    throw new ConfigError('CAS_REPLICA_SECRET must be 32–512 characters');
  }
  if (raw === undefined) return { replicaSecret };
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new ConfigError(`CAS_REPLICA_URL must be an http(s) URL, got '${raw.slice(0, 200)}'`);
  }
  if ((url.protocol !== 'http:' && url.protocol !== 'https:') || url.pathname !== '/' || url.search || url.username) {
    throw new ConfigError(`CAS_REPLICA_URL must be an http(s) URL with no path, got '${raw.slice(0, 200)}'`);
  }
  if (replicaSecret === undefined) {
    throw new ConfigError(
      "CAS_REPLICA_SECRET is required with CAS_REPLICA_URL: the replicas' shared secret for forwarded sessions",
    );
  }
  return { replicaUrl: url.origin, replicaSecret };
}

function auditFrom(env: Env): AuditConfig {
  const log = env.CAS_AUDIT_LOG || 'off';
  if (log !== 'off' && log !== 'stdout') throw new ConfigError(`CAS_AUDIT_LOG must be off or stdout, got '${log}'`);
  return { retentionDays: integer(env, 'CAS_AUDIT_RETENTION_DAYS', 90, 0, 36500), log };
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
  const port = integer(env, 'PORT', 8080, 0, 65535);
  const metrics = metricsFrom(env, host);
  if (metrics.port !== undefined && metrics.port !== 0 && metrics.port === port) {
    throw new ConfigError(
      'CAS_METRICS_PORT must differ from PORT (to serve /metrics on the main port, set CAS_METRICS_TOKEN)',
    );
  }
  const tls = tlsFrom(env);
  const oidc = oidcFrom(env, port, tls !== undefined);
  return {
    port,
    host,
    dataDir,
    database: databaseFrom(env, dataDir),
    encryptionKey: encryptionKeyFrom(env),
    corsOrigins: originsFrom(env),
    // Browsers cap it (Chromium at 2 h, Firefox at 24 h); 0 makes every cross-origin call preflight again.
    corsMaxAgeSeconds: integer(env, 'CAS_CORS_MAX_AGE_SECONDS', 600, 0, 86_400),
    logLevel,
    session: { idleSeconds, maxSeconds },
    loginThrottle: {
      windowSeconds: integer(env, 'CAS_LOGIN_THROTTLE_WINDOW_SECONDS', 900, 1, 86400),
      maxFailuresPerUsername: integer(env, 'CAS_LOGIN_MAX_FAILURES_PER_USERNAME', 5, 1, 10000),
      maxFailuresPerAddress: integer(env, 'CAS_LOGIN_MAX_FAILURES_PER_ADDRESS', 20, 1, 100000),
      maxBootstrapAttemptsPerAddress: integer(env, 'CAS_BOOTSTRAP_MAX_ATTEMPTS_PER_ADDRESS', 60, 1, 100000),
    },
    trustProxy: trustProxyFrom(env),
    bootstrap,
    clusters: clustersFrom(env),
    clusterRequestTimeoutSeconds: integer(env, 'CAS_CLUSTER_REQUEST_TIMEOUT_SECONDS', 30, 1, 3600),
    shutdownGraceSeconds: integer(env, 'CAS_SHUTDOWN_GRACE_SECONDS', 30, 0, 3600),
    metrics,
    apiKeysPerUser: integer(env, 'CAS_API_KEYS_PER_USER', 50, 1, 10000),
    passwordLogin: boolean(env, 'CAS_PASSWORD_LOGIN', true),
    oidc,
    kube: kubeFrom(env, oidc.publicUrl),
    tls,
    helm: {
      binary: env.CAS_HELM_BINARY || 'helm',
      maxProcesses: integer(env, 'CAS_HELM_MAX_PROCESSES', 4, 1, 64),
      maxProcessesPerUser: integer(env, 'CAS_HELM_MAX_PROCESSES_PER_USER', 2, 1, 64),
      timeoutSeconds: integer(env, 'CAS_HELM_TIMEOUT_SECONDS', 300, 5, 3600),
      repoAllowLoopback: boolean(env, 'CAS_HELM_REPO_ALLOW_LOOPBACK', false),
      repoCaFile: env.CAS_HELM_REPO_CA_FILE || undefined,
    },
    audit: auditFrom(env),
    watch: watchFrom(env),
    listCache: {
      maxObjects: integer(env, 'CAS_LIST_CACHE_MAX_OBJECTS', 200_000, 1, 100_000_000),
      maxBytes: integer(env, 'CAS_LIST_CACHE_MAX_BYTES', 128 * 1024 * 1024, 1024 * 1024, 64 * 1024 ** 3),
      idleSeconds: integer(env, 'CAS_LIST_CACHE_IDLE_SECONDS', 600, 1, 86_400),
    },
    exec: execFrom(env),
    debug: debugFrom(env),
    limits: {
      maxJsonDepth: integer(env, 'CAS_MAX_JSON_DEPTH', 64, 2, 1000),
      requestTimeoutSeconds: integer(env, 'CAS_REQUEST_TIMEOUT_SECONDS', 30, 1, 3600),
      connectionTimeoutSeconds: integer(env, 'CAS_CONNECTION_TIMEOUT_SECONDS', 300, 0, 86400),
      keepAliveTimeoutSeconds: integer(env, 'CAS_KEEP_ALIVE_TIMEOUT_SECONDS', 72, 1, 3600),
      maxConnectionsPerAddress: integer(env, 'CAS_MAX_CONNECTIONS_PER_ADDRESS', 256, 0, 1_000_000),
      passwordHashConcurrency: integer(env, 'CAS_PASSWORD_HASH_CONCURRENCY', 1, 1, 64),
      passwordHashQueue: integer(env, 'CAS_PASSWORD_HASH_QUEUE', 32, 0, 10000),
      allowLinkLocalClusters: boolean(env, 'CAS_CLUSTER_ALLOW_LINK_LOCAL', false),
    },
  };
}

export const APP_CONFIG = Symbol('APP_CONFIG');
