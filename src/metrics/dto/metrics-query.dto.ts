import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { Transform } from 'class-transformer';
import { ArrayMaxSize, ArrayMinSize, IsArray, IsIn, IsOptional, IsString, MaxLength } from 'class-validator';
import { MAX_QUERY_BYTES, USAGE_RANGES, type UsageRange } from '../promql.js';

const TIME = 'Unix seconds (`1767366245.5`) or RFC 3339 (`2026-01-02T15:04:05Z`)';
/** `match[]` once is a string, repeated an array: always an array here. */
const toArray = ({ value }: { value: unknown }) => (typeof value === 'string' ? [value] : value);
const MAX_MATCHERS = 20;

export class MetricsInstantQueryDto {
  /** PromQL, at most 4 KiB, e.g. `sum by (code) (rate(apiserver_request_total[5m]))`. */
  @ApiProperty({ maxLength: MAX_QUERY_BYTES, example: 'sum by (code) (rate(apiserver_request_total[5m]))' })
  @IsString()
  @MaxLength(MAX_QUERY_BYTES)
  query: string;

  @ApiPropertyOptional({ description: `Evaluation time: ${TIME}; default now` })
  @IsOptional()
  @IsString()
  @MaxLength(40)
  time?: string;
}

export class MetricsRangeQueryDto {
  /** PromQL, at most 4 KiB. */
  @ApiProperty({ maxLength: MAX_QUERY_BYTES, example: 'sum(rate(apiserver_request_total[5m]))' })
  @IsString()
  @MaxLength(MAX_QUERY_BYTES)
  query: string;

  @ApiProperty({ description: `Start: ${TIME}` })
  @IsString()
  @MaxLength(40)
  start: string;

  @ApiProperty({ description: `End: ${TIME}` })
  @IsString()
  @MaxLength(40)
  end: string;

  @ApiProperty({
    description: 'Seconds (`30`) or a duration (`15s`, `1m`); `(end - start) / step + 1` must be at most 11,000',
    example: '30s',
  })
  @IsString()
  @MaxLength(40)
  step: string;
}

class MetricsTimeRangeDto {
  @ApiPropertyOptional({ description: `Start: ${TIME}` })
  @IsOptional()
  @IsString()
  @MaxLength(40)
  start?: string;

  @ApiPropertyOptional({ description: `End: ${TIME}` })
  @IsOptional()
  @IsString()
  @MaxLength(40)
  end?: string;
}

export class MetricsMatchQueryDto extends MetricsTimeRangeDto {
  @ApiPropertyOptional({
    name: 'match[]',
    type: [String],
    description: `Series selectors (repeat the parameter), at most ${MAX_MATCHERS}, each at most 4 KiB`,
    example: ['apiserver_request_total'],
  })
  @IsOptional()
  @Transform(toArray)
  @IsArray()
  @ArrayMaxSize(MAX_MATCHERS)
  @IsString({ each: true })
  @MaxLength(MAX_QUERY_BYTES, { each: true })
  'match[]'?: string[];
}

export class MetricsSeriesQueryDto extends MetricsTimeRangeDto {
  @ApiProperty({
    name: 'match[]',
    type: [String],
    description: `Series selectors (repeat the parameter), 1 to ${MAX_MATCHERS}, each at most 4 KiB`,
    example: ['apiserver_request_total'],
  })
  @Transform(toArray)
  @IsArray()
  @ArrayMinSize(1)
  @ArrayMaxSize(MAX_MATCHERS)
  @IsString({ each: true })
  @MaxLength(MAX_QUERY_BYTES, { each: true })
  'match[]': string[];
}

export class UsageQueryDto {
  @ApiPropertyOptional({ enum: Object.keys(USAGE_RANGES), default: '1h', description: 'How far back, until now' })
  @IsOptional()
  @IsIn(Object.keys(USAGE_RANGES), { message: `range must be one of ${Object.keys(USAGE_RANGES).join(', ')}` })
  range?: UsageRange;
}
