import { BadGatewayException, BadRequestException, Inject, Injectable, NotFoundException } from '@nestjs/common';
import { InjectRepository } from '@nestjs/typeorm';
import { Repository } from 'typeorm';
import { Authorizer, type AccessRequest } from '../access/authorizer.js';
import type { Caller } from '../access/caller.js';
import { ClusterEntity } from '../clusters/cluster.entity.js';
import { clusterNameOf, requireUsable } from '../clusters/cluster-name.js';
import type { ClusterResponse } from '../clusters/gateway/answer.js';
import { ClusterGateway } from '../clusters/gateway/cluster-gateway.js';
import {
  type MetricsEndpointClient,
  PROMETHEUS_PATHS,
  type PrometheusPath,
} from '../clusters/gateway/metrics-endpoint.js';
import { APP_CONFIG, type AppConfig } from '../config/config.js';
import { validateName, validateNamespace, ALL_NAMESPACES } from '../k8s/resource-path.js';
import type {
  MetricsInstantQueryDto,
  MetricsMatchQueryDto,
  MetricsRangeQueryDto,
  MetricsSeriesQueryDto,
  UsageQueryDto,
} from './dto/metrics-query.dto.js';
import type { ContainerSeriesDto, NodeUsageDto, PodUsageDto } from './dto/usage.dto.js';
import {
  checkQuery,
  checkRange,
  LABEL_NAME,
  nodeUsageQueries,
  parseTime,
  podUsageQueries,
  USAGE_RANGES,
  type UsageRange,
} from './promql.js';

/** Largest answer the usage routes read whole (a pod's containers over 24 h are a few KiB). */
const MAX_USAGE_BODY = 8 * 1024 * 1024;

type Point = [number, number | null];
interface MatrixAnswer {
  status?: string;
  error?: string;
  data?: { resultType?: string; result?: Array<{ metric?: Record<string, string>; values?: Array<[number, string]> }> };
}

function toPoints(values: Array<[number, string]> | undefined): Point[] {
  return (values ?? []).map(([t, v]) => {
    const n = Number(v);
    return [t, Number.isFinite(n) ? n : null];
  });
}

function params(values: Record<string, string | number | string[] | undefined>): URLSearchParams {
  const result = new URLSearchParams();
  for (const [key, value] of Object.entries(values)) {
    if (value === undefined) continue;
    for (const v of Array.isArray(value) ? value : [value]) result.append(key, String(v));
  }
  return result;
}

/**
 * Queries each cluster's Prometheus through its `metricsURL`. Raw PromQL can read any namespace's
 * series, so it needs `get` on the pseudo-resource `metrics`; the usage routes run PromQL the
 * service writes and are authorized like reading that pod or node.
 */
@Injectable()
export class MetricsService {
  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    @InjectRepository(ClusterEntity) private readonly clusters: Repository<ClusterEntity>,
    private readonly authorizer: Authorizer,
    private readonly gateway: ClusterGateway,
  ) {}

  queryMetrics(caller: Caller, cluster: unknown, dto: MetricsInstantQueryDto): Promise<ClusterResponse> {
    return this.raw(caller, cluster, () => {
      checkQuery(dto.query);
      const time = dto.time === undefined ? undefined : parseTime('time', dto.time);
      return [PROMETHEUS_PATHS.query, params({ query: dto.query, time })];
    });
  }

  queryMetricsRange(caller: Caller, cluster: unknown, dto: MetricsRangeQueryDto): Promise<ClusterResponse> {
    return this.raw(caller, cluster, () => {
      checkQuery(dto.query);
      const range = checkRange(dto.start, dto.end, dto.step);
      return [PROMETHEUS_PATHS.queryRange, params({ query: dto.query, ...range })];
    });
  }

  listMetricSeries(caller: Caller, cluster: unknown, dto: MetricsSeriesQueryDto): Promise<ClusterResponse> {
    return this.raw(caller, cluster, () => [PROMETHEUS_PATHS.series, this.matchParams(dto)]);
  }

  listMetricLabels(caller: Caller, cluster: unknown, dto: MetricsMatchQueryDto): Promise<ClusterResponse> {
    return this.raw(caller, cluster, () => [PROMETHEUS_PATHS.labels, this.matchParams(dto)]);
  }

  listMetricLabelValues(
    caller: Caller,
    cluster: unknown,
    label: string,
    dto: MetricsMatchQueryDto,
  ): Promise<ClusterResponse> {
    return this.raw(caller, cluster, () => {
      if (!LABEL_NAME.test(label)) {
        throw new BadRequestException([
          'label must be a Prometheus label name: a letter or _, then letters, digits or _ (at most 128)',
        ]);
      }
      return [`/api/v1/label/${label}/values`, this.matchParams(dto)];
    });
  }

  async getPodMetrics(
    caller: Caller,
    cluster: unknown,
    namespace: string,
    pod: string,
    dto: UsageQueryDto,
  ): Promise<PodUsageDto> {
    if (namespace === ALL_NAMESPACES) throw new BadRequestException(['namespace must name one namespace']);
    validateNamespace(namespace);
    validateName(pod);
    const name = clusterNameOf(cluster);
    this.authorizer.require(caller, { verb: 'get', cluster: name, resource: 'pods', namespace });
    const endpoint = await this.endpoint(name);
    const window = this.window(dto.range);
    const queries = podUsageQueries(namespace, pod, window.step);
    const [cpu, memory] = await Promise.all([
      this.matrix(endpoint, queries.cpu, window),
      this.matrix(endpoint, queries.memory, window),
    ]);
    const byContainer = (answer: MatrixAnswer): ContainerSeriesDto[] =>
      (answer.data?.result ?? [])
        .map((series) => ({ container: series.metric?.container ?? '', values: toPoints(series.values) }))
        .sort((a, b) => a.container.localeCompare(b.container));
    return { cluster: name, namespace, pod, ...window, cpu: byContainer(cpu), memory: byContainer(memory) };
  }

  async getNodeMetrics(caller: Caller, cluster: unknown, node: string, dto: UsageQueryDto): Promise<NodeUsageDto> {
    validateName(node);
    const name = clusterNameOf(cluster);
    this.authorizer.require(caller, { verb: 'get', cluster: name, resource: 'nodes', namespace: null });
    const endpoint = await this.endpoint(name);
    const window = this.window(dto.range);
    const queries = nodeUsageQueries(node, window.step);
    const [cpu, memory] = await Promise.all([
      this.matrix(endpoint, queries.cpu, window),
      this.matrix(endpoint, queries.memory, window),
    ]);
    const single = (answer: MatrixAnswer): Point[] => toPoints(answer.data?.result?.[0]?.values);
    return { cluster: name, node, ...window, cpu: single(cpu), memory: single(memory) };
  }

  private matchParams(dto: MetricsMatchQueryDto): URLSearchParams {
    const start = dto.start === undefined ? undefined : parseTime('start', dto.start);
    const end = dto.end === undefined ? undefined : parseTime('end', dto.end);
    for (const matcher of dto['match[]'] ?? []) checkQuery(matcher);
    return params({ 'match[]': dto['match[]'], start, end });
  }

  /** Authorizes first, then validates the request (`build`), then finds the endpoint and forwards. */
  private async raw(
    caller: Caller,
    cluster: unknown,
    build: () => [PrometheusPath, URLSearchParams],
  ): Promise<ClusterResponse> {
    const name = clusterNameOf(cluster);
    const request: AccessRequest = { verb: 'get', cluster: name, resource: 'metrics', namespace: null };
    this.authorizer.require(caller, request);
    const [path, query] = build();
    return this.send(await this.endpoint(name), path, query);
  }

  /** The answer when it is Prometheus's JSON (success or error); anything else is the endpoint's fault: 502. */
  private async send(metrics: MetricsEndpointClient, path: PrometheusPath, query: URLSearchParams) {
    const res = await metrics.get(path, query);
    const type = String(res.headers['content-type'] ?? '');
    if (!/^application\/json\b/i.test(type)) {
      res.destroy();
      throw new BadGatewayException(
        `${metrics.target} answered HTTP ${res.statusCode} with ${type || 'no content type'}, not the Prometheus HTTP API's JSON: check its metricsURL`,
      );
    }
    return res;
  }

  private async matrix(
    endpoint: MetricsEndpointClient,
    query: string,
    window: { start: number; end: number; step: number },
  ): Promise<MatrixAnswer> {
    const res = await this.send(endpoint, PROMETHEUS_PATHS.queryRange, params({ query, ...window }));
    let answer: MatrixAnswer;
    try {
      answer = JSON.parse((await endpoint.read(res, MAX_USAGE_BODY)).toString('utf8')) as MatrixAnswer;
    } catch (error) {
      if (error instanceof SyntaxError) throw new BadGatewayException(`${endpoint.target} answered invalid JSON`);
      throw error;
    }
    if (answer.status !== 'success' || answer.data?.resultType !== 'matrix') {
      throw new BadGatewayException(
        `${endpoint.target} refused the usage query (HTTP ${res.statusCode}): ${String(answer.error ?? 'no matrix in the answer').slice(0, 300)}`,
      );
    }
    return answer;
  }

  private window(range: UsageRange | undefined) {
    const chosen = range ?? '1h';
    const { seconds, step } = USAGE_RANGES[chosen];
    const end = Math.floor(Date.now() / 1000 / step) * step;
    return { range: chosen, start: end - seconds, end, step };
  }

  /** The cluster's metrics endpoint: 404 unknown cluster or no metricsURL, 409 disabled. */
  private async endpoint(name: string): Promise<MetricsEndpointClient> {
    const row = await this.clusters.findOne({
      where: { name },
      select: { id: true, name: true, enabled: true, metricsURL: true },
    });
    requireUsable(name, row);
    if (!row!.metricsURL) {
      throw new NotFoundException(
        `cluster '${name}' has no metrics endpoint: an administrator can set its metricsURL to a Prometheus address`,
      );
    }
    return this.gateway.metricsClient({ cluster: row!.name, url: row!.metricsURL });
  }
}
