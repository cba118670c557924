import { Injectable } from '@nestjs/common';
import { InjectRepository } from '@nestjs/typeorm';
import { randomUUID } from 'node:crypto';
import { Repository } from 'typeorm';
import { isUniqueViolation } from './transactions.js';
import { LeaseEntity } from './lease.entity.js';

/**
 * Leader election through the database: work that must run once across all replicas (background
 * health polling) runs on whichever replica holds its lease. Taking or renewing is one conditional
 * UPDATE, atomic on SQLite and PostgreSQL alike; a holder that stops renewing loses the lease when
 * it expires.
 */
@Injectable()
export class Leases {
  /** This process, as a lease holder. */
  readonly holderId = randomUUID();

  constructor(@InjectRepository(LeaseEntity) private readonly leases: Repository<LeaseEntity>) {}

  /** Takes or renews the lease for `ttlMs`; true when this replica holds it now. */
  async acquire(name: string, ttlMs: number): Promise<boolean> {
    const now = new Date();
    const result = await this.leases
      .createQueryBuilder()
      .update(LeaseEntity)
      .set({ holder: this.holderId, expiresAt: new Date(now.getTime() + ttlMs) })
      .where('name = :name', { name })
      .andWhere('(holder = :me OR holder IS NULL OR expires_at < :now)', { me: this.holderId, now })
      .execute();
    if (result.affected === 1) return true;
    if (await this.leases.existsBy({ name })) return false;
    try {
      await this.leases.insert({ name, holder: this.holderId, expiresAt: new Date(now.getTime() + ttlMs) });
      return true;
    } catch (error) {
      if (isUniqueViolation(error)) return false; // another replica created it first
      throw error;
    }
  }

  /** Until when some replica holds the lease, or null when none does now (expired, given up or never taken). */
  async heldUntil(name: string): Promise<Date | null> {
    const lease = await this.leases.findOneBy({ name });
    if (lease === null || lease.holder === null || lease.expiresAt.getTime() <= Date.now()) return null;
    return lease.expiresAt;
  }

  /** Deletes leases named `<prefix>…` that expired before `before` (a replica's own leases, left by a replica gone). */
  async prune(prefix: string, before: Date): Promise<void> {
    await this.leases
      .createQueryBuilder()
      .delete()
      .from(LeaseEntity)
      .where('name LIKE :prefix', { prefix: `${prefix}%` })
      .andWhere('expires_at < :before', { before })
      .execute();
  }

  /** Gives the lease up (at shutdown), so another replica can take over at once. */
  async release(name: string): Promise<void> {
    await this.leases.update({ name, holder: this.holderId }, { holder: null });
  }
}
