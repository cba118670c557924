import { applyDecorators } from '@nestjs/common';
import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { IsBoolean, IsOptional, IsString, Matches, MaxLength } from 'class-validator';
import { ValidateHttpUrlOrEmpty } from '../../common/validation.js';
import { IsMetricsUrl } from '../metrics-url.js';
import { CLUSTER_NAME_PATTERN } from '../cluster-name.js';

/** Kubeconfigs are small; this bounds the work of parsing one (the admin body limit is 1 MiB). */
export const MAX_CONFIG_LENGTH = 512 * 1024;

function ValidateClusterName(options: { optional?: boolean } = {}) {
  const api = { minLength: 1, maxLength: 253, pattern: CLUSTER_NAME_PATTERN.source, example: 'production' };
  return applyDecorators(
    ...(options.optional ? [ApiPropertyOptional(api), IsOptional()] : [ApiProperty(api)]),
    IsString(),
    Matches(CLUSTER_NAME_PATTERN, { message: 'name must be 1–253 printable ASCII characters without spaces' }),
  );
}

function ValidateDescription() {
  return applyDecorators(ApiPropertyOptional({ maxLength: 1024 }), IsOptional(), IsString(), MaxLength(1024));
}

function ValidateConfig(description: string) {
  return applyDecorators(
    ApiPropertyOptional({ maxLength: MAX_CONFIG_LENGTH, description }),
    IsOptional(),
    IsString(),
    MaxLength(MAX_CONFIG_LENGTH),
  );
}

function ValidateMetricsUrl() {
  // An http(s) URL first (length, then the URL parser); then what a metrics endpoint may not be.
  return applyDecorators(
    ValidateHttpUrlOrEmpty({ maxLength: 2048, example: 'http://prometheus.monitoring:9090' }),
    IsMetricsUrl(),
  );
}

export class CreateClusterDto {
  /** Unique; clients send it in `x-cluster-name`. */
  @ValidateClusterName()
  name: string;

  @ValidateDescription()
  description?: string;

  @ValidateConfig(
    'Kubeconfig YAML; required unless `inCluster` is true. Its `current-context` (or only context) is used; credentials must be inline (no exec, auth-provider or file paths). Stored encrypted, never returned.',
  )
  config?: string;

  /** Address of the cluster's metrics query endpoint, or `""`. */
  @ValidateMetricsUrl()
  metricsURL?: string;

  /** Use the cluster the service runs in, with its pod's service account; then no `config` is sent. Absent means `false`. */
  @ApiPropertyOptional()
  @IsOptional()
  @IsBoolean()
  inCluster?: boolean;

  /**
   * Send every resource call as the caller (`Impersonate-User: cas:<username>`, `Impersonate-Group:
   * cas:role:<role>`), so the cluster's RBAC applies too and its audit log names the person. The
   * stored credential then needs the `impersonate` verb on those users and groups.
   */
  @ApiPropertyOptional()
  @IsOptional()
  @IsBoolean()
  impersonate?: boolean;

  /** Make this the default cluster (the first cluster always becomes the default). Absent means `false`. */
  @ApiPropertyOptional()
  @IsOptional()
  @IsBoolean()
  isDefault?: boolean;
}

export class UpdateClusterDto {
  /** A new, unique name. */
  @ValidateClusterName({ optional: true })
  name?: string;

  @ValidateDescription()
  description?: string;

  @ValidateConfig('A new kubeconfig YAML; omitted or `""` keeps the stored one.')
  config?: string;

  @ValidateMetricsUrl()
  metricsURL?: string;

  /** `true` makes this the default cluster; `false` on the default cluster is a 409 (make another the default instead). */
  @ApiPropertyOptional()
  @IsOptional()
  @IsBoolean()
  isDefault?: boolean;

  @ApiPropertyOptional()
  @IsOptional()
  @IsBoolean()
  enabled?: boolean;

  /**
   * Send every resource call as the caller (`Impersonate-User: cas:<username>`, `Impersonate-Group:
   * cas:role:<role>`), so the cluster's RBAC applies too and its audit log names the person. The
   * stored credential then needs the `impersonate` verb on those users and groups.
   */
  @ApiPropertyOptional()
  @IsOptional()
  @IsBoolean()
  impersonate?: boolean;
}

export class ImportClustersDto {
  @ValidateConfig(
    'Kubeconfig YAML: every context becomes a cluster named after it, `current-context` the default. Not sent with `inCluster`.',
  )
  config?: string;

  /** `true` creates one cluster `in-cluster` for the cluster the service runs in. */
  @ApiPropertyOptional()
  @IsOptional()
  @IsBoolean()
  inCluster?: boolean;
}
