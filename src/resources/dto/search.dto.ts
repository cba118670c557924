import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { IsOptional, IsString, Matches, MaxLength, MinLength } from 'class-validator';
import { PageSize } from '../../common/page-size.js';

export class SearchQueryDto {
  /** A case-insensitive substring of the object's name. */
  @ApiProperty({ minLength: 1, maxLength: 256, example: 'web' })
  @IsString()
  @MinLength(1)
  @MaxLength(256)
  q: string;

  /** Comma-separated cluster names (default: every enabled cluster the caller's roles grant something on). */
  @ApiPropertyOptional({ example: 'prod,staging', maxLength: 2048 })
  @IsOptional()
  @IsString()
  @MaxLength(2048)
  @Matches(/^[^,]+(,[^,]+){0,19}$/, { message: 'clusters must be 1 to 20 comma-separated cluster names' })
  clusters?: string;

  /**
   * Comma-separated resource types as the resource routes name them (default: namespaces, nodes, pods,
   * deployments.apps, statefulsets.apps, daemonsets.apps, services, configmaps, ingresses, jobs, cronjobs).
   */
  @ApiPropertyOptional({ example: 'pods,deployments.apps', maxLength: 2048 })
  @IsOptional()
  @IsString()
  @MaxLength(2048)
  @Matches(/^[a-z0-9.-]+(,[a-z0-9.-]+){0,29}$/, { message: 'resources must be 1 to 30 comma-separated resource names' })
  resources?: string;

  /** How many matches to answer (default 50); `total` counts them all. */
  @PageSize()
  size?: number;
}

export class SearchItemDto {
  @ApiProperty({ example: 'prod' })
  cluster: string;
  /** The resource type as the resource routes name it. */
  @ApiProperty({ example: 'deployments.apps' })
  resource: string;
  /** `''` for cluster-scoped objects. */
  @ApiProperty({ example: 'shop' })
  namespace: string;
  @ApiProperty({ example: 'web-frontend' })
  name: string;
  @ApiProperty({ example: 'Deployment' })
  kind: string;
  @ApiProperty({ example: 'apps/v1' })
  apiVersion: string;
}

export class SearchResultDto {
  /** The first `size` matches, by name, then cluster, resource and namespace. */
  @ApiProperty({ type: [SearchItemDto] })
  items: SearchItemDto[];
  /** Every match the caller may see. */
  @ApiProperty({ type: 'integer', minimum: 0, example: 3 })
  total: number;
}
