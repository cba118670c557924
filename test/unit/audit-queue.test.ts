// Issue 29 #7: refused logins are tallied (one row per username, address, status and window), and a
// full write queue gives up a tally, never a row of a real call.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Repository } from 'typeorm';
import type { AuditEventEntity } from '../../src/audit/audit-event.entity.js';
import type { AuditRow } from '../../src/audit/audit-row.js';
import { AuditService } from '../../src/audit/audit.service.js';
import { MAX_TALLIES, RefusedLoginTally, TALLIED_NAMES_PER_ADDRESS } from '../../src/audit/refused-logins.js';
import { loadConfig } from '../../src/config/config.js';

const AT = new Date('2026-11-25T10:00:00.000Z');

function row(overrides: Partial<AuditRow> = {}): AuditRow {
  return {
    at: AT,
    actorKind: 'user',
    actorId: 7,
    actorName: 'alice',
    actorKey: 'alice',
    clientAddress: '192.0.2.1',
    operation: 'createUser',
    method: 'POST',
    statusCode: 201,
    requestId: 'r',
    targetKind: null,
    targetId: null,
    cluster: null,
    resource: null,
    namespace: null,
    name: null,
    uid: null,
    resourceVersion: null,
    count: 1,
    ...overrides,
  };
}

const refused = (username: string, address = '192.0.2.9', statusCode = 429, at = AT) =>
  row({
    at,
    actorId: null,
    actorName: username,
    actorKey: username.toLowerCase(),
    clientAddress: address,
    operation: 'login',
    statusCode,
  });

describe('refused-login tallies', () => {
  test('one row per username, address, status and window, with the count; bounded per address and in all', () => {
    const tally = new RefusedLoginTally(900_000);
    for (let i = 0; i < 50; i++) tally.add(refused('Victim'));
    tally.add(refused('victim', '192.0.2.9', 503));
    for (let i = 0; i < 30; i++) tally.add(refused(`name-${i}`));
    tally.add(refused('victim', '192.0.2.9', 429, new Date(AT.getTime() + 900_000)));
    const now = tally.take(AT.getTime() + 900_000);
    // 'Victim' (50), 9 more named, one shared row for the other 21 names; the 503 apart.
    assert.equal(now.length, TALLIED_NAMES_PER_ADDRESS + 2);
    assert.equal(now.find((r) => r.actorKey === 'victim' && r.statusCode === 429)?.count, 50);
    assert.equal(now.find((r) => r.actorKey === 'victim' && r.statusCode === 503)?.count, 1);
    const shared = now.find((r) => r.actorKey === null)!;
    assert.deepEqual([shared.count, shared.actorKind, shared.clientAddress], [21, 'anonymous', '192.0.2.9']);
    assert.equal(
      now.reduce((sum, r) => sum + r.count, 0),
      81,
    );
    assert.equal(tally.take().length, 1, 'the next window stays until it ends (or everything is taken)');

    const full = new RefusedLoginTally(900_000);
    for (let i = 0; i < MAX_TALLIES + 500; i++) full.add(refused('x', `10.0.${i >> 8}.${i & 255}`));
    const rows = full.take();
    assert.equal(rows.length, MAX_TALLIES + 1);
    assert.deepEqual(
      rows.filter((r) => r.clientAddress === null).map((r) => r.count),
      [500],
    );
  });

  test('a full write queue gives up a tally of refused logins for a real row', async () => {
    const released: Array<() => void> = [];
    const inserted: unknown[][] = [];
    const events = {
      manager: { connection: { options: { type: 'postgres' } } },
      query: (_sql: string, values: unknown[]) => {
        inserted.push(values);
        return new Promise<void>((resolve) => released.push(resolve));
      },
    } as unknown as Repository<AuditEventEntity>;
    const audit = new AuditService(loadConfig({}), events);
    const queue = (audit as unknown as { queue: AuditRow[] }).queue;
    audit.record(row({ requestId: 'first' }));
    await sleep(150); // the writer took it and now hangs on the database
    assert.equal(inserted.length, 1);
    for (let i = 0; i < 5; i++) audit.record(refused(`guess-${i}`));
    const flushed = audit.flush(); // the tallies join the queue
    assert.equal(queue.length, 5);
    for (let i = 0; i < 9_995; i++) audit.record(row({ requestId: `real-${i}` }));
    assert.equal(queue.length, 10_000);
    for (let i = 0; i < 3; i++) audit.record(row({ requestId: `late-${i}` }));
    assert.equal(queue.length, 10_000);
    assert.equal(queue.filter((r) => r.operation === 'login').length, 2, 'three tallies gave way');
    assert.ok(queue.some((r) => r.requestId === 'late-2') && queue.some((r) => r.requestId === 'real-0'));
    // Let the writer drain (each INSERT answers at once from now on).
    const drain = setInterval(() => released.splice(0).forEach((resolve) => resolve()), 5);
    await flushed;
    clearInterval(drain);
    released.splice(0).forEach((resolve) => resolve());
  });
});
