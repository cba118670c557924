// npm run test:cluster -- up <name> [--port N]
//                                        start a control plane that outlives this command, its
//                                        apiserver on 127.0.0.1:N (default: a free port);
//                                        the kubeconfig path is the last line printed
// npm run test:cluster -- down <name>   stop it and remove its state
// npm run test:cluster -- down --all    stop every control plane started with `up`
// npm run test:cluster -- list          name, state, server, state dir of each
// npm run test:cluster -- build         only make sure the binaries exist (builds them once)
//
// State lives in ~/.cache/cluster-admin-service/clusters/<name>/ (see CAS_CACHE_DIR);
// export CAS_TEST_CP_A=<that dir> to make sharedControlPlane('a') use it.
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { binariesPresent, cacheRoot, ensureBinaries } from './binaries.js';
import { infoAlive, portOpen, readInfo, startControlPlane, stopStateDir } from './control-plane.js';

const err = (line: string) => process.stderr.write(line + '\n');

export function clustersDir(): string {
  return join(cacheRoot(), 'clusters');
}

function usage(): never {
  err('usage: cli.js up <name> [--port <1-65535>] | down <name> | down --all | list | build');
  process.exit(2);
}

function checkName(name: string | undefined): string {
  if (!name || !/^[a-zA-Z0-9][a-zA-Z0-9._-]*$/.test(name)) usage();
  return name;
}

/** `--port N` after the name: the apiserver's port. */
function portOption(args: string[]): number | undefined {
  if (args.length === 0) return undefined;
  const [flag, value, ...rest] = args;
  if (flag !== '--port' || value === undefined || rest.length > 0 || !/^\d{1,5}$/.test(value)) usage();
  const port = Number(value);
  if (port < 1 || port > 65535) usage();
  return port;
}

async function up(name: string, port: number | undefined): Promise<void> {
  const dir = join(clustersDir(), name);
  if (existsSync(join(dir, 'info.json'))) {
    const info = readInfo(dir);
    if (infoAlive(info)) {
      if (port !== undefined && info.ports.apiserver !== port) {
        throw new Error(`control plane ${name} is already running at ${info.server}: take it down first`);
      }
      err(`control plane ${name} is already running at ${info.server}`);
      process.stdout.write(info.kubeconfigPath + '\n');
      return;
    }
    err(`control plane ${name}: stale state in ${dir}, restarting`);
  }
  if (existsSync(dir)) await stopStateDir(dir);
  // Said at once, not after building the binaries and starting etcd.
  if (port !== undefined && (await portOpen(port))) {
    throw new Error(`port ${port} is already in use: choose another --port`);
  }
  if (!binariesPresent()) await ensureBinaries();
  const cp = await startControlPlane(name, { stateDir: dir, keepAfterExit: true, log: err, apiserverPort: port });
  err(`server:     ${cp.server}`);
  err(`state dir:  ${cp.dir}   (export CAS_TEST_CP_A=${cp.dir} to use it as shared control plane 'a')`);
  err(`audit log:  ${cp.auditLogPath}`);
  err(`contexts:   admin (client cert, current), admin-token, viewer (read-only)`);
  process.stdout.write(cp.kubeconfigPath + '\n');
}

async function down(name: string): Promise<void> {
  const dir = join(clustersDir(), name);
  if (!existsSync(dir)) {
    err(`control plane ${name} is not running`);
    return;
  }
  await stopStateDir(dir);
  err(`control plane ${name} stopped`);
}

function names(): string[] {
  if (!existsSync(clustersDir())) return [];
  return readdirSync(clustersDir(), { withFileTypes: true })
    .filter((d) => d.isDirectory())
    .map((d) => d.name)
    .sort();
}

async function main(argv: string[]): Promise<void> {
  const [cmd, arg, ...rest] = argv;
  switch (cmd) {
    case 'up':
      return up(checkName(arg), portOption(rest));
    case 'down':
      if (arg === '--all') {
        for (const n of names()) await down(n);
        return;
      }
      return down(checkName(arg));
    case 'list':
      for (const n of names()) {
        const dir = join(clustersDir(), n);
        try {
          const info = readInfo(dir);
          process.stdout.write(`${n}\t${infoAlive(info) ? 'running' : 'dead'}\t${info.server}\t${dir}\n`);
        } catch {
          process.stdout.write(`${n}\tincomplete\t-\t${dir}\n`);
        }
      }
      return;
    case 'build': {
      const b = await ensureBinaries();
      err(`kube-apiserver: ${b.apiserver}\nkube-controller-manager: ${b.controllerManager}\netcd: ${b.etcd}`);
      return;
    }
    default:
      usage();
  }
}

main(process.argv.slice(2)).then(
  () => process.exit(0),
  (e: unknown) => {
    err(`error: ${e instanceof Error ? e.message : String(e)}`);
    process.exit(1);
  },
);
