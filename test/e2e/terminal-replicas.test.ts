// Database: runs on PostgreSQL too: terminal sessions across replicas sharing PostgreSQL.
// Issue 31: no stickiness. Two replicas (real processes) on one database: a session on each; A gets
// SIGTERM and ends its session with a status frame; B's session goes on untouched.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { kubeRequest, sharedControlPlane, type ControlPlane } from '../harness/control-plane.js';
import { startKubelet, type Kubelet } from '../harness/kubelet.js';
import { createPostgresDatabase, onPostgres } from '../support/app.js';
import { kubeconfigFor } from '../support/clusters.js';
import { startServiceProcess, type ServiceProcess } from '../support/service-process.js';
import { openTerminal, type TerminalClient } from '../support/terminal.js';

describe('terminal sessions on two replicas: no stickiness, SIGTERM ends only its own', () => {
  const ns = `term-rep-${process.pid}`;
  const nodeName = `term-rep-node-${process.pid}`;
  let cp: ControlPlane;
  let kubelet: Kubelet;
  let dataDir: string;
  let drop: (() => Promise<void>) | undefined;
  let a: ServiceProcess;
  let b: ServiceProcess;
  let token: string;

  before(async () => {
    cp = await sharedControlPlane('a');
    dataDir = await mkdtemp(join(tmpdir(), 'cas-term-rep-'));
    let databaseUrl = `sqlite:${join(dataDir, 'cas.sqlite')}`;
    if (onPostgres) ({ url: databaseUrl, drop } = await createPostgresDatabase());
    const env = {
      CAS_DATA_DIR: dataDir,
      DATABASE_URL: databaseUrl,
      CAS_ENCRYPTION_KEY: randomBytes(32).toString('base64'),
      CAS_BOOTSTRAP_USERNAME: 'admin',
      CAS_BOOTSTRAP_PASSWORD: 'admin-password-1',
      CAS_SHUTDOWN_GRACE_SECONDS: '5',
    };
    a = await startServiceProcess(env);
    b = await startServiceProcess(env);
    const login = await a.api('POST', '/api/v1/auth/login', {
      body: { username: 'admin', password: 'admin-password-1' },
    });
    token = login.body.token as string;
    const registered = await a.api('POST', '/api/v1/admin/clusters', {
      token,
      body: { name: 'alpha', config: kubeconfigFor(cp) },
    });
    assert.equal(registered.status, 201);
    await kubeRequest(cp, 'POST', '/api/v1/namespaces', { metadata: { name: ns } });
    kubelet = await startKubelet(cp, nodeName);
    const created = await kubeRequest(cp, 'POST', `/api/v1/namespaces/${ns}/pods`, {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: 'box', namespace: ns },
      spec: {
        nodeName,
        automountServiceAccountToken: false,
        containers: [{ name: 'app', image: 'example.invalid/never-pulled' }],
      },
    });
    assert.equal(created.status, 201, JSON.stringify(created.body));
  });

  after(async () => {
    for (const s of [a, b]) if (s?.child.exitCode === null) s.child.kill('SIGKILL');
    await kubelet?.stop();
    await kubeRequest(cp, 'DELETE', `/api/v1/namespaces/${ns}`).catch(() => undefined);
    await drop?.();
    await rm(dataDir, { recursive: true, force: true });
  });

  const shell = async (service: ServiceProcess): Promise<TerminalClient> => {
    const opened = await openTerminal(
      `${service.base.replace(/^http/, 'ws')}/api/v1/pods/${ns}/box/exec?command=sh&stdin=true&stdout=true&cluster=alpha`,
      { headers: { authorization: `Bearer ${token}` } },
    );
    assert.ok(opened.ok, opened.ok ? '' : `${opened.status} ${opened.body}`);
    return opened.client;
  };

  test('a session on A and one on B; A stops: its session ends with a status frame, B is unaffected', async () => {
    const onA = await shell(a);
    const onB = await shell(b);
    onA.send(0, 'echo from-a\n');
    onB.send(0, 'echo from-b\n');
    await Promise.all([onA.waitFor('from-a'), onB.waitFor('from-b')]);

    a.child.kill('SIGTERM');
    const { code, reason } = await onA.closed;
    assert.equal(code, 1001, 'going away: the client may reconnect to another replica');
    assert.match(reason, /shutting down/);
    const status = JSON.parse(onA.text(3));
    assert.equal(status.kind, 'Status');
    assert.equal(status.reason, 'ServiceUnavailable');
    assert.equal(await a.exited, 0);

    onB.send(0, 'echo b-still-here\n');
    await onB.waitFor('b-still-here');
    // And a new session needs nothing from A.
    const again = await shell(b);
    again.send(0, 'echo new-on-b\n');
    await again.waitFor('new-on-b');
    for (const c of [onB, again]) c.ws.close();
    await Promise.all([onB.closed, again.closed]);
  });
});
