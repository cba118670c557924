import { Column, Entity, PrimaryColumn } from 'typeorm';

/** A running replica's internal address, registered while it runs (renewed; gone once it expires). */
@Entity('replicas')
export class ReplicaEntity {
  @PrimaryColumn({ type: 'varchar', length: 16 })
  id: string;

  @Column({ type: 'varchar', length: 512 })
  url: string;

  @Column({ name: 'expires_at', type: Date })
  expiresAt: Date;
}
