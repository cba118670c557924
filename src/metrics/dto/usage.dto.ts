import { ApiProperty } from '@nestjs/swagger';

/** A time series: `[unixSeconds, value]` pairs; `value` is null where Prometheus answered NaN or ±Inf. */
const POINTS = {
  type: 'array',
  items: { type: 'array', minItems: 2, maxItems: 2, items: { type: 'number', format: 'double', nullable: true } },
  example: [
    [1767366000, 0.25],
    [1767366030, 0.26],
  ],
} as const;

export class ContainerSeriesDto {
  /** The container's name. */
  container: string;
  @ApiProperty(POINTS)
  values: Array<[number, number | null]>;
}

class UsageWindowDto {
  /** The cluster asked. */
  cluster: string;
  @ApiProperty({ enum: ['30m', '1h', '6h', '24h'] })
  range: string;
  /** First point, Unix seconds. */
  @ApiProperty({ type: 'integer' })
  start: number;
  /** Last point, Unix seconds. */
  @ApiProperty({ type: 'integer' })
  end: number;
  /** Seconds between points. */
  @ApiProperty({ type: 'integer' })
  step: number;
}

/** CPU and memory of one pod, per container, over the range. */
export class PodUsageDto extends UsageWindowDto {
  namespace: string;
  pod: string;
  /** CPU in cores (1 = one core busy), per container. */
  cpu: ContainerSeriesDto[];
  /** Memory working set in bytes, per container. */
  memory: ContainerSeriesDto[];
}

/** CPU and memory of one node over the range; empty arrays when the metrics endpoint has no data for it. */
export class NodeUsageDto extends UsageWindowDto {
  node: string;
  /** CPU in cores. */
  @ApiProperty(POINTS)
  cpu: Array<[number, number | null]>;
  /** Memory working set in bytes. */
  @ApiProperty(POINTS)
  memory: Array<[number, number | null]>;
}

/** Prometheus's answer, passed through: `{status: "success", data}` or `{status: "error", errorType, error}`. */
export class PrometheusResponseDto {
  @ApiProperty({ enum: ['success', 'error'] })
  status: string;
  @ApiProperty({
    description: 'The result: `{resultType, result}` for queries, a list for series, labels and label values',
    required: false,
    oneOf: [
      { type: 'object', additionalProperties: true },
      { type: 'array', items: {} },
    ],
  })
  data?: unknown;
  @ApiProperty({ required: false, example: 'bad_data' })
  errorType?: string;
  @ApiProperty({ required: false })
  error?: string;
  @ApiProperty({ type: [String], required: false })
  warnings?: string[];
}
