import { ApiProperty } from '@nestjs/swagger';
import { CLUSTER_STATUSES, METRICS_STATUSES, type ClusterStatus, type MetricsStatus } from '../cluster.entity.js';

export class ClusterDto {
  @ApiProperty({ type: 'integer' })
  id: number;
  name: string;
  description: string;
  enabled: boolean;
  /** The service connects with its pod's service account. */
  inCluster: boolean;
  /** Exactly one cluster is the default. */
  isDefault: boolean;
  /** Address of the cluster's metrics query endpoint, or `""`. */
  metricsURL: string;
  /** Resource calls impersonate the caller (`cas:<username>`, groups `cas:role:<role>`). */
  impersonate: boolean;
  /** Always `""`: the stored kubeconfig is never returned. */
  @ApiProperty({ example: '' })
  config: string;
  /** `gitVersion` the cluster reports at `/version`, or `""` before it was first reached. */
  @ApiProperty({ example: 'v1.20.2' })
  version: string;
  /** The API server URL. */
  @ApiProperty({ example: 'https://10.0.0.1:6443' })
  server: string;
  /** From the last health check; `disabled` when the cluster is disabled. */
  @ApiProperty({ enum: CLUSTER_STATUSES })
  status: ClusterStatus;
  /** Why the last health check failed, or null. */
  @ApiProperty({ type: String, nullable: true })
  error: string | null;
  /** The metrics endpoint's health at the last check; `none` without a metricsURL, `disabled` when the cluster is. */
  @ApiProperty({ enum: METRICS_STATUSES })
  metricsStatus: MetricsStatus;
  /** Why the last check of the metrics endpoint failed, or null. */
  @ApiProperty({ type: String, nullable: true })
  metricsError: string | null;
  @ApiProperty({ type: String, format: 'date-time' })
  createdAt: string;
  @ApiProperty({ type: String, format: 'date-time' })
  updatedAt: string;
}

export class ClusterCreatedDto {
  @ApiProperty({ type: 'integer' })
  id: number;
  /** Says that the cluster was created. */
  message: string;
}

export class ClusterMessageDto {
  /** Says what was done. */
  message: string;
}

export class ImportedClusterDto {
  @ApiProperty({ type: 'integer' })
  id: number;
  name: string;
  isDefault: boolean;
}

export class ClustersImportedDto {
  /** Says how many clusters were imported. */
  message: string;
  clusters: ImportedClusterDto[];
}

/** A cluster as a cluster picker shows it. */
export class AvailableClusterDto {
  /** Send it in `x-cluster-name`. */
  name: string;
  @ApiProperty({ example: 'v1.20.2' })
  version: string;
  isDefault: boolean;
  @ApiProperty({ enum: CLUSTER_STATUSES })
  status: ClusterStatus;
}
