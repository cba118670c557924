import { Inject, Injectable, Logger, OnApplicationBootstrap, OnModuleDestroy } from '@nestjs/common';
import { APP_CONFIG, type AppConfig } from '../config/config.js';
import { Leases } from '../database/leases.js';
import { AuditService } from './audit.service.js';

/** Pruning runs on the one replica holding this lease. */
export const AUDIT_RETENTION_LEASE = 'audit-retention';
const PRUNE_INTERVAL_MS = 60 * 60 * 1000;

/** Deletes audit rows older than `CAS_AUDIT_RETENTION_DAYS`, hourly, on one replica (0 days: never). */
@Injectable()
export class AuditRetentionService implements OnApplicationBootstrap, OnModuleDestroy {
  private readonly logger = new Logger(AuditRetentionService.name);
  private timer?: NodeJS.Timeout;
  private running?: Promise<number | null>;
  private stopped = false;

  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly audit: AuditService,
    private readonly leases: Leases,
  ) {}

  onApplicationBootstrap(): void {
    if (this.config.audit.retentionDays === 0) return;
    this.timer = setInterval(() => void this.tick(), PRUNE_INTERVAL_MS).unref();
    void this.tick();
  }

  async onModuleDestroy(): Promise<void> {
    this.stopped = true;
    clearInterval(this.timer);
    await this.running;
    if (this.config.audit.retentionDays > 0) await this.leases.release(AUDIT_RETENTION_LEASE).catch(() => undefined);
  }

  /**
   * One round: prunes when this replica holds (or takes) the lease. Returns how many rows it deleted,
   * or null when another replica holds the lease (or retention is off). Never throws.
   */
  tick(): Promise<number | null> {
    if (this.config.audit.retentionDays === 0 || this.stopped) return Promise.resolve(null);
    if (this.running) return this.running;
    this.running = this.leases
      .acquire(AUDIT_RETENTION_LEASE, 2 * PRUNE_INTERVAL_MS + 60_000)
      .then((leader) => (leader ? this.audit.prune() : null))
      .catch((error: unknown) => {
        this.logger.warn(`pruning audit events failed: ${(error as Error).message}`);
        return null;
      })
      .finally(() => (this.running = undefined));
    return this.running;
  }
}
