// Where the control plane's binaries are, and building them when missing.
//
// kube-apiserver and kube-controller-manager v1.20.2 are built from Debian's
// source package by scripts/kube/ensure-binaries.sh and cached outside the
// repository; etcd is Debian's etcd-server. KUBE_APISERVER_BIN,
// KUBE_CONTROLLER_MANAGER_BIN and ETCD_BIN point at binaries a user already has.
import { spawn } from 'node:child_process';
import { accessSync, constants, existsSync } from 'node:fs';
import { homedir } from 'node:os';
import { delimiter, dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export const KUBE_VERSION = 'v1.20.2';

export interface Binaries {
  apiserver: string;
  controllerManager: string;
  etcd: string;
}

/** Root of the harness' cache: binaries in kube-v1.20.2/bin, CLI clusters in clusters/. */
export function cacheRoot(): string {
  if (process.env.CAS_CACHE_DIR) return resolve(process.env.CAS_CACHE_DIR);
  const xdg = process.env.XDG_CACHE_HOME || join(homedir(), '.cache');
  return join(xdg, 'cluster-admin-service');
}

export function kubeBinDir(): string {
  return join(cacheRoot(), `kube-${KUBE_VERSION}`, 'bin');
}

function isExecutable(p: string): boolean {
  try {
    accessSync(p, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

function onPath(cmd: string): string | undefined {
  for (const d of (process.env.PATH ?? '').split(delimiter)) {
    if (d && isExecutable(join(d, cmd))) return join(d, cmd);
  }
  return undefined;
}

/** The paths the harness will use (they may not exist yet). */
export function binaryPaths(): Binaries {
  return {
    apiserver: process.env.KUBE_APISERVER_BIN || join(kubeBinDir(), 'kube-apiserver'),
    controllerManager: process.env.KUBE_CONTROLLER_MANAGER_BIN || join(kubeBinDir(), 'kube-controller-manager'),
    etcd: process.env.ETCD_BIN || onPath('etcd') || '/usr/bin/etcd',
  };
}

export function binariesPresent(b: Binaries = binaryPaths()): boolean {
  return (
    isExecutable(b.apiserver) &&
    isExecutable(b.controllerManager) &&
    isExecutable(b.etcd) &&
    onPath('openssl') !== undefined
  );
}

/** The repository root, found from this file (works from test/harness and build/test/harness). */
export function repoRoot(): string {
  let d = dirname(fileURLToPath(import.meta.url));
  for (;;) {
    if (existsSync(join(d, 'scripts', 'kube', 'ensure-binaries.sh'))) return d;
    const up = dirname(d);
    if (up === d)
      throw new Error('cannot find scripts/kube/ensure-binaries.sh above ' + fileURLToPath(import.meta.url));
    d = up;
  }
}

let ensuring: Promise<Binaries> | undefined;

/**
 * Returns the binaries, running scripts/kube/ensure-binaries.sh first when any
 * is missing (installs Debian packages and builds; ~6-7 min the first time).
 * Its progress goes to this process' stderr.
 */
export function ensureBinaries(): Promise<Binaries> {
  const b = binaryPaths();
  if (binariesPresent(b)) return Promise.resolve(b);
  ensuring ??= new Promise<Binaries>((resolvePromise, reject) => {
    const script = join(repoRoot(), 'scripts', 'kube', 'ensure-binaries.sh');
    process.stderr.write(
      `[harness] kube binaries missing; running ${script} (first run builds kube ${KUBE_VERSION}, ~6-7 min)\n`,
    );
    const child = spawn('bash', [script], { stdio: ['ignore', 2, 2] });
    child.on('error', reject);
    child.on('exit', (code, signal) => {
      const after = binaryPaths();
      if (code === 0 && binariesPresent(after)) resolvePromise(after);
      else reject(new Error(`${script} failed (exit ${code ?? signal}); see its output above`));
    });
  }).finally(() => {
    ensuring = undefined;
  });
  return ensuring;
}
