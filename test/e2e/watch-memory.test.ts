import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { kubeRequest, sharedControlPlane, waitFor, type ControlPlane } from '../harness/control-plane.js';
import { createPostgresDatabase, onPostgres } from '../support/app.js';
import { kubeconfigFor } from '../support/clusters.js';
import { closedPort } from '../support/kubeconfigs.js';
import { openWatch, type WatchClient } from './watch-client.js';

/** Resident memory of a process, from the kernel. */
function rssBytes(pid: number): number {
  const line = readFileSync(`/proc/${pid}/status`, 'utf8')
    .split('\n')
    .find((l) => l.startsWith('VmRSS:'));
  return Number(/(\d+)/.exec(line ?? '')?.[1] ?? 0) * 1024;
}

const MIB = 1024 * 1024;

describe('1,000 idle SSE subscribers on one shared watch, in a real service process; then SIGTERM', () => {
  let cp: ControlPlane;
  let child: ChildProcess;
  let dataDir: string;
  let drop: (() => Promise<void>) | undefined;
  let base: string;
  let token: string;
  const ns = `watchmem-${process.pid}`;
  const clients: WatchClient[] = [];

  before(async () => {
    cp = await sharedControlPlane('a');
    await kubeRequest(cp, 'POST', '/api/v1/namespaces', { metadata: { name: ns } });
    dataDir = await mkdtemp(join(tmpdir(), 'cas-watchmem-'));
    let databaseUrl = `sqlite:${join(dataDir, 'cas.sqlite')}`;
    if (onPostgres) ({ url: databaseUrl, drop } = await createPostgresDatabase());
    const port = await closedPort();
    base = `http://127.0.0.1:${port}`;
    child = spawn(process.execPath, ['build/src/main.js'], {
      env: {
        ...process.env,
        PORT: String(port),
        HOST: '127.0.0.1',
        CAS_DATA_DIR: dataDir,
        DATABASE_URL: databaseUrl,
        LOG_LEVEL: 'warn',
        CAS_BOOTSTRAP_USERNAME: 'admin',
        CAS_BOOTSTRAP_PASSWORD: 'admin-password-1',
        CAS_WATCH_MAX_STREAMS_PER_CALLER: '2000',
        CAS_MAX_CONNECTIONS_PER_ADDRESS: '0', // all 1,000 subscribers come from this one address
        CAS_SHUTDOWN_GRACE_SECONDS: '60',
      },
      stdio: ['ignore', 'inherit', 'inherit'],
    });
    await waitFor(
      'the service to listen',
      async () => (await fetch(`${base}/readyz`).catch(() => undefined))?.ok,
      30_000,
      200,
    );
    const login = await fetch(`${base}/api/v1/auth/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ username: 'admin', password: 'admin-password-1' }),
    });
    token = ((await login.json()) as { token: string }).token;
    const registered = await fetch(`${base}/api/v1/admin/clusters`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
      body: JSON.stringify({ name: 'alpha', config: kubeconfigFor(cp) }),
    });
    assert.equal(registered.status, 201);
  });
  after(async () => {
    for (const client of clients) client.close();
    if (child.exitCode === null) child.kill('SIGKILL');
    await kubeRequest(cp, 'DELETE', `/api/v1/namespaces/${ns}`);
    await drop?.();
    await rm(dataDir, { recursive: true, force: true });
  });

  test('they add at most 100 MiB of resident memory; every one is live; SIGTERM ends them all and the process exits 0 at once', async () => {
    const path = `/api/v1/configmaps/${ns}?watch=true&labelSelector=case%3Dmem`;
    // Warm up the code paths (and the shared watch) before measuring.
    const warm = await Promise.all(Array.from({ length: 20 }, () => openWatch(base, path, { token, sse: true })));
    for (const w of warm) w.close();
    await new Promise((r) => setTimeout(r, 1000));
    const baseline = rssBytes(child.pid!);

    for (let batch = 0; batch < 10; batch++) {
      const opened = await Promise.all(Array.from({ length: 100 }, () => openWatch(base, path, { token, sse: true })));
      clients.push(...opened);
    }
    assert.equal(clients.filter((c) => c.status === 200).length, 1000);
    await Promise.all(clients.map((c) => c.until(() => c.positions.length === 1, 30_000, 'the stream to run')));
    await new Promise((r) => setTimeout(r, 2000));
    const loaded = rssBytes(child.pid!);
    const added = loaded - baseline;
    console.log(
      `# RSS of the service: ${(baseline / MIB).toFixed(1)} MiB before, ${(loaded / MIB).toFixed(1)} MiB with 1,000 idle ` +
        `SSE subscribers: +${(added / MIB).toFixed(1)} MiB (${Math.round(added / 1000 / 1024)} KiB each)`,
    );
    assert.ok(added <= 100 * MIB, `1,000 subscribers added ${(added / MIB).toFixed(1)} MiB`);

    // All of them are live subscribers of the one shared watch.
    const sent = Date.now();
    await kubeRequest(cp, 'POST', `/api/v1/namespaces/${ns}/configmaps`, {
      metadata: { name: 'ping', labels: { case: 'mem' } },
    });
    await Promise.all(clients.map((c) => c.until((e) => e.length >= 1, 30_000, 'the ping')));
    console.log(`# one event reached all 1,000 subscribers in ${Date.now() - sent} ms`);
    assert.ok(clients.every((c) => c.events[0].type === 'ADDED' && c.events[0].object.metadata.name === 'ping'));

    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    const terminated = Date.now();
    child.kill('SIGTERM');
    const clean = await Promise.all(clients.map((c) => c.ended));
    const code = await exited;
    const took = Date.now() - terminated;
    console.log(`# SIGTERM: 1,000 streams closed and the process exited in ${took} ms (grace period 60 s)`);
    assert.equal(code, 0);
    assert.ok(clean.every(Boolean), 'every stream ended cleanly (a client reconnects elsewhere)');
    assert.ok(took < 20_000, `shutdown took ${took} ms: streams must not hold it for the grace period`);
  });
});
