import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { waitFor } from '../harness/control-plane.js';
import { closedPort } from '../support/kubeconfigs.js';

/** The service as a real process at LOG_LEVEL=info: what it writes to standard output, line by line. */
describe('the request log', () => {
  test('one line per request: request id, method, path without its query, status, time; no secret', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'cas-request-log-'));
    const port = await closedPort();
    const base = `http://127.0.0.1:${port}`;
    const child = spawn(process.execPath, ['build/src/main.js'], {
      env: {
        PATH: process.env.PATH,
        PORT: String(port),
        HOST: '127.0.0.1',
        CAS_DATA_DIR: dir,
        LOG_LEVEL: 'info', // the embedded SQLite database: the line does not depend on the database
      },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let output = '';
    child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
    const exited = new Promise((resolve) => child.once('exit', resolve));
    try {
      await waitFor('the service to listen', async () => {
        if (child.exitCode !== null) throw new Error(`the service exited: ${output.slice(-2000)}`);
        return (await fetch(`${base}/readyz`).catch(() => undefined))?.ok;
      });
      const healthz = await fetch(`${base}/healthz`, { headers: { 'x-request-id': 'log-healthz-1' } });
      assert.equal(healthz.status, 200);
      const refused = await fetch(`${base}/api/v1/admin/users?search=query-secret-1`, {
        headers: { 'x-request-id': 'log-refused-1', authorization: 'Bearer header-secret-1' },
      });
      assert.equal(refused.status, 401);
    } finally {
      child.kill('SIGTERM'); // what is still batched is written at exit
      await exited;
      await rm(dir, { recursive: true, force: true });
    }

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
    assert.equal(health.pid, child.pid);
    const [denied] = lineOf('log-refused-1');
    assert.equal(lineOf('log-refused-1').length, 1, output);
    assert.equal(denied.path, '/api/v1/admin/users');
    assert.equal(denied.statusCode, 401);
    assert.ok(!output.includes('query-secret-1'), 'the query is in the log');
    assert.ok(!output.includes('header-secret-1'), 'the credential is in the log');
  });
});
