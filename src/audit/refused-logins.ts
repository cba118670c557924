import type { AuditRow } from './audit-row.js';

/** Usernames tallied on rows of their own per client address, status and window; the rest share one row. */
export const TALLIED_NAMES_PER_ADDRESS = 10;
/** Tallies one replica holds at once; past this, refusals share one row per status without name or address. */
export const MAX_TALLIES = 10_000;

/**
 * Logins refused before any password check (the throttle's 429, the hashing queue's 503) are
 * tallied, not stored one row each: they cost the caller nothing and carry a username it chooses, so
 * one row each would let an anonymous flood grow the audit table as fast as it can send.
 *
 * One row per (status, username, client address, throttle window) with a `count`. Per client address
 * and status, at most `TALLIED_NAMES_PER_ADDRESS` usernames get rows of their own and the others share
 * one row without a username; past `MAX_TALLIES` tallies held at once, refusals share one row per status
 * without username or address. So whatever its rate, a flood adds on each replica at most
 * 2 × (TALLIED_NAMES_PER_ADDRESS + 1) rows per client address and window, and at most
 * MAX_TALLIES + 2 rows per window in all. A window's rows are written when it ends, on `flush` and at
 * shutdown; each keeps the time and request id of its first refusal.
 */
export class RefusedLoginTally {
  /** Window start (epoch ms) → tally key → the row being counted. */
  private readonly windows = new Map<number, Map<string, AuditRow>>();
  /** Window start → `status address` → usernames with a row of their own. */
  private readonly namesPerAddress = new Map<number, Map<string, number>>();
  private size = 0;

  constructor(private readonly windowMs: number) {}

  /** Counts one refusal; returns the end of its window (epoch ms), when its rows are due. */
  add(row: AuditRow): number {
    const start = Math.floor(row.at.getTime() / this.windowMs) * this.windowMs;
    let tallies = this.windows.get(start);
    if (!tallies) {
      tallies = new Map();
      this.windows.set(start, tallies);
      this.namesPerAddress.set(start, new Map());
    }
    const names = this.namesPerAddress.get(start)!;
    const address = `${row.statusCode} ${row.clientAddress ?? ''}`;
    let key = `${address} ${row.actorKey ?? ''}`;
    let shared: Partial<AuditRow> | null = null;
    if (!tallies.has(key)) {
      if (this.size >= MAX_TALLIES) {
        key = `${row.statusCode} *`;
        shared = { actorName: null, actorKey: null, clientAddress: null };
      } else if ((names.get(address) ?? 0) >= TALLIED_NAMES_PER_ADDRESS) {
        key = `${address} *`;
        shared = { actorName: null, actorKey: null };
      } else if (row.actorKey !== null) {
        names.set(address, (names.get(address) ?? 0) + 1);
      }
    }
    const tally = tallies.get(key);
    if (tally) {
      tally.count++;
    } else {
      tallies.set(key, { ...row, ...shared, actorKind: shared ? 'anonymous' : row.actorKind, count: 1 });
      this.size++;
    }
    return start + this.windowMs;
  }

  /** Takes the rows of the windows that ended by `now` (every window when `now` is undefined). */
  take(now?: number): AuditRow[] {
    const rows: AuditRow[] = [];
    for (const [start, tallies] of this.windows) {
      if (now !== undefined && start + this.windowMs > now) continue;
      rows.push(...tallies.values());
      this.size -= tallies.size;
      this.windows.delete(start);
      this.namesPerAddress.delete(start);
    }
    return rows;
  }

  /** The end of the earliest window with tallies, or undefined when there are none. */
  nextDue(): number | undefined {
    let earliest: number | undefined;
    for (const start of this.windows.keys()) earliest = Math.min(earliest ?? Infinity, start + this.windowMs);
    return earliest;
  }
}
