import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { startServiceProcess } from '../support/service-process.js';

/** The service as a real process at LOG_LEVEL=info: what it writes to standard output, line by line. */
describe('the request log', () => {
  test('one line per request: request id, method, path without its query, status, time; no secret', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'cas-request-log-'));
    // The embedded SQLite database: the line does not depend on the database.
    const service = await startServiceProcess({ CAS_DATA_DIR: dir, DATABASE_URL: '', LOG_LEVEL: 'info' }, undefined, {
      captureStdout: true,
    });
    try {
      const healthz = await fetch(`${service.base}/healthz`, { headers: { 'x-request-id': 'log-healthz-1' } });
      assert.equal(healthz.status, 200);
      const refused = await fetch(`${service.base}/api/v1/admin/users?search=query-secret-1`, {
        headers: { 'x-request-id': 'log-refused-1', authorization: 'Bearer header-secret-1' },
      });
      assert.equal(refused.status, 401);
    } finally {
      service.child.kill('SIGTERM'); // what is still batched is written at exit
      await service.exited;
      await rm(dir, { recursive: true, force: true });
    }

    const output = service.stdout();
    const lines = output
      .split('\n')
      .filter((line) => line.startsWith('{'))
      .map((line) => JSON.parse(line) as Record<string, unknown>);
    const lineOf = (id: string) => lines.filter((line) => line.reqId === id);
    const [health] = lineOf('log-healthz-1');
    assert.equal(lineOf('log-healthz-1').length, 1, output);
    assert.deepEqual(
      { level: health.level, msg: health.msg, method: health.method, path: health.path, statusCode: health.statusCode },
      { level: 30, msg: 'request', method: 'GET', path: '/healthz', statusCode: 200 },
    );
    assert.equal(typeof health.ms, 'number');
    assert.equal(typeof health.time, 'number');
    assert.equal(health.pid, service.child.pid);
    const [denied] = lineOf('log-refused-1');
    assert.equal(lineOf('log-refused-1').length, 1, output);
    assert.equal(denied.path, '/api/v1/admin/users');
    assert.equal(denied.statusCode, 401);
    assert.ok(!output.includes('query-secret-1'), 'the query is in the log');
    assert.ok(!output.includes('header-secret-1'), 'the credential is in the log');
  });
});
