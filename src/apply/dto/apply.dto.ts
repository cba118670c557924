import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { IsIn, IsOptional, IsString, Matches, MaxLength } from 'class-validator';
import { QueryBoolean } from '../../resources/dto/resource-query.dto.js';

export const APPLY_ACTIONS = ['created', 'configured', 'unchanged', 'conflict', 'error'] as const;
export type ApplyAction = (typeof APPLY_ACTIONS)[number];

export class ApplyQueryDto {
  /** The namespace of namespaced documents that name none (default `default`); a document naming another is an `error`. */
  @ApiPropertyOptional({ maxLength: 63, example: 'shop' })
  @IsOptional()
  @IsString()
  @MaxLength(63)
  @Matches(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/, {
    message: "namespace must be a DNS label (lower-case letters, digits, '-', at most 63 characters)",
  })
  namespace?: string;

  /** `All`: the cluster validates and answers each document without storing anything; the diffs show what would change. */
  @ApiPropertyOptional({ enum: ['All'] })
  @IsOptional()
  @IsIn(['All'])
  dryRun?: string;

  @QueryBoolean(
    "`true`: take over the fields another manager owns instead of reporting the cluster's conflict (action `conflict`).",
  )
  force?: boolean;

  /**
   * Who the applied fields belong to in `managedFields`; default `cas:<username>` (`cas:key:<name>` for an API
   * key). Another `cas:` manager (another user's or key's) is a 403.
   */
  @IsOptional()
  @IsString()
  @MaxLength(128)
  @Matches(/^[\x21-\x7e]([\x20-\x7e]*[\x21-\x7e])?$/, { message: 'fieldManager must be printable ASCII' })
  fieldManager?: string;
}

export class ApplyConflictDto {
  /** The manager that owns the field, as the cluster names it (`kubectl`, `cas:alice`). */
  @ApiProperty({ example: 'kubectl' })
  manager: string;
  /** The field, as the cluster names it (`.data.greeting`). */
  @ApiProperty({ example: '.data.greeting' })
  field: string;
  /** The cluster's message for this conflict. */
  @ApiProperty({ example: 'conflict with "kubectl" using v1' })
  message: string;
}

export class ApplyResultDto {
  @ApiProperty({ type: String, nullable: true, example: 'apps/v1' })
  apiVersion: string | null;
  @ApiProperty({ type: String, nullable: true, example: 'Deployment' })
  kind: string | null;
  /** null for cluster-scoped objects (and documents too broken to say). */
  @ApiProperty({ type: String, nullable: true, example: 'shop' })
  namespace: string | null;
  @ApiProperty({ type: String, nullable: true, example: 'web' })
  name: string | null;
  /**
   * `created`, `configured` (its content or its field owners changed), `unchanged`, `conflict` (another manager
   * owns fields it sets: see `conflicts`, or apply again with `force=true`), `error` (see `status`).
   */
  @ApiProperty({ enum: APPLY_ACTIONS, example: 'configured' })
  action: ApplyAction;
  /**
   * A unified diff of the object before and after as YAML ('' when equal), without `managedFields`,
   * `resourceVersion`, `generation`, `uid` and `creationTimestamp`; a Secret's values are `***`.
   */
  @ApiProperty({
    example:
      '--- a/shop/deployments.apps/web\n+++ b/shop/deployments.apps/web\n@@ -6 +6 @@\n-  replicas: 2\n+  replicas: 3\n',
  })
  diff: string;
  /** With `conflict`: the fields and the managers that own them. */
  @ApiProperty({ type: [ApplyConflictDto] })
  conflicts: ApplyConflictDto[];
  /** With `error` (and `conflict`): the cluster's `Status`, or the service's own in that shape (400, 403, 404). */
  @ApiProperty({
    type: 'object',
    nullable: true,
    additionalProperties: true,
    description: 'A Kubernetes `Status`: `kind`, `apiVersion`, `status`, `message`, `reason`, `details`, `code`',
  })
  status: Record<string, unknown> | null;
}

export class ApplyResponseDto {
  /** One result per document, in the documents' order. */
  @ApiProperty({ type: [ApplyResultDto] })
  results: ApplyResultDto[];
}
