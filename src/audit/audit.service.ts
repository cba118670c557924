import { BadRequestException, Inject, NotFoundException, Injectable, Logger, OnModuleDestroy } from '@nestjs/common';
import { InjectRepository } from '@nestjs/typeorm';
import { Brackets, LessThan, Repository, type WhereExpressionBuilder } from 'typeorm';
import { APP_CONFIG, type AppConfig } from '../config/config.js';
import type { AuditEventDto, AuditEventListDto, ListAuditEventsQueryDto } from './dto/audit.dto.js';
import { AuditEventEntity } from './audit-event.entity.js';
import { type AuditRow, isRefusedLogin } from './audit-row.js';
import { RefusedLoginTally } from './refused-logins.js';

/** Rows written by one INSERT. */
const BATCH_SIZE = 200;
/**
 * How long the writer lets rows gather before an INSERT: one transaction (one fsync on SQLite, whose
 * driver blocks the event loop while it commits) for every call in that window, not one per call.
 */
const GATHER_MS = 100;
/**
 * Rows waiting while the database is slow or down; beyond this a new row takes the place of a queued
 * tally of refused logins, or, when there is none, is dropped (and the loss logged).
 */
const MAX_QUEUED = 10_000;

/** The row's properties in column order, and the columns they go to. */
const ROW_KEYS = [
  'at',
  'actorKind',
  'actorId',
  'actorName',
  'actorKey',
  'clientAddress',
  'operation',
  'method',
  'statusCode',
  'requestId',
  'targetKind',
  'targetId',
  'cluster',
  'resource',
  'namespace',
  'name',
  'uid',
  'resourceVersion',
  'count',
  'detail',
  'recording',
] as const satisfies ReadonlyArray<keyof AuditRow>;
const COLUMNS = ROW_KEYS.map((key) => `"${key.replace(/[A-Z]/g, (c) => '_' + c.toLowerCase())}"`).join(', ');

export function toAuditEventResponse(e: AuditEventEntity): AuditEventDto {
  return {
    id: e.id,
    at: e.at.toISOString(),
    actor: { kind: e.actorKind, id: e.actorId, name: e.actorName },
    clientAddress: e.clientAddress,
    operation: e.operation,
    method: e.method,
    statusCode: e.statusCode,
    requestId: e.requestId,
    target: {
      kind: e.targetKind,
      id: e.targetId,
      cluster: e.cluster,
      resource: e.resource,
      namespace: e.namespace,
      name: e.name,
    },
    uid: e.uid,
    resourceVersion: e.resourceVersion,
    count: e.count,
    detail: e.detail ? (JSON.parse(e.detail) as Record<string, unknown>) : null,
  };
}

/**
 * The `status` filter as SQL: each entry an exact code (`404`) or a class (`4xx`, a range, so the
 * status index serves it), any of them. The entries are validated digits, bound as parameters all the same.
 */
function statusCondition(filter: string): Brackets {
  return new Brackets((where: WhereExpressionBuilder) => {
    filter.split(',').forEach((entry, i) => {
      const digit = Number(entry[0]);
      if (/x/i.test(entry)) {
        where.orWhere(`(e.status_code >= :lo${i} AND e.status_code < :hi${i})`, {
          [`lo${i}`]: digit * 100,
          [`hi${i}`]: digit * 100 + 100,
        });
      } else {
        where.orWhere(`e.status_code = :code${i}`, { [`code${i}`]: Number(entry) });
      }
    });
  });
}

/**
 * Stores audit rows after the response has gone: `record()` only queues; a writer inserts what has
 * queued up in batches. A failed insert is logged and never reaches the caller.
 */
@Injectable()
export class AuditService implements OnModuleDestroy {
  private readonly logger = new Logger(AuditService.name);
  private queue: AuditRow[] = [];
  private writing?: Promise<void>;
  private dropped = 0;
  private wake?: () => void;
  private readonly refusedLogins: RefusedLoginTally;
  private tallyTimer?: NodeJS.Timeout;
  private tallyDue = Infinity;

  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    @InjectRepository(AuditEventEntity) private readonly events: Repository<AuditEventEntity>,
  ) {
    this.refusedLogins = new RefusedLoginTally(config.loginThrottle.windowSeconds * 1000);
  }

  record(row: AuditRow): void {
    if (isRefusedLogin(row)) {
      this.scheduleTallies(this.refusedLogins.add(row));
      return;
    }
    this.enqueue([row]);
  }

  /** Resolves once every row recorded so far is stored (or its failure logged), tallies of refused logins included. */
  async flush(): Promise<void> {
    this.enqueue(this.refusedLogins.take());
    while (this.writing) {
      this.wake?.();
      await this.writing;
    }
  }

  async onModuleDestroy(): Promise<void> {
    clearTimeout(this.tallyTimer);
    await this.flush();
  }

  private enqueue(rows: AuditRow[]): void {
    for (const row of rows) {
      if (this.queue.length >= MAX_QUEUED && !this.evictTally()) {
        this.dropped++;
        continue;
      }
      this.queue.push(row);
    }
    this.kick();
  }

  /** A full queue gives up a tally of refused logins (newest first) rather than a row of a real call. */
  private evictTally(): boolean {
    for (let i = this.queue.length - 1; i >= 0; i--) {
      if (isRefusedLogin(this.queue[i])) {
        this.queue.splice(i, 1);
        this.dropped++;
        return true;
      }
    }
    return false;
  }

  /** Writes the tallies of ended windows when the earliest one ends. */
  private scheduleTallies(due: number): void {
    if (due >= this.tallyDue) return;
    clearTimeout(this.tallyTimer);
    this.tallyDue = due;
    this.tallyTimer = setTimeout(
      () => {
        this.tallyDue = Infinity;
        this.enqueue(this.refusedLogins.take(Date.now()));
        const next = this.refusedLogins.nextDue();
        if (next !== undefined) this.scheduleTallies(next);
      },
      Math.max(0, due - Date.now()),
    );
    this.tallyTimer.unref();
  }

  private kick(): void {
    if (this.writing || this.queue.length === 0) return;
    this.writing = this.writeQueued().finally(() => {
      this.writing = undefined;
      this.kick();
    });
  }

  private async writeQueued(): Promise<void> {
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, GATHER_MS);
      this.wake = () => {
        clearTimeout(timer);
        resolve();
      };
    });
    this.wake = undefined;
    while (this.queue.length > 0) {
      const batch = this.queue.splice(0, BATCH_SIZE);
      if (this.config.audit.log === 'stdout') this.mirror(batch);
      try {
        await this.insert(batch);
      } catch (error) {
        this.logger.error(`could not store ${batch.length} audit events: ${(error as Error).message}`);
      }
    }
    if (this.dropped > 0) {
      this.logger.error(`${this.dropped} audit events were dropped: the database did not keep up`);
      this.dropped = 0;
    }
  }

  /**
   * One multi-row INSERT in plain SQL: TypeORM's entity insert costs far more CPU per row,
   * which on SQLite (a synchronous driver) would stall every request while a batch is written.
   */
  private async insert(batch: AuditRow[]): Promise<void> {
    const sqlite = this.events.manager.connection.options.type === 'better-sqlite3';
    const values: unknown[] = [];
    const tuples = batch.map((row) => {
      const start = values.length;
      for (const key of ROW_KEYS) {
        const value = row[key] ?? null;
        values.push(value instanceof Date && sqlite ? value.toISOString().replace('T', ' ').replace('Z', '') : value);
      }
      return '(' + ROW_KEYS.map((_, i) => (sqlite ? '?' : `$${start + i + 1}`)).join(', ') + ')';
    });
    await this.events.query(`INSERT INTO "audit_events" (${COLUMNS}) VALUES ${tuples.join(', ')}`, values);
  }

  /** CAS_AUDIT_LOG=stdout: one JSON line per row, whatever LOG_LEVEL says. */
  private mirror(batch: AuditRow[]): void {
    const lines = batch.map((row) =>
      JSON.stringify({ audit: toAuditEventResponse({ id: 0, ...row } as AuditEventEntity) }),
    );
    process.stdout.write(lines.join('\n') + '\n');
  }

  async listAuditEvents(query: ListAuditEventsQueryDto): Promise<AuditEventListDto> {
    const since = query.since ? new Date(query.since) : undefined;
    const until = query.until ? new Date(query.until) : undefined;
    if (since && until && since.getTime() >= until.getTime()) {
      throw new BadRequestException(['since must be earlier than until']);
    }
    const qb = this.events.createQueryBuilder('e');
    if (query.actor) qb.andWhere('e.actor_key = :actor', { actor: query.actor.toLowerCase() });
    if (query.operation) qb.andWhere('e.operation = :operation', { operation: query.operation });
    if (query.cluster) qb.andWhere('e.cluster = :cluster', { cluster: query.cluster });
    if (query.resource) qb.andWhere('e.resource = :resource', { resource: query.resource });
    if (query.namespace) qb.andWhere('e.namespace = :namespace', { namespace: query.namespace });
    if (query.name) qb.andWhere('e.name = :name', { name: query.name });
    if (query.status) qb.andWhere(statusCondition(query.status));
    if (since) qb.andWhere('e.at >= :since', { since });
    if (until) qb.andWhere('e.at < :until', { until });
    const [events, total] = await qb
      .orderBy('e.at', 'DESC')
      .addOrderBy('e.id', 'DESC')
      .offset((query.page - 1) * query.size)
      .limit(query.size)
      .getManyAndCount();
    return { events: events.map(toAuditEventResponse), total, page: query.page, size: query.size };
  }

  /** A terminal session's recording (asciicast v2), by the id of its end row: 404 when there is none. */
  async getRecording(id: number): Promise<string> {
    const row = await this.events
      .createQueryBuilder('e')
      .select('e.id')
      .addSelect('e.recording')
      .where('e.id = :id', { id })
      .getOne();
    if (!row) throw new NotFoundException(`audit event ${id} not found`);
    if (!row.recording) throw new NotFoundException(`audit event ${id} has no recording`);
    return row.recording;
  }

  /** Deletes rows older than the retention (their recordings with them); returns how many. */
  async prune(now = new Date()): Promise<number> {
    const cutoff = new Date(now.getTime() - this.config.audit.retentionDays * 86_400_000);
    const result = await this.events.delete({ at: LessThan(cutoff) });
    return result.affected ?? 0;
  }
}
