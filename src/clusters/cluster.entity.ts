import { Column, CreateDateColumn, Entity, Index, PrimaryGeneratedColumn } from 'typeorm';

export const CLUSTER_STATUSES = ['ok', 'unreachable', 'error', 'disabled'] as const;
export type ClusterStatus = (typeof CLUSTER_STATUSES)[number];
/** What the health probe stores; `disabled` is derived from `enabled` when the cluster is shown. */
export type ProbeStatus = Exclude<ClusterStatus, 'disabled'>;
/** The metrics endpoint's health; `none`: no metricsURL (derived, like `disabled`). */
export const METRICS_STATUSES = ['ok', 'unreachable', 'error', 'none', 'disabled'] as const;
export type MetricsStatus = (typeof METRICS_STATUSES)[number];

@Entity('clusters')
// At most one default, by constraint; "at least one" is kept by ClustersService under the 'clusters' lock.
@Index('uq_clusters_one_default', ['isDefault'], { unique: true, where: '"is_default" = true' })
export class ClusterEntity {
  @PrimaryGeneratedColumn()
  id: number;

  /** Unique; the value clients send in `x-cluster-name`. */
  @Column({ type: 'varchar', length: 253, unique: true })
  name: string;

  @Column({ type: 'varchar', length: 1024, default: '' })
  description: string;

  @Column({ type: 'boolean', default: true })
  enabled: boolean;

  /** Connect with the service account of the pod the service runs in; no stored kubeconfig then. */
  @Column({ name: 'in_cluster', type: 'boolean', default: false })
  inCluster: boolean;

  @Column({ name: 'is_default', type: 'boolean', default: false })
  isDefault: boolean;

  /**
   * Resource calls carry `Impersonate-User: cas:<username>` and `Impersonate-Group: cas:role:<role>`,
   * so the cluster's own RBAC applies too and its audit log names the person.
   */
  @Column({ type: 'boolean', default: false })
  impersonate: boolean;

  @Column({ name: 'metrics_url', type: 'varchar', length: 2048, default: '' })
  metricsURL: string;

  /** The normalised kubeconfig, sealed by SecretBox (`v1.<keyId>.…`); null for in-cluster. Never returned. */
  @Column({ name: 'config_sealed', type: 'text', nullable: true, select: false })
  configSealed: string | null;

  /** The API server URL, kept in clear to show it; '' for in-cluster (that comes from configuration). */
  @Column({ type: 'varchar', length: 2048, default: '' })
  server: string;

  /**
   * Bumped on every change of how to connect (config, enabled, name): connection caches on any
   * replica compare it to know they are stale.
   */
  @Column({ type: 'integer', default: 1 })
  generation: number;

  /** `gitVersion` from the cluster's `/version` at the last successful probe. */
  @Column({ type: 'varchar', length: 128, default: '' })
  version: string;

  @Column({ type: 'varchar', length: 16, default: 'unreachable' })
  status: ProbeStatus;

  /** Why the last probe failed, or null. */
  @Column({ type: 'varchar', length: 1024, nullable: true })
  error: string | null;

  /** The metrics endpoint at the last probe (`GET <metricsURL>/api/v1/status/buildinfo`). */
  @Column({ name: 'metrics_status', type: 'varchar', length: 16, default: 'unreachable' })
  metricsStatus: ProbeStatus;

  /** Why the last probe of the metrics endpoint failed, or null. */
  @Column({ name: 'metrics_error', type: 'varchar', length: 1024, nullable: true })
  metricsError: string | null;

  @Column({ name: 'checked_at', type: Date, nullable: true })
  checkedAt: Date | null;

  @CreateDateColumn({ name: 'created_at' })
  createdAt: Date;

  /** Set by the service on changes an admin makes (not on health refreshes). */
  @Column({ name: 'updated_at', type: Date })
  updatedAt: Date;
}
