import { spawn, type ChildProcess } from 'node:child_process';
import { waitFor } from '../harness/control-plane.js';
import { closedPort } from './kubeconfigs.js';
import { assertContract, exchangeOf, parseJson } from './openapi-validator.js';

export interface ServiceProcess {
  child: ChildProcess;
  base: string;
  /** Resolves with the exit code once the process has exited. */
  exited: Promise<number | null>;
  /** What the process wrote to standard output so far (with `captureStdout`; else it goes to the test's). */
  stdout(): string;
  /** fetch() against the service with optional bearer token, cluster header and JSON body. */
  api(
    method: string,
    path: string,
    options?: { token?: string; body?: unknown; cluster?: string },
  ): Promise<{ status: number; body: any }>;
}

/**
 * Runs the built service (`build/src/main.js`) as a real process on a free loopback port and waits until
 * it is ready. `env` is added to the test process's environment. Every answer is checked against the
 * committed OpenAPI document.
 */
export async function startServiceProcess(
  env: Record<string, string>,
  port?: number,
  options: { captureStdout?: boolean; nodeArgs?: string[]; readyTimeoutMs?: number } = {},
): Promise<ServiceProcess> {
  const listenPort = port ?? (await closedPort());
  const base = `http://127.0.0.1:${listenPort}`;
  const child = spawn(process.execPath, [...(options.nodeArgs ?? []), 'build/src/main.js'], {
    env: { ...process.env, PORT: String(listenPort), HOST: '127.0.0.1', LOG_LEVEL: 'warn', ...env },
    stdio: ['ignore', options.captureStdout ? 'pipe' : 'inherit', 'inherit'],
  });
  let stdout = '';
  child.stdout?.on('data', (chunk: Buffer) => (stdout += chunk.toString('utf8')));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const api: ServiceProcess['api'] = async (method, path, options = {}) => {
    const res = await fetch(base + path, {
      method,
      headers: {
        ...(options.token ? { authorization: `Bearer ${options.token}` } : {}),
        ...(options.cluster ? { 'x-cluster-name': options.cluster } : {}),
        ...(options.body ? { 'content-type': 'application/json' } : {}),
      },
      body: options.body ? JSON.stringify(options.body) : undefined,
    });
    const text = await res.text();
    assertContract(exchangeOf(method, base + path, res, text));
    return { status: res.status, body: parseJson(text) };
  };
  await waitFor(
    'the service to listen',
    async () => {
      if (child.exitCode !== null) throw new Error(`the service exited with ${child.exitCode} before it was ready`);
      return (await fetch(`${base}/readyz`).catch(() => undefined))?.ok;
    },
    // A start takes ~2 s on a quiet machine; 30 s was exceeded under CI's parallel load (seen: 53 s at load 22).
    options.readyTimeoutMs ?? 90_000,
    200,
  );
  return { child, base, exited, api, stdout: () => stdout };
}
