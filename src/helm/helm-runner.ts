import {
  ForbiddenException,
  GatewayTimeoutException,
  HttpException,
  HttpStatus,
  Inject,
  Injectable,
  Logger,
  ServiceUnavailableException,
} from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer, request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import type { AddressInfo, Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { stringify } from 'yaml';
import { ApiKeysService } from '../auth/api-keys.service.js';
import type { Caller } from '../access/caller.js';
import { APP_CONFIG, type AppConfig } from '../config/config.js';

/** What a Helm process answered. */
export interface HelmResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** One Helm operation to run: its arguments (validated by the caller of `run`), its files, its cluster. */
export interface HelmJob {
  cluster: string;
  /** Arguments after `helm`; `--kubeconfig` is added. */
  args: string[];
  /** Files written into the operation's own folder first (name → content); `{dir}` in an argument names it. */
  files?: Record<string, string | Buffer>;
}

const MAX_STDOUT = 64 * 1024 * 1024;
const MAX_STDERR = 64 * 1024;
/** The credential outlives the time-out by this much, so that it never expires under a slow last call. */
const CREDENTIAL_SLACK_SECONDS = 60;
export const DIR_MARK = '{dir}';

class TooMany extends HttpException {
  constructor(message: string) {
    super(message, HttpStatus.TOO_MANY_REQUESTS);
  }
}

/**
 * Runs the real Helm CLI for a caller: no shell, its own folder as HOME (and Helm's cache, config and data homes),
 * an environment of its own (PATH only), and a kubeconfig that points at this replica's own Kubernetes API path
 * (`/api/v1/clusters/<name>/k8s`, through a relay of this operation: see `relay`) with an API key of the caller
 * made for this one operation (its roles, expiring with the time-out, deleted afterwards). So every object Helm reads or writes is authorized by the caller's rules,
 * impersonated on impersonating clusters and audited as the person. Bounded: CAS_HELM_MAX_PROCESSES at once per
 * replica and CAS_HELM_MAX_PROCESSES_PER_USER per user (429 beyond), CAS_HELM_TIMEOUT_SECONDS each (killed: 504).
 */
@Injectable()
export class HelmRunner {
  private readonly logger = new Logger(HelmRunner.name);
  private running = 0;
  private readonly perUser = new Map<string, number>();
  private version?: Promise<string | null>;

  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly apiKeys: ApiKeysService,
    private readonly adapterHost: HttpAdapterHost,
  ) {}

  /** 503 naming CAS_HELM_BINARY unless the binary runs (asked once: `helm version --short`). */
  async requireBinary(): Promise<void> {
    this.version ??= this.exec(['version', '--short'], tmpdir(), {}, 10_000).then(
      (r) => (r.code === 0 ? r.stdout.trim() : null),
      () => null,
    );
    const version = await this.version;
    if (version === null) {
      this.version = undefined; // installed later: asked again next time
      throw new ServiceUnavailableException(
        `Helm is not available: CAS_HELM_BINARY ('${this.config.helm.binary}') cannot be run; the read routes work without it`,
      );
    }
  }

  /** Takes a slot for the caller (429 when there is none), runs the job, and gives the slot back. */
  async run(caller: Caller, job: HelmJob): Promise<HelmResult> {
    await this.requireBinary();
    const user = String(caller.userId ?? caller.name);
    const { maxProcesses, maxProcessesPerUser, timeoutSeconds } = this.config.helm;
    if ((this.perUser.get(user) ?? 0) >= maxProcessesPerUser) {
      throw new TooMany(
        `you already run ${maxProcessesPerUser} Helm operations (CAS_HELM_MAX_PROCESSES_PER_USER); try again when one ends`,
      );
    }
    if (this.running >= maxProcesses) {
      throw new TooMany(
        `this replica already runs ${maxProcesses} Helm operations (CAS_HELM_MAX_PROCESSES); try again`,
      );
    }
    this.running++;
    this.perUser.set(user, (this.perUser.get(user) ?? 0) + 1);
    let keyId: number | undefined;
    let relay: { close: () => Promise<void> } | undefined;
    const dir = await mkdtemp(join(tmpdir(), 'cas-helm-op-'));
    try {
      if (caller.userId === null) throw new ForbiddenException('a Helm operation needs a user to act as');
      const expiresAt = new Date(Date.now() + (timeoutSeconds + CREDENTIAL_SLACK_SECONDS) * 1000);
      const key = await this.apiKeys.createApiKey(
        {
          name: `helm ${caller.name.slice(0, 50)} ${expiresAt.toISOString()} ${randomBytes(3).toString('hex')}`,
          roles: caller.roles,
          expiresAt: expiresAt.toISOString(),
        },
        caller,
      );
      keyId = key.id;
      const opened = await this.relay(job.cluster, key.key);
      relay = opened;
      await writeFile(join(dir, 'kubeconfig'), opened.kubeconfig, { mode: 0o600 });
      for (const [name, content] of Object.entries(job.files ?? {})) {
        await mkdir(dirname(join(dir, name)), { recursive: true });
        await writeFile(join(dir, name), content, { mode: 0o600 });
      }
      const args = job.args.map((arg) => arg.split(DIR_MARK).join(dir));
      return await this.exec(
        [...args, '--kubeconfig', join(dir, 'kubeconfig')],
        dir,
        {
          HELM_CACHE_HOME: join(dir, 'cache'),
          HELM_CONFIG_HOME: join(dir, 'config'),
          HELM_DATA_HOME: join(dir, 'data'),
        },
        timeoutSeconds * 1000,
      );
    } finally {
      await relay?.close();
      this.running--;
      const left = (this.perUser.get(user) ?? 1) - 1;
      if (left > 0) this.perUser.set(user, left);
      else this.perUser.delete(user);
      if (keyId !== undefined) {
        await this.apiKeys.deleteApiKey(keyId).catch((error: unknown) => {
          this.logger.warn(`could not delete the Helm operation's API key ${keyId}: ${String(error)}`);
        });
      }
      await rm(dir, { recursive: true, force: true });
    }
  }

  /** Helm processes running now. */
  get size(): number {
    return this.running;
  }

  /** This replica's own listener, as a child on this machine reaches it. */
  private ownAddress(): { host: string; port: number } {
    const address = this.adapterHost.httpAdapter?.getHttpServer()?.address() as AddressInfo | string | null;
    if (!address || typeof address === 'string') {
      throw new ServiceUnavailableException('Helm needs the service to listen on a TCP port to reach it');
    }
    const wildcard = address.address === '0.0.0.0' || address.address === '::';
    return { host: wildcard ? '127.0.0.1' : address.address, port: address.port };
  }

  /**
   * A relay on loopback, for this one operation, between Helm and this replica's Kubernetes API path: client-go
   * sends a kubeconfig's credentials only over TLS, and the service's own certificate (if it serves TLS at all)
   * is not for a loopback address. So Helm talks plain HTTP to the relay, under a path of 32 random bytes that
   * only its kubeconfig holds, and the relay adds the caller's key and passes each request on. Anything else is
   * a 404.
   */
  private async relay(cluster: string, token: string): Promise<{ kubeconfig: string; close: () => Promise<void> }> {
    const target = this.ownAddress();
    const secret = `/${randomBytes(32).toString('hex')}`;
    const tls = this.config.tls !== undefined;
    const sockets = new Set<Socket>();
    const server = createServer((req, res) => {
      const url = req.url ?? '';
      if (!url.startsWith(`${secret}/`)) {
        res.writeHead(404).end();
        return;
      }
      const headers = { ...req.headers, authorization: `Bearer ${token}`, host: `${target.host}:${target.port}` };
      const options = {
        host: target.host,
        port: target.port,
        method: req.method,
        path: url.slice(secret.length),
        headers,
      };
      // Our own listener on this machine: its certificate names the public host, not this address.
      const upstream = tls ? httpsRequest({ ...options, rejectUnauthorized: false }) : httpRequest(options);
      upstream.on('response', (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      });
      upstream.on('error', () => res.destroy());
      res.on('close', () => upstream.destroy());
      req.pipe(upstream);
    });
    server.on('connection', (socket) => {
      sockets.add(socket);
      socket.on('close', () => sockets.delete(socket));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    const kubeconfig = stringify({
      apiVersion: 'v1',
      kind: 'Config',
      clusters: [
        {
          name: 'cas',
          cluster: { server: `http://127.0.0.1:${port}${secret}/api/v1/clusters/${encodeURIComponent(cluster)}/k8s` },
        },
      ],
      users: [{ name: 'caller', user: {} }],
      contexts: [{ name: 'cas', context: { cluster: 'cas', user: 'caller' } }],
      'current-context': 'cas',
    });
    const close = () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      });
    return { kubeconfig, close };
  }

  /** Runs the binary without a shell: its output bounded, killed after `timeoutMs` (504). */
  private exec(args: string[], home: string, env: Record<string, string>, timeoutMs: number): Promise<HelmResult> {
    return new Promise((resolve, reject) => {
      const child = spawn(this.config.helm.binary, args, {
        cwd: home,
        env: { PATH: process.env.PATH ?? '/usr/local/bin:/usr/bin:/bin', HOME: home, ...env },
        stdio: ['ignore', 'pipe', 'pipe'],
        shell: false,
      });
      const out: Buffer[] = [];
      const err: Buffer[] = [];
      let outBytes = 0;
      let errBytes = 0;
      let timedOut = false;
      let tooMuch = false;
      const timer = setTimeout(() => {
        timedOut = true;
        child.kill('SIGKILL');
      }, timeoutMs);
      child.stdout.on('data', (chunk: Buffer) => {
        outBytes += chunk.length;
        if (outBytes > MAX_STDOUT) {
          tooMuch = true;
          child.kill('SIGKILL');
        } else out.push(chunk);
      });
      child.stderr.on('data', (chunk: Buffer) => {
        if (errBytes < MAX_STDERR) err.push(chunk.subarray(0, MAX_STDERR - errBytes));
        errBytes += chunk.length;
      });
      child.once('error', (error) => {
        clearTimeout(timer);
        reject(error);
      });
      child.once('close', (code) => {
        clearTimeout(timer);
        if (timedOut) {
          return reject(
            new GatewayTimeoutException(
              `Helm did not finish within ${Math.round(timeoutMs / 1000)} s (CAS_HELM_TIMEOUT_SECONDS); its process was stopped`,
            ),
          );
        }
        if (tooMuch) return reject(new HttpException('Helm answered more than 64 MiB', HttpStatus.BAD_GATEWAY));
        resolve({
          code: code ?? -1,
          stdout: Buffer.concat(out).toString('utf8'),
          stderr: Buffer.concat(err).toString('utf8'),
        });
      });
    });
  }
}
