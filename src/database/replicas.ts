import { Inject, Injectable, Logger, type OnApplicationBootstrap, type OnModuleDestroy } from '@nestjs/common';
import { InjectRepository } from '@nestjs/typeorm';
import { randomBytes } from 'node:crypto';
import { LessThan, Repository } from 'typeorm';
import { APP_CONFIG, type AppConfig } from '../config/config.js';
import { ReplicaEntity } from './replica.entity.js';

/** How long a registration holds without renewal, and how often it is renewed. */
const TTL_MS = 30_000;
const RENEW_MS = 10_000;
/** Registrations expired this long are deleted by whichever replica renews. */
const FORGET_MS = 60 * 60_000;

/**
 * The replicas of the service as they know each other through the database: each registers its
 * internal address (CAS_REPLICA_URL) under an id of its own, renewed while it runs, so that a
 * resumption of a terminal session that lands on another replica can be forwarded to the one holding
 * it. A replica that stops renewing (killed) is gone once its registration expires; one that stops
 * cleanly deletes it.
 */
@Injectable()
export class Replicas implements OnApplicationBootstrap, OnModuleDestroy {
  /** This process, as the ids of the terminal sessions it holds name it (8 base64url characters). */
  readonly id = randomBytes(6).toString('base64url');
  private readonly logger = new Logger(Replicas.name);
  private timer?: NodeJS.Timeout;

  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    @InjectRepository(ReplicaEntity) private readonly replicas: Repository<ReplicaEntity>,
  ) {}

  async onApplicationBootstrap(): Promise<void> {
    if (!this.config.exec.replicaUrl) return;
    await this.renew();
    this.timer = setInterval(() => {
      this.renew().catch((error: Error) =>
        this.logger.warn(`renewing this replica's address failed: ${error.message}`),
      );
    }, RENEW_MS).unref();
  }

  /** The address of a replica whose registration holds, or null (unknown, or gone). */
  async urlOf(id: string): Promise<string | null> {
    const row = await this.replicas.findOneBy({ id });
    return row && row.expiresAt.getTime() > Date.now() ? row.url : null;
  }

  async onModuleDestroy(): Promise<void> {
    clearInterval(this.timer);
    if (this.timer) await this.replicas.delete({ id: this.id }).catch(() => undefined);
  }

  private async renew(): Promise<void> {
    const now = Date.now();
    await this.replicas.upsert({ id: this.id, url: this.config.exec.replicaUrl!, expiresAt: new Date(now + TTL_MS) }, [
      'id',
    ]);
    await this.replicas.delete({ expiresAt: LessThan(new Date(now - FORGET_MS)) });
  }
}
