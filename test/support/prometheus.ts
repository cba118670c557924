// A real Prometheus for tests (Debian's `prometheus` package; scripts/test.sh installs it):
//
//   const prom = await startPrometheus({ targets: [apiserverTarget(cp)], recorded: recordedUsage(now) });
//   prom.url                      // http://127.0.0.1:<port>
//   await prom.stop();            // kills it, removes its dir
//
// It listens on a free loopback port with a config and data dir of its own. `recorded` is an
// OpenMetrics text loaded with `promtool tsdb create-blocks-from openmetrics` into the data dir
// before start: series no test cluster has (cAdvisor's container_* usage), answered by real PromQL.
import { spawn, execFile, type ChildProcess } from 'node:child_process';
import { closeSync, openSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import http from 'node:http';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { ControlPlane } from '../harness/control-plane.js';

const PROMETHEUS_BIN = process.env.PROMETHEUS_BIN || 'prometheus';
const PROMTOOL_BIN = process.env.PROMTOOL_BIN || 'promtool';
const READY_TIMEOUT_MS = 30_000;

export interface ScrapeTarget {
  job: string;
  /** host:port */
  address: string;
  scheme: 'http' | 'https';
  path?: string;
  bearerToken?: string;
  /** CA PEM for https targets. */
  caData?: string;
}

export interface PrometheusInstance {
  /** http://127.0.0.1:<port> */
  url: string;
  port: number;
  dir: string;
  /** Kills the process (SIGKILL: like a crash) and removes its dir. */
  stop(): Promise<void>;
}

/** The control plane's API server `/metrics`, scraped with its admin token and its CA. */
export function apiserverTarget(cp: ControlPlane): ScrapeTarget {
  return {
    job: 'apiserver',
    address: new URL(cp.server).host,
    scheme: 'https',
    bearerToken: cp.adminToken,
    caData: cp.caData,
  };
}

/** A free loopback port (closed again: the caller binds it). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

export function httpGet(url: string, headers: Record<string, string> = {}): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.get(url, { headers, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', reject);
    });
    req.setTimeout(5000, () => req.destroy(new Error(`GET ${url} timed out`)));
    req.on('error', reject);
  });
}

const live = new Set<ChildProcess>();
process.once('exit', () => {
  for (const child of live) {
    try {
      process.kill(-child.pid!, 'SIGKILL');
    } catch {
      /* gone */
    }
  }
});

export async function startPrometheus(
  options: { targets?: ScrapeTarget[]; recorded?: string; scrapeIntervalSeconds?: number; adminApi?: boolean } = {},
): Promise<PrometheusInstance> {
  const dir = await mkdtemp(join(tmpdir(), 'cas-prometheus-'));
  const data = join(dir, 'data');
  const interval = `${options.scrapeIntervalSeconds ?? 1}s`;
  const scrapeConfigs = [];
  for (const [i, target] of (options.targets ?? []).entries()) {
    const config: Record<string, unknown> = {
      job_name: target.job,
      scheme: target.scheme,
      metrics_path: target.path ?? '/metrics',
      static_configs: [{ targets: [target.address] }],
    };
    if (target.bearerToken) {
      const file = join(dir, `token-${i}`);
      await writeFile(file, target.bearerToken, { mode: 0o600 });
      config.authorization = { type: 'Bearer', credentials_file: file };
    }
    if (target.caData) {
      const file = join(dir, `ca-${i}.pem`);
      await writeFile(file, target.caData);
      config.tls_config = { ca_file: file };
    }
    scrapeConfigs.push(config);
  }
  // JSON is YAML: no serializer needed.
  const configFile = join(dir, 'prometheus.yml');
  await writeFile(
    configFile,
    JSON.stringify({
      global: { scrape_interval: interval, scrape_timeout: interval, evaluation_interval: interval },
      scrape_configs: scrapeConfigs,
    }),
  );
  if (options.recorded) {
    const file = join(dir, 'recorded.om');
    await writeFile(file, options.recorded);
    await promisify(execFile)(PROMTOOL_BIN, ['tsdb', 'create-blocks-from', 'openmetrics', file, data]).catch(
      (error: Error & { stderr?: string }) => {
        throw new Error(`promtool could not load the recorded series: ${error.stderr || error.message}`);
      },
    );
  }

  let lastError: unknown;
  for (let attempt = 0; attempt < 3; attempt++) {
    const port = await freePort();
    const logFd = openSync(join(dir, 'prometheus.log'), 'a');
    const args = [
      `--config.file=${configFile}`,
      `--storage.tsdb.path=${data}`,
      `--web.listen-address=127.0.0.1:${port}`,
      '--storage.tsdb.retention.time=30d',
      '--log.level=warn',
      ...(options.adminApi ? ['--web.enable-admin-api'] : []),
    ];
    let child: ChildProcess;
    try {
      child = spawn(PROMETHEUS_BIN, args, { detached: true, stdio: ['ignore', logFd, logFd] });
    } finally {
      closeSync(logFd);
    }
    live.add(child);
    let exited = false;
    child.once('exit', () => {
      exited = true;
      live.delete(child);
    });
    child.once('error', (error) => {
      lastError = error;
      exited = true;
    });
    const url = `http://127.0.0.1:${port}`;
    const deadline = Date.now() + READY_TIMEOUT_MS;
    while (!exited && Date.now() < deadline) {
      const ready = await httpGet(`${url}/-/ready`).catch(() => undefined);
      if (ready?.status === 200) {
        const stop = async () => {
          if (!exited) {
            const gone = new Promise((resolve) => child.once('exit', resolve));
            try {
              process.kill(-child.pid!, 'SIGKILL');
            } catch {
              /* gone */
            }
            await gone;
          }
          await rm(dir, { recursive: true, force: true });
        };
        return { url, port, dir, stop };
      }
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    if (!exited) process.kill(-child.pid!, 'SIGKILL');
    lastError ??= new Error(`prometheus did not become ready on port ${port}; see ${join(dir, 'prometheus.log')}`);
  }
  throw lastError instanceof Error ? lastError : new Error(String(lastError));
}

export interface RecordedPod {
  namespace: string;
  pod: string;
  node: string;
  containers: Array<{ name: string; cores: number; bytes: number }>;
}

export interface RecordedNode {
  node: string;
  cores: number;
  bytes: number;
}

/**
 * cAdvisor-like series in OpenMetrics, one sample every 15 s from `seconds` before `end` until `end`
 * (Unix seconds): CPU counters growing at a constant number of cores, constant working sets. Pods
 * also get the pod-level cgroup (`container=""`) and the pause container (`POD`), which the
 * usage routes must leave out.
 */
export function recordedUsage(options: { end: number; seconds: number; pods: RecordedPod[]; nodes: RecordedNode[] }) {
  const { end, seconds } = options;
  const step = 15;
  const start = end - seconds;
  const series: Array<{ labels: string; cores: number; bytes: number }> = [];
  const labels = (values: Record<string, string>) =>
    Object.entries(values)
      .map(([k, v]) => `${k}=${JSON.stringify(v)}`)
      .join(',');
  for (const pod of options.pods) {
    const total = pod.containers.reduce((sum, c) => ({ cores: sum.cores + c.cores, bytes: sum.bytes + c.bytes }), {
      cores: 0,
      bytes: 0,
    });
    const containers = [...pod.containers, { name: '', ...total }, { name: 'POD', cores: 0.001, bytes: 1 << 20 }];
    for (const c of containers) {
      series.push({
        labels: labels({
          namespace: pod.namespace,
          pod: pod.pod,
          container: c.name,
          node: pod.node,
          id: `/kubepods/${pod.pod}/${c.name}`,
        }),
        cores: c.cores,
        bytes: c.bytes,
      });
    }
  }
  for (const node of options.nodes) series.push({ labels: labels({ node: node.node, id: '/' }), ...node });
  const lines: string[] = ['# TYPE container_cpu_usage_seconds counter'];
  for (const s of series) {
    for (let t = start; t <= end; t += step) {
      lines.push(`container_cpu_usage_seconds_total{${s.labels}} ${(s.cores * (t - start)).toFixed(6)} ${t}`);
    }
  }
  lines.push('# TYPE container_memory_working_set_bytes gauge');
  for (const s of series) {
    for (let t = start; t <= end; t += step)
      lines.push(`container_memory_working_set_bytes{${s.labels}} ${s.bytes} ${t}`);
  }
  lines.push('# EOF', '');
  return lines.join('\n');
}
