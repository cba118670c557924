import { applyDecorators, Controller, Get, Headers, Param, Query, Res } from '@nestjs/common';
import {
  ApiBadGatewayResponse,
  ApiExtraModels,
  ApiGatewayTimeoutResponse,
  ApiOkResponse,
  ApiParam,
  ApiResponse,
  ApiTags,
  getSchemaPath,
} from '@nestjs/swagger';
import type { FastifyReply } from 'fastify';
import type { ClusterResponse } from '../clusters/gateway/answer.js';
import { Auth, Authenticated } from '../auth/auth.decorators.js';
import type { Caller } from '../access/caller.js';
import { ApiErrors } from '../common/api-errors.js';
import { ErrorResponseDto } from '../common/error-response.dto.js';
import {
  MetricsInstantQueryDto,
  MetricsMatchQueryDto,
  MetricsRangeQueryDto,
  MetricsSeriesQueryDto,
  UsageQueryDto,
} from './dto/metrics-query.dto.js';
import { NodeUsageDto, PodUsageDto, PrometheusResponseDto } from './dto/usage.dto.js';
import { MetricsService } from './metrics.service.js';
import { ApiTargetCluster } from '../clusters/target-cluster.js';

const ClusterMetrics = (passthrough: boolean) =>
  applyDecorators(
    ApiTargetCluster(),
    ApiErrors(404, 409),
    ...(passthrough
      ? [
          ApiExtraModels(ErrorResponseDto, PrometheusResponseDto),
          ApiResponse({
            status: 400,
            description:
              "Invalid input (the service's error), or a query Prometheus refused (its answer, passed through)",
            schema: {
              oneOf: [{ $ref: getSchemaPath(ErrorResponseDto) }, { $ref: getSchemaPath(PrometheusResponseDto) }],
            },
          }),
          ApiResponse({
            status: 422,
            description: "Prometheus could not execute the query (its answer, passed through: `status: 'error'`)",
            type: PrometheusResponseDto,
          }),
          ApiResponse({
            status: 503,
            description: 'Prometheus timed out or was overloaded (its answer, passed through)',
            type: PrometheusResponseDto,
          }),
        ]
      : [ApiErrors(400)]),
    ApiBadGatewayResponse({
      description: "The cluster's metrics endpoint could not be reached or did not answer Prometheus JSON",
      type: ErrorResponseDto,
    }),
    ApiGatewayTimeoutResponse({
      description: "The cluster's metrics endpoint did not answer in time",
      type: ErrorResponseDto,
    }),
  );

/** Prometheus's answer goes to the caller as it arrives: status and JSON body bytes. */
function pass(reply: FastifyReply, res: ClusterResponse): FastifyReply {
  reply.status(res.statusCode ?? 502).header('content-type', res.headers['content-type'] ?? 'application/json');
  if (res.headers['content-length'] !== undefined) reply.header('content-length', res.headers['content-length']);
  return reply.send(res);
}

/**
 * Queries of the Prometheus at the `metricsURL` of the cluster named in `x-cluster-name`. Raw
 * PromQL needs `get` on `metrics` (admins, or a rule granting it); pod and node usage are
 * authorized like reading that pod or node.
 */
@ApiTags('Metrics')
@Controller('metrics')
export class MetricsController {
  constructor(private readonly metrics: MetricsService) {}

  /** Evaluates PromQL at one time: Prometheus's `/api/v1/query` answer, passed through. */
  @Authenticated()
  @Get('query')
  @ClusterMetrics(true)
  @ApiOkResponse({ description: "Prometheus's answer (`{status: 'success', data}`)", type: PrometheusResponseDto })
  async queryMetrics(
    @Auth() caller: Caller,
    @Headers('x-cluster-name') cluster: unknown,
    @Query() query: MetricsInstantQueryDto,
    @Res() reply: FastifyReply,
  ): Promise<FastifyReply> {
    return pass(reply, await this.metrics.queryMetrics(caller, cluster, query));
  }

  /** Evaluates PromQL over a range: Prometheus's `/api/v1/query_range` answer; at most 11,000 points per series. */
  @Authenticated()
  @Get('query_range')
  @ClusterMetrics(true)
  @ApiOkResponse({ description: "Prometheus's answer (`{status: 'success', data}`)", type: PrometheusResponseDto })
  async queryMetricsRange(
    @Auth() caller: Caller,
    @Headers('x-cluster-name') cluster: unknown,
    @Query() query: MetricsRangeQueryDto,
    @Res() reply: FastifyReply,
  ): Promise<FastifyReply> {
    return pass(reply, await this.metrics.queryMetricsRange(caller, cluster, query));
  }

  /** Series matching the selectors: Prometheus's `/api/v1/series` answer. */
  @Authenticated()
  @Get('series')
  @ClusterMetrics(true)
  @ApiOkResponse({ description: "Prometheus's answer (`{status: 'success', data}`)", type: PrometheusResponseDto })
  async listMetricSeries(
    @Auth() caller: Caller,
    @Headers('x-cluster-name') cluster: unknown,
    @Query() query: MetricsSeriesQueryDto,
    @Res() reply: FastifyReply,
  ): Promise<FastifyReply> {
    return pass(reply, await this.metrics.listMetricSeries(caller, cluster, query));
  }

  /** Label names: Prometheus's `/api/v1/labels` answer. */
  @Authenticated()
  @Get('labels')
  @ClusterMetrics(true)
  @ApiOkResponse({ description: "Prometheus's answer (`{status: 'success', data}`)", type: PrometheusResponseDto })
  async listMetricLabels(
    @Auth() caller: Caller,
    @Headers('x-cluster-name') cluster: unknown,
    @Query() query: MetricsMatchQueryDto,
    @Res() reply: FastifyReply,
  ): Promise<FastifyReply> {
    return pass(reply, await this.metrics.listMetricLabels(caller, cluster, query));
  }

  /** Values of one label: Prometheus's `/api/v1/label/<name>/values` answer. */
  @Authenticated()
  @Get('label/:label/values')
  @ClusterMetrics(true)
  @ApiParam({ name: 'label', description: 'A label name (`[A-Za-z_][A-Za-z0-9_]*`)', example: 'job' })
  @ApiOkResponse({ description: "Prometheus's answer (`{status: 'success', data}`)", type: PrometheusResponseDto })
  async listMetricLabelValues(
    @Auth() caller: Caller,
    @Headers('x-cluster-name') cluster: unknown,
    @Param('label') label: string,
    @Query() query: MetricsMatchQueryDto,
    @Res() reply: FastifyReply,
  ): Promise<FastifyReply> {
    return pass(reply, await this.metrics.listMetricLabelValues(caller, cluster, label, query));
  }

  /** CPU (cores) and memory (working set bytes) of a pod per container, until now; authorized like reading the pod. */
  @Authenticated()
  @Get('pods/:namespace/:name')
  @ClusterMetrics(false)
  @ApiParam({ name: 'namespace', example: 'default' })
  @ApiParam({ name: 'name', description: 'Pod name', example: 'web-7d4b9c-x2x8k' })
  getPodMetrics(
    @Auth() caller: Caller,
    @Headers('x-cluster-name') cluster: unknown,
    @Param('namespace') namespace: string,
    @Param('name') name: string,
    @Query() query: UsageQueryDto,
  ): Promise<PodUsageDto> {
    return this.metrics.getPodMetrics(caller, cluster, namespace, name, query);
  }

  /** CPU (cores) and memory (working set bytes) of a node, until now; authorized like reading the node. */
  @Authenticated()
  @Get('nodes/:name')
  @ClusterMetrics(false)
  @ApiParam({ name: 'name', description: 'Node name', example: 'worker-1' })
  getNodeMetrics(
    @Auth() caller: Caller,
    @Headers('x-cluster-name') cluster: unknown,
    @Param('name') name: string,
    @Query() query: UsageQueryDto,
  ): Promise<NodeUsageDto> {
    return this.metrics.getNodeMetrics(caller, cluster, name, query);
  }
}
