import { Column, Entity, Index, PrimaryGeneratedColumn } from 'typeorm';

/**
 * One audited call: who, from where, which operation on what, and how it ended. Never a body:
 * the columns hold names, ids and outcomes only (no passwords, tokens, keys, kubeconfigs or object data).
 */
@Entity('audit_events')
@Index('idx_audit_events_at', ['at'])
@Index('idx_audit_events_actor', ['actorKey', 'at'])
@Index('idx_audit_events_operation', ['operation', 'at'])
@Index('idx_audit_events_cluster', ['cluster', 'at'])
@Index('idx_audit_events_object', ['cluster', 'resource', 'namespace', 'name', 'at'])
@Index('idx_audit_events_status', ['statusCode', 'at'])
export class AuditEventEntity {
  @PrimaryGeneratedColumn()
  id: number;

  /** When the call was received. */
  @Column({ type: Date })
  at: Date;

  /** `user`, `apiKey`, `bootstrap` (first-time setup) or `anonymous`. */
  @Column({ name: 'actor_kind', type: 'varchar', length: 16 })
  actorKind: string;

  @Column({ name: 'actor_id', type: 'integer', nullable: true })
  actorId: number | null;

  /** Username or API key name (for a failed login: the username that was tried). */
  @Column({ name: 'actor_name', type: 'varchar', length: 256, nullable: true })
  actorName: string | null;

  /** Lower-cased actor name: the `actor` filter ignores case, as usernames do. */
  @Column({ name: 'actor_key', type: 'varchar', length: 256, nullable: true })
  actorKey: string | null;

  @Column({ name: 'client_address', type: 'varchar', length: 64, nullable: true })
  clientAddress: string | null;

  /** The route's operationId (`createUser`, `patchResource`, …). */
  @Column({ type: 'varchar', length: 64 })
  operation: string;

  @Column({ type: 'varchar', length: 8 })
  method: string;

  @Column({ name: 'status_code', type: 'integer' })
  statusCode: number;

  @Column({ name: 'request_id', type: 'varchar', length: 128 })
  requestId: string;

  /** What kind of object the `:id` of an admin route names: `user`, `cluster`, `apiKey`, `role`, … */
  @Column({ name: 'target_kind', type: 'varchar', length: 32, nullable: true })
  targetKind: string | null;

  @Column({ name: 'target_id', type: 'varchar', length: 64, nullable: true })
  targetId: string | null;

  @Column({ type: 'varchar', length: 253, nullable: true })
  cluster: string | null;

  @Column({ type: 'varchar', length: 253, nullable: true })
  resource: string | null;

  @Column({ type: 'varchar', length: 253, nullable: true })
  namespace: string | null;

  @Column({ type: 'varchar', length: 253, nullable: true })
  name: string | null;

  /** Resource writes: the object's uid and resourceVersion after the write, as the cluster answered. */
  @Column({ type: 'varchar', length: 64, nullable: true })
  uid: string | null;

  @Column({ name: 'resource_version', type: 'varchar', length: 64, nullable: true })
  resourceVersion: string | null;

  /**
   * How many calls the row stands for: 1, except for logins refused before any password check (429,
   * 503), which are tallied per username, client address and throttle window (refused-logins.ts).
   */
  @Column({ type: 'integer', default: 1 })
  count: number;

  /** Terminal sessions: what the session was and, on its end row, how it ended (JSON; never input or output). */
  @Column({ type: 'text', nullable: true })
  detail: string | null;

  /** A terminal session's end row with CAS_EXEC_RECORDING=output: its output as asciicast v2 (≤ 1 MiB). */
  @Column({ type: 'text', nullable: true, select: false })
  recording?: string | null;
}
