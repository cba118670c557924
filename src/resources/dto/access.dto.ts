import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { IsIn, IsOptional, IsString, Matches, MaxLength } from 'class-validator';
import { CLUSTER_NAME_PATTERN } from '../../clusters/cluster-name.js';
import { VERBS, type Verb } from '../../access/rules.js';

const ALL = '_all';
const CLUSTER_MESSAGE = 'cluster must be a cluster name: 1–253 printable characters without spaces';

export class PermissionsQueryDto {
  /** The cluster, as sent in `x-cluster-name`. */
  @ApiProperty({ maxLength: 253, example: 'prod' })
  @IsString()
  @MaxLength(253)
  @Matches(CLUSTER_NAME_PATTERN, { message: CLUSTER_MESSAGE })
  cluster: string;
}

export class PermissionRuleDto {
  /** The role the rule comes from. */
  role: string;
  /** `*` stands for every namespace (needed for `_all` and cluster-scoped resources). */
  namespaces: string[];
  /** `*` stands for every resource except `secrets`, `metrics`, `helmreleases` and status (`pods/status`). */
  resources: string[];
  verbs: string[];
}

export class PermissionsDto {
  cluster: string;
  /** The caller has the admin role: everything is allowed. */
  admin: boolean;
  /** The caller's rules that apply on this cluster; a request is allowed when one rule covers it. */
  rules: PermissionRuleDto[];
}

export class CanIDto {
  @ApiProperty({ maxLength: 253, example: 'prod' })
  @IsString()
  @MaxLength(253)
  @Matches(CLUSTER_NAME_PATTERN, { message: CLUSTER_MESSAGE })
  cluster: string;

  /**
   * As the routes name it: `<plural>` for the core group (`pods`), `<plural>.<group>` otherwise
   * (`deployments.apps`); `metrics` for the raw metrics routes; `helmreleases` for the Helm release routes; `<resource>/status` for the status
   * subresource (read with `get`, written with `update`/`patch`).
   */
  @ApiProperty({ maxLength: 253, example: 'deployments.apps' })
  @IsString()
  @MaxLength(253)
  @Matches(/^[a-z0-9][-a-z0-9.]*(\/status)?$/, {
    message: "resource must be '<plural>' or '<plural>.<group>', optionally followed by '/status'",
  })
  resource: string;

  /** A namespace; `_all` (or null, or omitted) for a list across all namespaces or a cluster-scoped resource. */
  @ApiPropertyOptional({ type: String, nullable: true, maxLength: 63, example: 'shop' })
  @IsOptional()
  @IsString()
  @MaxLength(63)
  @Matches(/^(_all|[a-z0-9]([-a-z0-9]*[a-z0-9])?)$/, { message: "namespace must be a namespace name or '_all'" })
  namespace?: string | null;

  @ApiProperty({ enum: VERBS })
  @IsIn(VERBS)
  verb: Verb;
}

export class DecisionDto {
  allowed: boolean;
  /** Why: the granting role, or what is lacking (the message a refused route call gives). */
  reason: string;
}

export function namespaceOf(dto: CanIDto): string | null {
  return dto.namespace === undefined || dto.namespace === null || dto.namespace === ALL ? null : dto.namespace;
}
