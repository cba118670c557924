import { Inject, Injectable, Logger, OnApplicationBootstrap, OnModuleDestroy } from '@nestjs/common';
import { InjectRepository } from '@nestjs/typeorm';
import { Repository } from 'typeorm';
import { APP_CONFIG, type AppConfig } from '../config/config.js';
import { Leases } from '../database/leases.js';
import { ClusterClientFactory, ClusterUnusableError } from './cluster-client.factory.js';
import type { ClusterConnection } from './cluster-connection.js';
import { ClusterGateway } from './gateway/cluster-gateway.js';
import { classifyFailure, describeFailure } from './gateway/failures.js';
import { type MetricsEndpoint, PROMETHEUS_PATHS } from './gateway/metrics-endpoint.js';
import { ClusterEntity, type ProbeStatus } from './cluster.entity.js';

export interface ProbeResult {
  status: ProbeStatus;
  /** `gitVersion`, when the cluster answered. */
  version?: string;
  error: string | null;
}

/** Background polling runs on the one replica holding this lease. */
export const HEALTH_LEASE = 'cluster-health';
const MAX_BODY = 64 * 1024;
const PARALLEL_PROBES = 8;
/**
 * Keeps each cluster's `version` and `status` current: one probe (`GET /version`, short time-out)
 * after each create or update, and all enabled clusters in the background. Probes never fail the
 * request that caused them, and a slow cluster costs at most the probe time-out.
 */
@Injectable()
export class ClusterHealthService implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly logger = new Logger(ClusterHealthService.name);
  private timer?: NodeJS.Timeout;
  private running?: Promise<void>;
  private stopped = false;

  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    @InjectRepository(ClusterEntity) private readonly clusters: Repository<ClusterEntity>,
    private readonly factory: ClusterClientFactory,
    private readonly gateway: ClusterGateway,
    private readonly leases: Leases,
  ) {}

  onApplicationBootstrap(): void {
    const seconds = this.config.clusters.healthIntervalSeconds;
    if (seconds === 0) return;
    this.timer = setInterval(() => void this.tick(), seconds * 1000).unref();
    void this.tick();
  }

  async onModuleDestroy(): Promise<void> {
    this.stopped = true;
    clearInterval(this.timer);
    await this.running;
    if (this.config.clusters.healthIntervalSeconds > 0) {
      await this.leases.release(HEALTH_LEASE).catch(() => undefined);
    }
  }

  /**
   * One background round, on the replica holding the health lease only: with several replicas each
   * cluster is still probed once per interval. The lease outlives two intervals, so a leader that
   * stops is replaced within that time.
   */
  private tick(): Promise<void> {
    if (this.running || this.stopped) return this.running ?? Promise.resolve();
    const ttlMs = this.config.clusters.healthIntervalSeconds * 2000 + 1000;
    this.running = this.leases
      .acquire(HEALTH_LEASE, ttlMs)
      .then((leader) => (leader ? this.refreshAll() : undefined))
      .catch((error) => this.logger.warn(`cluster health refresh failed: ${(error as Error).message}`))
      .finally(() => (this.running = undefined));
    return this.running;
  }

  /** Probes every enabled cluster, a few at a time, and stores the results. */
  async refreshAll(): Promise<void> {
    const rows = await this.clusters.find({ select: { id: true, enabled: true } });
    this.factory.keepOnly(rows.map((r) => r.id));
    const queue = rows.filter((r) => r.enabled).map((r) => r.id);
    const worker = async () => {
      for (let id = queue.shift(); id !== undefined && !this.stopped; id = queue.shift()) await this.refresh(id);
    };
    await Promise.all(Array.from({ length: Math.min(PARALLEL_PROBES, queue.length) }, worker));
  }

  /**
   * Probes one cluster and stores the result, unless the cluster changed meanwhile (a newer probe
   * will tell). Never throws: a failure is logged and leaves the stored status as it was.
   */
  async refresh(id: number): Promise<void> {
    try {
      const cluster = await this.clusters.findOne({
        where: { id },
        select: { id: true, name: true, enabled: true, generation: true, metricsURL: true },
      });
      if (!cluster || !cluster.enabled) return;
      const probeCluster = async (): Promise<ProbeResult> => {
        try {
          return await this.probe(await this.factory.connect(cluster));
        } catch (error) {
          if (!(error instanceof ClusterUnusableError)) throw error;
          return { status: 'error', error: error.message };
        }
      };
      // Both within the probe time-out, side by side; the metrics result is stored only for the URL probed.
      const [result, metrics] = await Promise.all([
        probeCluster(),
        cluster.metricsURL ? this.probeMetrics({ cluster: cluster.name, url: cluster.metricsURL }) : undefined,
      ]);
      if (metrics) {
        await this.clusters.update(
          { id, metricsURL: cluster.metricsURL },
          { metricsStatus: metrics.status, metricsError: metrics.error?.slice(0, 1024) ?? null },
        );
      }
      await this.clusters.update(
        { id, generation: cluster.generation },
        {
          status: result.status,
          error: result.error?.slice(0, 1024) ?? null,
          checkedAt: new Date(),
          ...(result.version !== undefined ? { version: result.version.slice(0, 128) } : {}),
        },
      );
    } catch (error) {
      if (!this.stopped) this.logger.warn(`health check of cluster ${id} failed: ${(error as Error).message}`);
    }
  }

  /** `GET /version` within the probe time-out, as the service itself; never throws. */
  async probe(connection: ClusterConnection): Promise<ProbeResult> {
    const cluster = this.gateway.asService(connection, this.config.clusters.probeTimeoutMs, 'health');
    try {
      const res = await cluster.send({ method: 'GET', path: '/version' });
      return interpret(res.statusCode, (await cluster.read(res, MAX_BODY)).toString('utf8'));
    } catch (error) {
      // Only a short class is stored: the raw message would hand out connection and TLS details.
      const failure = classifyFailure(error);
      const status = failure === 'timeout' || failure === 'unreachable' ? 'unreachable' : 'error';
      return { status, error: describeFailure(error) };
    }
  }

  /**
   * A metrics endpoint's health: `GET <metricsURL>/api/v1/status/buildinfo` within the probe time-out
   * (what every Prometheus-compatible API answers cheaply). Never throws.
   */
  async probeMetrics(
    endpoint: MetricsEndpoint,
  ): Promise<{ status: 'ok' | 'unreachable' | 'error'; error: string | null }> {
    const metrics = this.gateway.metricsClient(endpoint, this.config.clusters.probeTimeoutMs);
    try {
      const res = await metrics.get(PROMETHEUS_PATHS.buildInfo, new URLSearchParams());
      const body = await metrics.read(res, MAX_BODY).catch(() => Buffer.alloc(0));
      if (res.statusCode !== 200) {
        return { status: 'error', error: `GET /api/v1/status/buildinfo answered HTTP ${res.statusCode}` };
      }
      try {
        if ((JSON.parse(body.toString('utf8')) as { status?: unknown }).status === 'success') {
          return { status: 'ok', error: null };
        }
      } catch {
        /* reported below */
      }
      return { status: 'error', error: 'the metrics endpoint did not answer like a Prometheus HTTP API' };
    } catch (error) {
      const failure = classifyFailure(error);
      const status = failure === 'timeout' || failure === 'unreachable' ? 'unreachable' : 'error';
      return { status, error: describeFailure(error) };
    }
  }
}

function interpret(statusCode: number, body: string): ProbeResult {
  // The status text is the server's own words: only the code is kept.
  if (statusCode === 401 || statusCode === 403) {
    return { status: 'error', error: `the cluster refused the credentials (HTTP ${statusCode})` };
  }
  if (statusCode !== 200) return { status: 'error', error: `GET /version answered HTTP ${statusCode}` };
  try {
    const version = (JSON.parse(body) as { gitVersion?: unknown }).gitVersion;
    if (typeof version === 'string' && version !== '') return { status: 'ok', version, error: null };
  } catch {
    /* reported below */
  }
  return { status: 'error', error: 'GET /version answered without a gitVersion: is this a Kubernetes API server?' };
}
