import { Column, Entity, PrimaryColumn } from 'typeorm';

/** Failed-login counters in a fixed window, one row per username or client address. */
@Entity('login_throttle')
export class LoginThrottleEntity {
  /** `u:<username lower-cased>` or `a:<client address>`. */
  @PrimaryColumn({ type: 'varchar', length: 200 })
  key: string;

  @Column({ type: 'integer' })
  failures: number;

  @Column({ name: 'window_started_at', type: Date })
  windowStartedAt: Date;
}
