import { Column, Entity, PrimaryColumn } from 'typeorm';

/** A named lease held by one replica until it expires; the holder renews it while it works. */
@Entity('leases')
export class LeaseEntity {
  @PrimaryColumn({ type: 'varchar', length: 64 })
  name: string;

  @Column({ type: 'varchar', length: 64, nullable: true })
  holder: string | null;

  @Column({ name: 'expires_at', type: Date })
  expiresAt: Date;
}
