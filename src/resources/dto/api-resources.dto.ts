import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { IsOptional, Matches, MaxLength } from 'class-validator';
import { VERBS } from '../../access/authorizer.js';

export class ApiResourcesQueryDto {
  /**
   * Answer `allowedVerbs` for this namespace. Without it they are the verbs the caller may use on
   * the type across the whole cluster (cluster-scoped objects, and lists over all namespaces).
   */
  @ApiPropertyOptional({ maxLength: 63, example: 'default' })
  @IsOptional()
  @MaxLength(63)
  @Matches(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/, { message: 'namespace must be a DNS label' })
  namespace?: string;
}

/** One resource type the cluster serves, as its discovery describes it, and what the caller may do with it. */
export class ApiResourceDto {
  /** The name the resource routes take: `<plural>` for the core group, `<plural>.<group>` otherwise. */
  @ApiProperty({ example: 'deployments.apps' })
  id: string;
  /** The plural name. */
  @ApiProperty({ example: 'deployments' })
  name: string;
  /** `''` for the core group. */
  @ApiProperty({ example: 'apps' })
  group: string;
  /** The version the service uses (the group's preferred one). */
  @ApiProperty({ example: 'v1' })
  version: string;
  @ApiProperty({ example: 'Deployment' })
  kind: string;
  namespaced: boolean;
  /** The Kubernetes verbs the cluster serves for the type. */
  @ApiProperty({ example: ['create', 'delete', 'get', 'list', 'patch', 'update', 'watch'] })
  verbs: string[];
  @ApiProperty({ example: ['deploy'] })
  shortNames: string[];
  @ApiProperty({ example: ['all'] })
  categories: string[];
  /** e.g. `scale`, `status`, `log`: `scale` and `status` are served by `/api/v1/<id>/<namespace>/<name>/scale|status`. */
  @ApiProperty({ example: ['scale', 'status'] })
  subresources: string[];
  /** The verbs of this service the caller may use on the type (`log` on pods), as the routes decide them. */
  @ApiProperty({ enum: VERBS, isArray: true, example: ['get', 'list', 'watch'] })
  allowedVerbs: string[];
}

export class ApiResourceListDto {
  @ApiProperty({ example: 'production' })
  cluster: string;
  /** The namespace `allowedVerbs` answer for; null: across the whole cluster. */
  @ApiProperty({ type: String, nullable: true, example: null })
  namespace: string | null;
  @ApiProperty({ type: [ApiResourceDto] })
  resources: ApiResourceDto[];
}

export class ApiResourceSchemaDto {
  @ApiProperty({ example: 'deployments.apps' })
  id: string;
  group: string;
  version: string;
  kind: string;
  /** The name of the type's definition in the cluster's `/openapi/v2`. */
  @ApiProperty({ example: 'io.k8s.api.apps.v1.Deployment' })
  definition: string;
  /** The type's OpenAPI v2 schema, verbatim; its `$ref`s (`#/definitions/<name>`) point into `definitions`. */
  @ApiProperty({ type: 'object', additionalProperties: true })
  schema: Record<string, unknown>;
  /** Every definition the schema refers to, directly or not, by name. */
  @ApiProperty({ type: 'object', additionalProperties: { type: 'object', additionalProperties: true } })
  definitions: Record<string, unknown>;
}
