// Database: runs on PostgreSQL too: a drain with the database open.
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { kubeRequest, sharedControlPlane, waitFor, type ControlPlane } from '../harness/control-plane.js';
import { createPostgresDatabase, onPostgres } from '../support/app.js';
import { kubeconfigFor } from '../support/clusters.js';
import { startServiceProcess, type ServiceProcess } from '../support/service-process.js';

describe('SIGTERM while a waited delete is in flight', () => {
  let cp: ControlPlane;
  let service: ServiceProcess;
  let dataDir: string;
  let drop: (() => Promise<void>) | undefined;
  const ns = `term-${process.pid}`;
  const api: ServiceProcess['api'] = (...args) => service.api(...args);

  before(async () => {
    cp = await sharedControlPlane('a');
    await kubeRequest(cp, 'POST', '/api/v1/namespaces', { metadata: { name: ns } });
    dataDir = await mkdtemp(join(tmpdir(), 'cas-term-'));
    let databaseUrl = `sqlite:${join(dataDir, 'cas.sqlite')}`;
    if (onPostgres) ({ url: databaseUrl, drop } = await createPostgresDatabase());
    service = await startServiceProcess({
      CAS_DATA_DIR: dataDir,
      DATABASE_URL: databaseUrl,
      CAS_BOOTSTRAP_USERNAME: 'admin',
      CAS_BOOTSTRAP_PASSWORD: 'admin-password-1',
    });
  });
  after(async () => {
    if (service.child.exitCode === null) service.child.kill('SIGKILL');
    await kubeRequest(cp, 'DELETE', `/api/v1/namespaces/${ns}`);
    await drop?.();
    await rm(dataDir, { recursive: true, force: true });
  });

  test('the request completes, new requests get a clean 503, the process exits 0', async () => {
    const token = (
      await api('POST', '/api/v1/auth/login', { body: { username: 'admin', password: 'admin-password-1' } })
    ).body.token;
    assert.equal(
      (await api('POST', '/api/v1/admin/clusters', { token, body: { name: 'alpha', config: kubeconfigFor(cp) } }))
        .status,
      201,
    );
    await kubeRequest(cp, 'POST', `/api/v1/namespaces/${ns}/configmaps`, {
      metadata: { name: 'held', finalizers: ['example.com/hold'] },
    });

    const waited = api('DELETE', `/api/v1/configmaps/${ns}/held?timeoutSeconds=30`, { token, cluster: 'alpha' });
    await waitFor(
      'the delete to reach the cluster',
      async () =>
        (await kubeRequest(cp, 'GET', `/api/v1/namespaces/${ns}/configmaps/held`)).body.metadata?.deletionTimestamp,
    );
    service.child.kill('SIGTERM');
    await new Promise((r) => setTimeout(r, 300));
    const late = await api('GET', '/api/v1/auth/me', { token }).catch(() => ({ status: 0 }));
    assert.ok(late.status === 503 || late.status === 0, `a new request while draining got ${late.status}`);
    assert.equal(service.child.exitCode, null, 'still running while the delete waits');

    await kubeRequest(
      cp,
      'PATCH',
      `/api/v1/namespaces/${ns}/configmaps/held`,
      { metadata: { finalizers: null } },
      { contentType: 'application/merge-patch+json' },
    );
    const res = await waited;
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.equal(await service.exited, 0);
  });
});
