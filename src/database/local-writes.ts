import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import type {
  DataSource,
  EntitySubscriberInterface,
  InsertEvent,
  QueryRunner,
  RemoveEvent,
  TransactionCommitEvent,
  UpdateEvent,
} from 'typeorm';

export type WriteKind = 'insert' | 'update' | 'remove';

/** Which writes a listener cares about; by default, all of them. */
export type WriteFilter = (table: string, kind: WriteKind) => boolean;

/**
 * The one path by which in-process caches learn that *this* replica wrote to the database: every
 * insert, update or delete made through TypeORM (repositories, query builders, transactions) calls the
 * listeners that care about it at once, and again when the transaction that made it commits, so a
 * reader racing the commit cannot keep the old state. Writes of other replicas reach the caches through their own time
 * bound (≤ 1 s). Writes made with hand-written SQL (`runSql`) are not seen: use it only for tables no
 * cache reads (throttle counters, leases, "last seen" times).
 */
@Injectable()
export class LocalWrites implements EntitySubscriberInterface {
  private readonly listeners = new Map<() => void, WriteFilter>();
  /** Listeners called during a transaction, called again when it commits. */
  private readonly pending = new WeakMap<QueryRunner, Set<() => void>>();

  constructor(@InjectDataSource() dataSource: DataSource) {
    dataSource.subscribers.push(this);
  }

  /** Calls `listener` after every write through this replica that `filter` accepts. */
  subscribe(listener: () => void, filter: WriteFilter = () => true): void {
    this.listeners.set(listener, filter);
  }

  afterInsert(event: InsertEvent<unknown>): void {
    this.wrote(event.metadata.tableName, 'insert', event.queryRunner);
  }

  afterUpdate(event: UpdateEvent<unknown>): void {
    this.wrote(event.metadata.tableName, 'update', event.queryRunner);
  }

  afterRemove(event: RemoveEvent<unknown>): void {
    this.wrote(event.metadata.tableName, 'remove', event.queryRunner);
  }

  afterTransactionCommit(event: TransactionCommitEvent): void {
    const listeners = this.pending.get(event.queryRunner);
    if (!listeners) return;
    this.pending.delete(event.queryRunner);
    for (const listener of listeners) listener();
  }

  private wrote(table: string, kind: WriteKind, queryRunner: QueryRunner | undefined): void {
    for (const [listener, filter] of this.listeners) {
      if (!filter(table, kind)) continue;
      listener();
      if (queryRunner?.isTransactionActive) {
        let listeners = this.pending.get(queryRunner);
        if (!listeners) this.pending.set(queryRunner, (listeners = new Set()));
        listeners.add(listener);
      }
    }
  }
}
