// Issue 29 (security, round 3): the findings that need no cluster. Each test fails on the code
// before its fix.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { AuditEventEntity } from '../../src/audit/audit-event.entity.js';
import { AuditService } from '../../src/audit/audit.service.js';
import { startTestApp, type TestApp } from '../support/app.js';
import { createUser } from '../support/factories.js';
import { request } from '../support/http.js';

async function auditRows(t: TestApp): Promise<AuditEventEntity[]> {
  await t.app.get(AuditService).flush();
  return t.dataSource.getRepository(AuditEventEntity).find({ order: { id: 'ASC' } });
}

describe('CAS_TRUST_PROXY=1: only the proxy in front is believed (#8)', () => {
  let t: TestApp;
  before(async () => {
    t = await startTestApp({ env: { CAS_TRUST_PROXY: '1' } });
  });
  after(() => t.close());

  test('a forged leading X-Forwarded-For entry is not the recorded address; the proxy-appended one is', async () => {
    const user = await createUser(t);
    const res = await request(t.app, 'POST', '/api/v1/auth/login', {
      body: { username: user.username, password: 'not-the-password' },
      // The client wrote the first entry; the proxy in front appended the address it saw.
      headers: { 'x-forwarded-for': '203.0.113.66, 198.51.100.7' },
    });
    assert.equal(res.status, 401);
    const row = (await auditRows(t)).find((r) => r.operation === 'login' && r.actorName === user.username);
    assert.equal(row?.clientAddress, '198.51.100.7');
  });
});
