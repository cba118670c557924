import { Column, Entity, PrimaryColumn } from 'typeorm';

/**
 * Named lock rows. A transaction that updates a row holds it until commit (PostgreSQL row lock;
 * SQLite's write lock), which serialises invariants spanning many rows: one super user, the last
 * admin, the one default cluster.
 */
@Entity('app_locks')
export class AppLockEntity {
  @PrimaryColumn({ type: 'varchar', length: 64 })
  name: string;

  @Column({ type: 'integer', default: 0 })
  version: number;
}
