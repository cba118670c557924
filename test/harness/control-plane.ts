// Real Kubernetes v1.20.2 control planes (etcd + kube-apiserver +
// kube-controller-manager) on loopback, for tests. No fakes.
//
//   const cp = await startControlPlane('a');   // own CA, free ports, ready
//   await kubeRequest(cp, 'GET', '/version');
//   await cp.stop();                            // kills it, removes its dir
//
// Every process runs in its own process group (detached) with stdio going to
// log files in the state dir. Control planes started by a test process are
// killed and their dirs removed when stop() is called, and also at process
// exit, SIGINT/SIGTERM/SIGHUP and on uncaught exceptions. Control planes
// started with { keepAfterExit: true } (the CLI's `up`) outlive the process;
// attachControlPlane(dir) finds them again through <dir>/info.json.
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { closeSync, existsSync, openSync, readFileSync, rmSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { stringify as toYaml } from 'yaml';
import { ensureBinaries, KUBE_VERSION, type Binaries } from './binaries.js';
import { makeCertificates } from './certs.js';

export { KUBE_VERSION } from './binaries.js';

export interface ControlPlane {
  name: string;
  /** https://127.0.0.1:<port> */
  server: string;
  /** state dir: pki/, etcd data, *.log, kubeconfig, audit.log, info.json */
  dir: string;
  /** contexts `admin` (client cert, current), `admin-token`, `viewer` (read-only token); all data inline */
  kubeconfigPath: string;
  /** CA PEM (signs the serving cert and the client certs) */
  caData: string;
  /** bearer token of user `cas-admin-token` (group system:masters) */
  adminToken: string;
  /** bearer token of user `cas-viewer`: get/list/watch on everything, nothing else */
  viewerToken: string;
  /** client cert (CN=cas-admin, O=system:masters) and its key, PEM */
  adminCertData: string;
  adminKeyData: string;
  /** JSON lines, one event per request (stage ResponseComplete, level Request) */
  auditLogPath: string;
  /** PKCS#8 PEM ECDSA P-256 key that signs service account tokens (public: sa.pub beside it) */
  serviceAccountKeyPath: string;
  /** Kills the processes it started and removes dir (a no-op for shared/attached-from-env ones). */
  stop(): Promise<void>;
}

export interface AuditEvent {
  kind: 'Event';
  apiVersion: string;
  level: 'Metadata' | 'Request' | 'RequestResponse';
  auditID: string;
  stage: string;
  requestURI: string;
  verb: string;
  user: { username: string; uid?: string; groups?: string[]; extra?: Record<string, string[]> };
  impersonatedUser?: { username: string; uid?: string; groups?: string[]; extra?: Record<string, string[]> };
  sourceIPs?: string[];
  userAgent?: string;
  objectRef?: {
    resource?: string;
    namespace?: string;
    name?: string;
    uid?: string;
    apiGroup?: string;
    apiVersion?: string;
    resourceVersion?: string;
    subresource?: string;
  };
  responseStatus?: { code?: number; status?: string; reason?: string; message?: string };
  requestObject?: any;
  requestReceivedTimestamp: string;
  stageTimestamp: string;
  annotations?: Record<string, string>;
}

export interface StartOptions {
  /** Use this dir as the state dir (created; must not hold a running control plane). Default: a new temp dir. */
  stateDir?: string;
  /** Leave the processes running when this process exits (the CLI's `up`). Default false. */
  keepAfterExit?: boolean;
  /** Progress lines; default: a single "ready" line on stderr. */
  log?: (line: string) => void;
  /** The apiserver's port on 127.0.0.1 (the CLI's `--port`); default: a free one. Never retried on another. */
  apiserverPort?: number;
}

/** What <dir>/info.json holds. */
export interface ControlPlaneInfo {
  version: 1;
  kubeVersion: string;
  name: string;
  server: string;
  dir: string;
  kubeconfigPath: string;
  caData: string;
  adminToken: string;
  viewerToken: string;
  adminCertData: string;
  adminKeyData: string;
  auditLogPath: string;
  serviceAccountKeyPath: string;
  ports: { etcdClient: number; etcdPeer: number; apiserver: number; controllerManager: number };
  pids: { etcd: number; apiserver: number; controllerManager: number };
  keepAfterExit: boolean;
  startedAt: string;
  startSeconds: number;
}

export const VIEWER_USER = 'cas-viewer';
export const ADMIN_CERT_USER = 'cas-admin';
export const ADMIN_TOKEN_USER = 'cas-admin-token';
export const VIEWER_CLUSTER_ROLE = 'cas-test-read-only';

const READY_TIMEOUT_MS = Number(process.env.CAS_CP_READY_TIMEOUT_MS || 60_000);
const POLL_MS = 100;
const START_ATTEMPTS = 3;

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

// ---------------------------------------------------------------- processes

/** Control planes of this process to tear down at exit: dir -> pids. */
const owned = new Map<string, number[]>();
let handlersInstalled = false;

function procState(pid: number): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
  } catch {
    return undefined;
  }
}

/** True if pid runs (zombies count as gone). */
export function isAlive(pid: number): boolean {
  if (!pid) return false;
  try {
    process.kill(pid, 0);
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
  const st = procState(pid);
  return st !== 'Z' && st !== 'X';
}

/** True if pid runs and its command line mentions dir (guards against pid reuse). */
function isOurs(pid: number, dir: string): boolean {
  if (!isAlive(pid)) return false;
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(dir);
  } catch {
    return !existsSync('/proc/self'); // no procfs: trust the pid
  }
}

function signal(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(-pid, sig); // its process group (it was started detached)
  } catch {
    try {
      process.kill(pid, sig);
    } catch {
      /* gone */
    }
  }
}

function sleepSync(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

function killSync(dir: string, pids: number[]): void {
  const mine = pids.filter((p) => isOurs(p, dir));
  for (const p of mine) signal(p, 'SIGKILL');
  const deadline = Date.now() + 3000;
  while (mine.some(isAlive) && Date.now() < deadline) sleepSync(20);
  try {
    rmSync(dir, { recursive: true, force: true, maxRetries: 5, retryDelay: 50 });
  } catch {
    /* best effort at exit */
  }
}

async function killAndRemove(dir: string, pids: number[]): Promise<void> {
  const mine = pids.filter((p) => isOurs(p, dir));
  for (const p of mine) signal(p, 'SIGTERM');
  let deadline = Date.now() + 5000;
  while (mine.some(isAlive) && Date.now() < deadline) await sleep(25);
  const left = mine.filter(isAlive);
  for (const p of left) signal(p, 'SIGKILL');
  deadline = Date.now() + 5000;
  while (left.some(isAlive) && Date.now() < deadline) await sleep(25);
  const still = left.filter(isAlive);
  if (still.length) throw new Error(`processes ${still.join(', ')} of ${dir} survived SIGKILL`);
  await rm(dir, { recursive: true, force: true, maxRetries: 5, retryDelay: 50 });
}

function cleanupOwnedSync(): void {
  for (const [dir, pids] of owned) killSync(dir, pids);
  owned.clear();
}

function installExitHandlers(): void {
  if (handlersInstalled) return;
  handlersInstalled = true;
  process.on('exit', cleanupOwnedSync);
  process.on('uncaughtExceptionMonitor', cleanupOwnedSync);
  for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
    process.once(sig, () => {
      cleanupOwnedSync();
      // our listener is gone now: re-raise so the default action (or others' listeners) applies
      if (process.listenerCount(sig) === 0) process.kill(process.pid, sig);
    });
  }
}

interface Proc {
  child: ChildProcess;
  name: string;
  logPath: string;
  exited?: string;
}

function spawnLogged(name: string, bin: string, args: string[], logPath: string): Proc {
  const fd = openSync(logPath, 'a');
  let child: ChildProcess;
  try {
    child = spawn(bin, args, { detached: true, stdio: ['ignore', fd, fd] });
  } finally {
    closeSync(fd);
  }
  const p: Proc = { child, name, logPath };
  child.on('exit', (code, sig) => {
    p.exited = `${name} exited (${sig ?? 'code ' + code})`;
  });
  child.on('error', (err) => {
    p.exited = `${name} failed to start: ${err.message}`;
  });
  child.unref();
  return p;
}

function logTail(path: string, lines = 25): string {
  try {
    const all = readFileSync(path, 'utf8').trimEnd().split('\n');
    return all.slice(-lines).join('\n');
  } catch {
    return '(no log)';
  }
}

// ---------------------------------------------------------------- ports

async function freePorts(n: number): Promise<number[]> {
  const servers: net.Server[] = [];
  try {
    for (let i = 0; i < n; i++) {
      const s = net.createServer();
      servers.push(s);
      await new Promise<void>((res, rej) => {
        s.once('error', rej);
        s.listen(0, '127.0.0.1', () => res());
      });
    }
    return servers.map((s) => (s.address() as net.AddressInfo).port);
  } finally {
    await Promise.all(servers.map((s) => new Promise<void>((r) => s.close(() => r()))));
  }
}

/** True if something accepts TCP connections on 127.0.0.1:port. */
export function portOpen(port: number): Promise<boolean> {
  return new Promise((res) => {
    const sock = net.connect({ host: '127.0.0.1', port });
    sock.setTimeout(1000);
    sock.once('connect', () => {
      sock.destroy();
      res(true);
    });
    sock.once('timeout', () => {
      sock.destroy();
      res(false);
    });
    sock.once('error', () => res(false));
  });
}

// ---------------------------------------------------------------- requests

export interface KubeRequestOptions {
  /** Authenticate with this bearer token instead of the admin client certificate. */
  token?: string;
  /** Content-Type of the body; default application/json (use application/merge-patch+json etc. for PATCH). */
  contentType?: string;
  headers?: Record<string, string>;
  timeoutMs?: number;
}

type Conn = Pick<ControlPlane, 'server' | 'caData' | 'adminCertData' | 'adminKeyData'>;

/** One request to the control plane's apiserver (admin client cert unless opts.token). body: object (sent as JSON) or string. */
export function kubeRequest(
  cp: Conn,
  method: string,
  path: string,
  body?: unknown,
  opts: KubeRequestOptions = {},
): Promise<{ status: number; body: any; headers: http.IncomingHttpHeaders }> {
  const url = new URL(path, cp.server);
  const payload =
    body === undefined ? undefined : typeof body === 'string' || Buffer.isBuffer(body) ? body : JSON.stringify(body);
  const headers: Record<string, string> = {
    Accept: 'application/json',
    'User-Agent': 'cas-test-harness',
    ...opts.headers,
  };
  if (payload !== undefined) {
    headers['Content-Type'] = opts.contentType ?? 'application/json';
    headers['Content-Length'] = String(Buffer.byteLength(payload));
  }
  if (opts.token) headers.Authorization = `Bearer ${opts.token}`;
  return new Promise((resolve, reject) => {
    const req = https.request(
      url,
      {
        method,
        headers,
        ca: cp.caData,
        ...(opts.token ? {} : { cert: cp.adminCertData, key: cp.adminKeyData }),
        agent: false,
        timeout: opts.timeoutMs ?? 30_000,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          let parsed: any = text;
          if (text && /json/.test(String(res.headers['content-type']))) {
            try {
              parsed = JSON.parse(text);
            } catch {
              /* keep text */
            }
          }
          resolve({ status: res.statusCode ?? 0, body: parsed, headers: res.headers });
        });
        res.on('error', reject);
      },
    );
    req.on('timeout', () => req.destroy(new Error(`${method} ${url} timed out`)));
    req.on('error', reject);
    if (payload !== undefined) req.write(payload);
    req.end();
  });
}

function httpGetStatus(url: string): Promise<number> {
  return new Promise((res) => {
    const mod = url.startsWith('https:') ? https : http;
    const req = mod.get(url, { agent: false, timeout: 2000, rejectUnauthorized: false }, (r) => {
      r.resume();
      r.on('end', () => res(r.statusCode ?? 0));
    });
    req.on('timeout', () => req.destroy());
    req.on('error', () => res(0));
  });
}

// ---------------------------------------------------------------- audit

export async function readAudit(cp: Pick<ControlPlane, 'auditLogPath'>): Promise<AuditEvent[]> {
  let text: string;
  try {
    text = await readFile(cp.auditLogPath, 'utf8');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw e;
  }
  const events: AuditEvent[] = [];
  for (const line of text.split('\n')) {
    if (!line.trim()) continue;
    try {
      events.push(JSON.parse(line) as AuditEvent);
    } catch {
      /* a line being written right now */
    }
  }
  return events;
}

/**
 * Waits until audit events matching `pred` are in the log (the apiserver may
 * answer a request a moment before its event is written) and returns them.
 */
export async function waitForAudit(
  cp: Pick<ControlPlane, 'auditLogPath'>,
  pred: (e: AuditEvent) => boolean,
  timeoutMs = 5000,
): Promise<AuditEvent[]> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const found = (await readAudit(cp)).filter(pred);
    if (found.length || Date.now() > deadline) return found;
    await sleep(50);
  }
}

/** Thrown from a waitFor callback to stop waiting at once. */
export class FatalWaitError extends Error {}

/**
 * Polls fn until it returns a value other than undefined/false, or throws
 * after timeoutMs. Errors thrown by fn count as "not yet", except FatalWaitError.
 */
export async function waitFor<T>(
  what: string,
  fn: () => Promise<T | undefined | false>,
  timeoutMs = 30_000,
  intervalMs = POLL_MS,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let lastErr: unknown;
  for (;;) {
    try {
      const v = await fn();
      if (v !== undefined && v !== false) return v as T;
    } catch (e) {
      if (e instanceof FatalWaitError) throw e;
      lastErr = e;
    }
    if (Date.now() > deadline) {
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${lastErr ? `: ${String(lastErr)}` : ''}`);
    }
    await sleep(intervalMs);
  }
}

// ---------------------------------------------------------------- config files

const AUDIT_POLICY = {
  apiVersion: 'audit.k8s.io/v1',
  kind: 'Policy',
  omitStages: ['RequestReceived'],
  rules: [
    // the harness' own readiness polling
    { level: 'None', nonResourceURLs: ['/readyz', '/readyz/*', '/healthz', '/healthz/*', '/livez', '/livez/*'] },
    // the apiserver talking to itself over loopback
    { level: 'None', users: ['system:apiserver'] },
    // the controller manager's reads (its writes, e.g. garbage collection, are kept);
    // its controllers act as ServiceAccounts in kube-system
    { level: 'None', users: ['system:kube-controller-manager'], verbs: ['get', 'list', 'watch'] },
    { level: 'None', userGroups: ['system:serviceaccounts:kube-system'], verbs: ['get', 'list', 'watch'] },
    // TokenRequests (the controllers' credentials) cannot be encoded at level Request in 1.20
    { level: 'Metadata', resources: [{ group: '', resources: ['serviceaccounts/token'] }] },
    { level: 'Request' },
  ],
};

const b64 = (s: string) => Buffer.from(s).toString('base64');

function kubeconfig(
  clusterName: string,
  server: string,
  caData: string,
  users: { name: string; context: string; user: Record<string, string> }[],
): string {
  return toYaml({
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name: clusterName, cluster: { server, 'certificate-authority-data': b64(caData) } }],
    users: users.map((u) => ({ name: u.name, user: u.user })),
    contexts: users.map((u) => ({ name: u.context, context: { cluster: clusterName, user: u.name } })),
    'current-context': users[0]!.context,
    preferences: {},
  });
}

// ---------------------------------------------------------------- start

function toControlPlane(info: ControlPlaneInfo, stop: () => Promise<void>): ControlPlane {
  return {
    name: info.name,
    server: info.server,
    dir: info.dir,
    kubeconfigPath: info.kubeconfigPath,
    caData: info.caData,
    adminToken: info.adminToken,
    viewerToken: info.viewerToken,
    adminCertData: info.adminCertData,
    adminKeyData: info.adminKeyData,
    auditLogPath: info.auditLogPath,
    serviceAccountKeyPath: info.serviceAccountKeyPath,
    stop,
  };
}

let nameCounter = 0;

/**
 * Starts etcd + kube-apiserver + kube-controller-manager on free loopback
 * ports with a CA of its own, and resolves once /readyz is ok, the default
 * namespace and RBAC bootstrap policy exist, the viewer's read-only binding
 * is in force and the controller manager is running (the `default`
 * ServiceAccount exists). Builds the binaries first if they are missing.
 */
export async function startControlPlane(name?: string, opts: StartOptions = {}): Promise<ControlPlane> {
  const t0 = Date.now();
  const cpName = name ?? `cp${process.pid}-${++nameCounter}`;
  if (!/^[a-zA-Z0-9][a-zA-Z0-9._-]*$/.test(cpName)) throw new Error(`bad control plane name ${JSON.stringify(cpName)}`);
  const log = opts.log ?? (() => {});
  const bins = await ensureBinaries();

  const dir = opts.stateDir ? resolve(opts.stateDir) : await mkdtemp(join(tmpdir(), `cas-cp-${cpName}-`));
  await mkdir(dir, { recursive: true });
  if (!opts.keepAfterExit) {
    installExitHandlers();
    owned.set(dir, []);
  }
  try {
    const info = await startIn(dir, cpName, bins, opts, log, t0);
    if (!opts.keepAfterExit) owned.set(dir, Object.values(info.pids));
    (opts.log ?? ((l: string) => process.stderr.write(l + '\n')))(
      `[harness] control plane ${cpName} ready at ${info.server} in ${info.startSeconds.toFixed(1)} s (${dir})`,
    );
    return toControlPlane(info, async () => {
      owned.delete(dir);
      await killAndRemove(dir, Object.values(info.pids));
    });
  } catch (err) {
    const pids = owned.get(dir) ?? [];
    owned.delete(dir);
    if (process.env.CAS_KEEP_STATE !== '1') await killAndRemove(dir, pids).catch(() => {});
    throw err;
  }
}

async function startIn(
  dir: string,
  name: string,
  bins: Binaries,
  opts: StartOptions,
  log: (l: string) => void,
  t0: number,
): Promise<ControlPlaneInfo> {
  const pki = join(dir, 'pki');
  await mkdir(pki, { recursive: true });
  log(`[harness] ${name}: certificates in ${pki}`);
  const certs = await makeCertificates(pki, name);
  const [caData, adminCertData, adminKeyData] = await Promise.all(
    [certs.caCert, certs.adminCert, certs.adminKey].map((p) => readFile(p, 'utf8')),
  );
  const cmCert = await readFile(certs.controllerManagerCert, 'utf8');
  const cmKey = await readFile(certs.controllerManagerKey, 'utf8');

  const adminToken = randomBytes(24).toString('hex');
  const viewerToken = randomBytes(24).toString('hex');
  const tokenFile = join(dir, 'tokens.csv');
  await writeFile(
    tokenFile,
    `${adminToken},${ADMIN_TOKEN_USER},${ADMIN_TOKEN_USER},"system:masters"\n` +
      `${viewerToken},${VIEWER_USER},${VIEWER_USER},"cas:viewers"\n`,
    { mode: 0o600 },
  );
  const auditPolicy = join(dir, 'audit-policy.yaml');
  await writeFile(auditPolicy, toYaml(AUDIT_POLICY));
  const auditLogPath = join(dir, 'audit.log');
  const kubeconfigPath = join(dir, 'kubeconfig');
  const cmKubeconfig = join(dir, 'controller-manager.kubeconfig');

  let lastErr: Error | undefined;
  for (let attempt = 1; attempt <= START_ATTEMPTS; attempt++) {
    const [etcdClient, etcdPeer, freeApiserverPort, cmPort] = (await freePorts(4)) as [number, number, number, number];
    const apiserverPort = opts.apiserverPort ?? freeApiserverPort;
    const server = `https://127.0.0.1:${apiserverPort}`;
    const conn: Conn = { server, caData, adminCertData, adminKeyData };
    await writeFile(
      kubeconfigPath,
      kubeconfig(`cas-${name}`, server, caData, [
        {
          name: ADMIN_CERT_USER,
          context: 'admin',
          user: { 'client-certificate-data': b64(adminCertData), 'client-key-data': b64(adminKeyData) },
        },
        { name: ADMIN_TOKEN_USER, context: 'admin-token', user: { token: adminToken } },
        { name: VIEWER_USER, context: 'viewer', user: { token: viewerToken } },
      ]),
      { mode: 0o600 },
    );
    await writeFile(
      cmKubeconfig,
      kubeconfig(`cas-${name}`, server, caData, [
        {
          name: 'system:kube-controller-manager',
          context: 'controller-manager',
          user: { 'client-certificate-data': b64(cmCert), 'client-key-data': b64(cmKey) },
        },
      ]),
      { mode: 0o600 },
    );
    await rm(join(dir, 'etcd'), { recursive: true, force: true });
    await rm(auditLogPath, { force: true });

    const procs: Proc[] = [];
    const track = (p: Proc) => {
      procs.push(p);
      if (owned.has(dir))
        owned.set(
          dir,
          procs.map((q) => q.child.pid ?? 0),
        );
      return p;
    };
    const failed = () => procs.find((p) => p.exited);
    const clash = () =>
      procs.some((p) => p.exited && /address already in use|bind: address/i.test(logTail(p.logPath, 60)));
    try {
      log(`[harness] ${name}: starting etcd on 127.0.0.1:${etcdClient} (attempt ${attempt})`);
      const etcd = track(
        spawnLogged(
          'etcd',
          bins.etcd,
          [
            `--name=cas-${name}`,
            `--data-dir=${join(dir, 'etcd')}`,
            `--listen-client-urls=http://127.0.0.1:${etcdClient}`,
            `--advertise-client-urls=http://127.0.0.1:${etcdClient}`,
            `--listen-peer-urls=http://127.0.0.1:${etcdPeer}`,
            `--initial-advertise-peer-urls=http://127.0.0.1:${etcdPeer}`,
            `--initial-cluster=cas-${name}=http://127.0.0.1:${etcdPeer}`,
            '--initial-cluster-state=new',
            '--logger=zap',
            '--log-level=warn',
            '--snapshot-count=100000',
            '--quota-backend-bytes=2147483648',
          ],
          join(dir, 'etcd.log'),
        ),
      );
      await waitFor(
        'etcd /health',
        async () => {
          const f = failed();
          if (f) throw new FatalWaitError(f.exited);
          return (await httpGetStatus(`http://127.0.0.1:${etcdClient}/health`)) === 200;
        },
        READY_TIMEOUT_MS,
        50,
      ).catch((e: Error) => {
        throw new Error(`control plane ${name}: ${e.message}\n--- etcd.log (last lines) ---\n${logTail(etcd.logPath)}`);
      });

      log(`[harness] ${name}: starting kube-apiserver on ${server}`);
      const apiserver = track(
        spawnLogged(
          'kube-apiserver',
          bins.apiserver,
          [
            `--etcd-servers=http://127.0.0.1:${etcdClient}`,
            '--bind-address=127.0.0.1',
            `--secure-port=${apiserverPort}`,
            '--insecure-port=0',
            '--advertise-address=127.0.0.1',
            '--endpoint-reconciler-type=none',
            `--tls-cert-file=${certs.serverCert}`,
            `--tls-private-key-file=${certs.serverKey}`,
            `--client-ca-file=${certs.caCert}`,
            `--service-account-key-file=${certs.serviceAccountPub}`,
            `--service-account-signing-key-file=${certs.serviceAccountKey}`,
            '--service-account-issuer=https://kubernetes.default.svc.cluster.local',
            '--authorization-mode=RBAC',
            `--token-auth-file=${tokenFile}`,
            '--service-cluster-ip-range=10.0.0.0/24',
            `--audit-policy-file=${auditPolicy}`,
            `--audit-log-path=${auditLogPath}`,
            '--audit-log-format=json',
            '--audit-log-mode=blocking',
            `--cert-dir=${join(dir, 'apiserver-certs')}`,
            // logs are proxied to kubelets (test/harness/kubelet.ts): verify their serving
            // certificate against the cluster CA and present a client certificate of our own
            `--kubelet-certificate-authority=${certs.caCert}`,
            `--kubelet-client-certificate=${certs.kubeletClientCert}`,
            `--kubelet-client-key=${certs.kubeletClientKey}`,
            '--kubelet-preferred-address-types=InternalIP',
            // ephemeral (debug) containers are alpha in v1.20: the pods/ephemeralcontainers subresource
            // and their exec/attach exist only behind the gate (docs/TERMINAL.md, debugging)
            '--feature-gates=EphemeralContainers=true',
            // node shells (src/debug/) run privileged pods, as a real cluster's policy may allow
            '--allow-privileged=true',
            '--profiling=false',
          ],
          join(dir, 'kube-apiserver.log'),
        ),
      );
      const alive = () => {
        const f = failed();
        if (f) throw new FatalWaitError(`${f.exited}\n--- ${f.name}.log (last lines) ---\n${logTail(f.logPath)}`);
      };

      await waitFor(
        'kube-apiserver /readyz',
        async () => {
          alive();
          const r = await kubeRequest(conn, 'GET', '/readyz', undefined, { timeoutMs: 2000 });
          return r.status === 200;
        },
        READY_TIMEOUT_MS,
      ).catch((e: Error) => {
        if (e instanceof FatalWaitError) throw new Error(`control plane ${name}: ${e.message}`);
        throw new Error(
          `control plane ${name}: ${e.message}\n--- kube-apiserver.log (last lines) ---\n${logTail(apiserver.logPath)}`,
        );
      });
      log(
        `[harness] ${name}: /readyz ok after ${((Date.now() - t0) / 1000).toFixed(1)} s; starting kube-controller-manager`,
      );

      // after /readyz: the controller manager gives up if the apiserver is not healthy
      // within 10 s, and needs the RBAC bootstrap policy in place
      const cm = track(
        spawnLogged(
          'kube-controller-manager',
          bins.controllerManager,
          [
            `--kubeconfig=${cmKubeconfig}`,
            `--service-account-private-key-file=${certs.serviceAccountKey}`,
            `--root-ca-file=${certs.caCert}`,
            `--cluster-signing-cert-file=${certs.caCert}`,
            `--cluster-signing-key-file=${certs.caKey}`,
            // each controller acts as its own kube-system ServiceAccount with the bootstrap
            // `system:controller:*` roles, as in kubeadm clusters
            '--use-service-account-credentials=true',
            // the default client rate limit (20 qps) serialises the start of ~30 controllers
            '--kube-api-qps=200',
            '--kube-api-burst=400',
            '--leader-elect=false',
            '--bind-address=127.0.0.1',
            '--port=0',
            `--secure-port=${cmPort}`,
            `--cert-dir=${join(dir, 'controller-manager-certs')}`,
            '--controllers=*,-nodeipam,-nodelifecycle,-cloud-node-lifecycle,-route,-service',
            '--profiling=false',
          ],
          join(dir, 'kube-controller-manager.log'),
        ),
      );

      await ensureViewerRbac(conn);
      const remaining = () => Math.max(5000, READY_TIMEOUT_MS - (Date.now() - t0));
      await waitFor(
        'namespace default readable with the viewer token',
        async () => {
          alive();
          const r = await kubeRequest(conn, 'GET', '/api/v1/namespaces/default', undefined, { token: viewerToken });
          return r.status === 200;
        },
        remaining(),
      );
      await waitFor(
        'kube-controller-manager (ServiceAccount default/default)',
        async () => {
          alive();
          const r = await kubeRequest(conn, 'GET', '/api/v1/namespaces/default/serviceaccounts/default');
          return r.status === 200;
        },
        remaining(),
      ).catch((e: Error) => {
        if (e instanceof FatalWaitError) throw new Error(`control plane ${name}: ${e.message}`);
        throw new Error(
          `control plane ${name}: ${e.message}\n--- kube-controller-manager.log (last lines) ---\n${logTail(cm.logPath)}`,
        );
      });

      const info: ControlPlaneInfo = {
        version: 1,
        kubeVersion: KUBE_VERSION,
        name,
        server,
        dir,
        kubeconfigPath,
        caData,
        adminToken,
        viewerToken,
        adminCertData,
        adminKeyData,
        auditLogPath,
        serviceAccountKeyPath: certs.serviceAccountKey,
        ports: { etcdClient, etcdPeer, apiserver: apiserverPort, controllerManager: cmPort },
        pids: { etcd: etcd.child.pid!, apiserver: apiserver.child.pid!, controllerManager: cm.child.pid! },
        keepAfterExit: !!opts.keepAfterExit,
        startedAt: new Date().toISOString(),
        startSeconds: (Date.now() - t0) / 1000,
      };
      await writeFile(join(dir, 'info.json'), JSON.stringify(info, null, 2) + '\n', { mode: 0o600 });
      return info;
    } catch (err) {
      lastErr = err as Error;
      const pids = procs.map((p) => p.child.pid ?? 0);
      for (const p of pids) if (p) signal(p, 'SIGKILL');
      const deadline = Date.now() + 5000;
      while (pids.some(isAlive) && Date.now() < deadline) await sleep(25);
      if (opts.apiserverPort !== undefined && clash() && (await portOpen(opts.apiserverPort))) {
        throw new Error(`port ${opts.apiserverPort} is already in use: choose another --port`, { cause: err });
      }
      if (attempt < START_ATTEMPTS && clash()) {
        log(`[harness] ${name}: port clash, retrying with other ports`);
        continue;
      }
      throw lastErr;
    }
  }
  throw lastErr ?? new Error('unreachable');
}

async function ensureViewerRbac(conn: Conn): Promise<void> {
  const objects: [string, unknown][] = [
    [
      '/apis/rbac.authorization.k8s.io/v1/clusterroles',
      {
        apiVersion: 'rbac.authorization.k8s.io/v1',
        kind: 'ClusterRole',
        metadata: { name: VIEWER_CLUSTER_ROLE },
        rules: [
          { apiGroups: ['*'], resources: ['*'], verbs: ['get', 'list', 'watch'] },
          { nonResourceURLs: ['*'], verbs: ['get'] },
        ],
      },
    ],
    [
      '/apis/rbac.authorization.k8s.io/v1/clusterrolebindings',
      {
        apiVersion: 'rbac.authorization.k8s.io/v1',
        kind: 'ClusterRoleBinding',
        metadata: { name: VIEWER_CLUSTER_ROLE },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: VIEWER_CLUSTER_ROLE },
        subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: VIEWER_USER }],
      },
    ],
  ];
  for (const [path, obj] of objects) {
    const r = await kubeRequest(conn, 'POST', path, obj);
    if (r.status !== 201 && r.status !== 409) {
      throw new Error(`creating ${path}: HTTP ${r.status} ${JSON.stringify(r.body)}`);
    }
  }
}

// ---------------------------------------------------------------- attach / shared

export function readInfo(dir: string): ControlPlaneInfo {
  return JSON.parse(readFileSync(join(dir, 'info.json'), 'utf8')) as ControlPlaneInfo;
}

/** True if every process recorded in <dir>/info.json still runs. */
export function infoAlive(info: ControlPlaneInfo): boolean {
  return Object.values(info.pids).every((p) => isOurs(p, info.dir));
}

/** A control plane started elsewhere (e.g. by `cli.js up`), from its info.json; stop() kills it and removes dir. */
export function attachControlPlane(dir: string): ControlPlane {
  const info = readInfo(dir);
  return toControlPlane(info, () => killAndRemove(info.dir, Object.values(info.pids)));
}

/** Stops whatever is recorded in dir (tolerates a missing or partial info.json) and removes dir. */
export async function stopStateDir(dir: string): Promise<void> {
  let pids: number[] = [];
  try {
    pids = Object.values(readInfo(dir).pids);
  } catch {
    /* no info.json: nothing recorded, just remove */
  }
  await killAndRemove(dir, pids);
}

const shared = new Map<string, Promise<ControlPlane>>();

/**
 * The control plane `a` or `b` shared by the tests of this process. If
 * CAS_TEST_CP_A / CAS_TEST_CP_B holds a state dir (from `cli.js up`), attaches
 * to it; otherwise starts one on first use and stops it at process exit.
 * Its stop() is a no-op either way.
 */
export function sharedControlPlane(name: 'a' | 'b'): Promise<ControlPlane> {
  let p = shared.get(name);
  if (!p) {
    const dir = process.env[`CAS_TEST_CP_${name.toUpperCase()}`];
    p = (
      dir ? Promise.resolve().then(() => attachControlPlane(dir)) : startControlPlane(`shared-${name}-${process.pid}`)
    ).then((cp) => ({ ...cp, stop: async () => {} }));
    p.catch(() => shared.delete(name));
    shared.set(name, p);
  }
  return p;
}
