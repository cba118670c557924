import { ApiProperty } from '@nestjs/swagger';
import { VERBS, type Verb } from '../../access/rules.js';
import { CLUSTER_STATUSES, METRICS_STATUSES, type ClusterStatus, type MetricsStatus } from '../cluster.entity.js';

export class ClusterDto {
  @ApiProperty({ type: 'integer' })
  id: number;
  @ApiProperty({ example: 'production' })
  name: string;
  @ApiProperty({ example: 'The production cluster' })
  description: string;
  @ApiProperty()
  enabled: boolean;
  /** The service connects with its pod's service account. */
  @ApiProperty()
  inCluster: boolean;
  /** Exactly one cluster is the default. */
  @ApiProperty()
  isDefault: boolean;
  /** Address of the cluster's metrics query endpoint, or `""`. */
  @ApiProperty({ example: 'http://prometheus.monitoring:9090' })
  metricsURL: string;
  /** Resource calls impersonate the caller (`cas:<username>`, groups `cas:role:<role>`). */
  @ApiProperty()
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
  @ApiProperty({ example: "cluster 'production' created" })
  message: string;
}

export class ClusterMessageDto {
  /** Says what was done. */
  @ApiProperty({ example: "cluster 'production' updated" })
  message: string;
}

export class ImportedClusterDto {
  @ApiProperty({ type: 'integer' })
  id: number;
  @ApiProperty({ example: 'staging' })
  name: string;
  isDefault: boolean;
}

export class ClustersImportedDto {
  /** Says how many clusters were imported. */
  @ApiProperty({ example: 'imported 1 cluster' })
  message: string;
  clusters: ImportedClusterDto[];
}

/** A cluster as a cluster picker shows it. */
export class AvailableClusterDto {
  /** Send it in `x-cluster-name`. */
  @ApiProperty({ example: 'production' })
  name: string;
  @ApiProperty({ example: 'v1.20.2' })
  version: string;
  @ApiProperty()
  isDefault: boolean;
  @ApiProperty({ enum: CLUSTER_STATUSES })
  status: ClusterStatus;
}

export class NamespaceReachDto {
  @ApiProperty({ example: 'shop' })
  name: string;
  /**
   * The verbs the caller holds in the namespace on at least one resource type (`log` for pod logs;
   * `exec`, `attach`, `portforward` for the terminal): what `can-i` and the routes would allow there
   * for some type. Ask `can-i` or `api-resources?namespace=` for a type's own verbs.
   */
  @ApiProperty({ enum: VERBS, isArray: true, example: ['get', 'list', 'watch'] })
  verbs: Verb[];
}

export class ClusterNamespacesDto {
  @ApiProperty({ example: 'production' })
  cluster: string;
  /** Sorted by name; a namespace where the caller holds nothing is left out. */
  @ApiProperty({ type: NamespaceReachDto, isArray: true })
  namespaces: NamespaceReachDto[];
}
