import { ApiPropertyOptional } from '@nestjs/swagger';
import { Type } from 'class-transformer';
import { IsIn, IsInt, IsISO8601, IsOptional, Matches, Max, MaxLength, Min } from 'class-validator';

const BOOLEAN = ['true', 'false'];

/** Passed through to the cluster's `pods/log`; each one means what it means to `kubectl logs`. */
export class PodLogQueryDto {
  /** The container to read; the cluster answers 400 when the pod has several and none is named. */
  @ApiPropertyOptional({ maxLength: 63, example: 'app' })
  @IsOptional()
  @MaxLength(63)
  @Matches(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/, { message: 'container must be a container name (a DNS label)' })
  container?: string;

  /** `true`: keep the stream open and send lines as the container writes them. */
  @ApiPropertyOptional({ enum: BOOLEAN })
  @IsOptional()
  @IsIn(BOOLEAN)
  follow?: string;

  /** Only the last N lines. */
  @ApiPropertyOptional({ type: 'integer', minimum: 0, maximum: 1_000_000 })
  @IsOptional()
  @Type(() => Number)
  @IsInt()
  @Min(0)
  @Max(1_000_000)
  tailLines?: number;

  /** Only lines newer than this many seconds. Not together with `sinceTime`. */
  @ApiPropertyOptional({ type: 'integer', minimum: 1, maximum: 31_536_000 })
  @IsOptional()
  @Type(() => Number)
  @IsInt()
  @Min(1)
  @Max(31_536_000)
  sinceSeconds?: number;

  /** Only lines at or after this RFC 3339 time. Not together with `sinceSeconds`. */
  @ApiPropertyOptional({ format: 'date-time', example: '2026-01-01T00:00:00Z' })
  @IsOptional()
  @MaxLength(64)
  @IsISO8601({ strict: true }, { message: 'sinceTime must be an RFC 3339 time such as 2026-01-01T00:00:00Z' })
  sinceTime?: string;

  /** `true`: prefix every line with its RFC 3339 time. */
  @ApiPropertyOptional({ enum: BOOLEAN })
  @IsOptional()
  @IsIn(BOOLEAN)
  timestamps?: string;

  /** `true`: the log of the previous, terminated instance of the container. */
  @ApiPropertyOptional({ enum: BOOLEAN })
  @IsOptional()
  @IsIn(BOOLEAN)
  previous?: string;

  /** Stop after this many bytes. */
  @ApiPropertyOptional({ type: 'integer', minimum: 1 })
  @IsOptional()
  @Type(() => Number)
  @IsInt()
  @Min(1)
  limitBytes?: number;
}
