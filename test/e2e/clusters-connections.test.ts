import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { ClusterClientFactory } from '../../src/clusters/cluster-client.factory.js';
import type { ClusterConnection } from '../../src/clusters/cluster-connection.js';
import type { Pool } from 'undici';
import { kubeRequest, sharedControlPlane, waitFor, waitForAudit, type ControlPlane } from '../harness/control-plane.js';
import { startTestApp, type TestApp } from '../support/app.js';
import { signedIn } from '../support/factories.js';
import { client } from '../support/http.js';
import { serviceAccountToken } from '../support/kube.js';
import { contextFor, kubeconfigYaml } from '../support/kubeconfigs.js';

const ENV = { CAS_CLUSTER_HEALTH_INTERVAL_SECONDS: '0', CAS_CLUSTER_PROBE_TIMEOUT_MS: '2000' };

/** One GET through a connection from the factory, the way the resource routes use it. */
async function getThrough(
  conn: ClusterConnection,
  path: string,
  userAgent = 'cas-e2e-clusters',
): Promise<{ status: number; body: any }> {
  const prefix = conn.server.pathname.replace(/\/+$/, '');
  const res = await conn.dispatcher.request({
    method: 'GET',
    path: prefix + path,
    headers: { accept: 'application/json', 'user-agent': userAgent, ...conn.authHeaders() },
  });
  const text = await res.body.text();
  return { status: res.statusCode, body: text.startsWith('{') ? JSON.parse(text) : text };
}

/**
 * The other replica trusts a cluster row it read for at most 1 s: asks until `check` passes and fails
 * when a request sent more than 1 s (plus a margin for this machine) after the change still sees the old one.
 */
async function withinASecond<T>(ask: () => Promise<T>, check: (value: T) => void): Promise<T> {
  const started = Date.now();
  for (;;) {
    const sentAt = Date.now() - started;
    let outcome: { value: T } | { error: unknown };
    try {
      outcome = { value: await ask() };
    } catch (error) {
      outcome = { error };
    }
    try {
      if ('error' in outcome) throw outcome.error;
      check(outcome.value);
      return outcome.value;
    } catch (error) {
      if (sentAt > 1300) throw error;
    }
    await new Promise((r) => setTimeout(r, 20));
  }
}

const uidOf = async (cp: ControlPlane) =>
  (await kubeRequest(cp, 'GET', '/api/v1/namespaces/default')).body.metadata.uid as string;

describe('the connection factory on real control planes', () => {
  let a: ControlPlane;
  let b: ControlPlane;
  const replicas: TestApp[] = [];
  const factory = (i: number) => replicas[i].app.get(ClusterClientFactory);

  before(async () => {
    [a, b] = await Promise.all([sharedControlPlane('a'), sharedControlPlane('b')]);
    const env = { ...ENV, CAS_ENCRYPTION_KEY: randomBytes(32).toString('base64') };
    replicas.push(await startTestApp({ env }));
    // A second instance of the service on the same database, as another replica.
    replicas.push(await startTestApp({ env, databaseUrl: replicas[0].databaseUrl }));
  });
  after(async () => {
    for (const r of replicas.reverse()) await r.close();
  });

  test("after a cluster's config points at the other control plane, the next call reaches it (other replicas: within 1 s)", async () => {
    const [uidA, uidB] = await Promise.all([uidOf(a), uidOf(b)]);
    assert.notEqual(uidA, uidB);
    const admin = client(replicas[0].app, (await signedIn(replicas[0], 'admin')).token);
    const created = await admin.post('/api/v1/admin/clusters', {
      body: { name: 'moving', config: kubeconfigYaml([contextFor(a, { auth: 'cert' })]) },
    });
    assert.equal(created.status, 201, created.text);

    const before = await Promise.all([factory(0).forName('moving'), factory(1).forName('moving')]);
    for (const conn of before) {
      assert.equal((await getThrough(conn, '/api/v1/namespaces/default')).body.metadata.uid, uidA);
      assert.equal(conn.server.href, `${a.server}/`);
      assert.deepEqual(conn.authHeaders(), {}, 'client certificate: no credential header');
    }
    assert.equal(await factory(0).forName('moving'), before[0], 'cached while the cluster is unchanged');

    const updated = await admin.put(`/api/v1/admin/clusters/${created.body.id}`, {
      body: { config: kubeconfigYaml([contextFor(b, { auth: 'token' })]) },
    });
    assert.equal(updated.status, 200);
    // Never the old connection past the 1 s bound, on either replica (at once on the one that changed it).
    assert.notEqual(await factory(0).forName('moving'), before[0], 'at once on the replica that changed it');

    for (const i of [0, 1]) {
      const conn = await withinASecond(
        () => factory(i).forName('moving'),
        (c) => assert.equal(c.generation, before[i].generation + 1, `replica ${i} uses the new config`),
      );
      assert.notEqual(conn, before[i]);
      assert.equal(conn.server.href, `${b.server}/`);
      assert.deepEqual(conn.authHeaders(), { authorization: `Bearer ${b.adminToken}` });
      const res = await getThrough(conn, '/api/v1/namespaces/default');
      assert.equal(res.status, 200);
      assert.equal(res.body.metadata.uid, uidB, `replica ${i} reaches the new control plane`);
      // The replaced pool is closed: it keeps no connection to the old cluster.
      const old = before[i].dispatcher as Pool;
      await waitFor('the old pool closed', async () => old.closed && old.stats.connected === 0, 5000);
    }
    const listed = (await admin.get('/api/v1/admin/clusters')).body.find((c: any) => c.name === 'moving');
    assert.equal(listed.server, b.server);
    assert.equal(listed.status, 'ok');

    const renamed = await admin.put(`/api/v1/admin/clusters/${created.body.id}`, { body: { name: 'moved' } });
    assert.equal(renamed.status, 200);
    await assert.rejects(factory(0).forName('moving'), { status: 404 }, 'at once on the replica that renamed it');
    assert.equal(
      (
        await withinASecond(
          () => factory(1).forName('moved'),
          () => undefined,
        )
      ).clusterName,
      'moved',
    );
    await withinASecond(
      () =>
        factory(1)
          .forName('moving')
          .then(
            () => 'found',
            (error: { status?: number }) => error.status,
          ),
      (status) => assert.equal(status, 404),
    );
    const disabled = await admin.put(`/api/v1/admin/clusters/${created.body.id}`, { body: { enabled: false } });
    assert.equal(disabled.status, 200);
    await assert.rejects(factory(0).forName('moved'), { status: 409, message: "cluster 'moved' is disabled" });
    await withinASecond(
      () =>
        factory(1)
          .forName('moved')
          .then(
            () => 'usable',
            (error: { message?: string }) => error.message,
          ),
      (message) => assert.equal(message, "cluster 'moved' is disabled"),
    );
  });
});

describe('inCluster: the service account of the pod, from a configurable directory', () => {
  let a: ControlPlane;
  let t: TestApp;
  let dir: string;
  let sa: { token: string; username: string };
  const namespace = `cas-incluster-${process.pid}`;
  const account = 'cas-service';

  before(async () => {
    a = await sharedControlPlane('a');
    await kubeRequest(a, 'POST', '/api/v1/namespaces', { metadata: { name: namespace } });
    sa = await serviceAccountToken(a, namespace, account);
    dir = await mkdtemp(join(tmpdir(), 'cas-sa-'));
    await writeFile(join(dir, 'token'), sa.token);
    await writeFile(join(dir, 'ca.crt'), a.caData);
    await writeFile(join(dir, 'namespace'), namespace);
    t = await startTestApp({ env: { ...ENV, CAS_IN_CLUSTER_DIR: dir, CAS_IN_CLUSTER_SERVER: a.server } });
  });
  after(async () => {
    await t?.close();
    await rm(dir, { recursive: true, force: true });
    await kubeRequest(a, 'DELETE', `/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/${namespace}-${account}`);
    await kubeRequest(a, 'DELETE', `/api/v1/namespaces/${namespace}`);
  });

  test('import {inCluster: true} → the cluster in-cluster answers with the service account; its token is re-read on each call', async () => {
    const imported = await client(t.app).post('/api/v1/admin/clusters/import', { body: { inCluster: true } });
    assert.equal(imported.status, 201, imported.text);
    assert.deepEqual(imported.body.clusters[0].name, 'in-cluster');

    const admin = client(t.app, (await signedIn(t, 'admin')).token);
    const [c] = (await admin.get('/api/v1/admin/clusters')).body;
    assert.deepEqual(
      [c.name, c.inCluster, c.isDefault, c.server, c.status, c.version, c.config],
      ['in-cluster', true, true, a.server, 'ok', 'v1.20.2', ''],
    );

    const conn = await t.app.get(ClusterClientFactory).forName('in-cluster');
    const agent = `cas-e2e-incluster-${process.pid}`;
    const res = await getThrough(conn, `/api/v1/namespaces/${namespace}/serviceaccounts`, agent);
    assert.equal(res.status, 200);
    const events = await waitForAudit(a, (e) => e.userAgent === agent);
    assert.equal(events[0]?.user.username, sa.username, 'the request was made as the service account');

    await writeFile(join(dir, 'token'), 'rotated-but-not-valid');
    assert.equal((await getThrough(conn, '/version')).status, 401, 'the new token is used at once');
    await writeFile(join(dir, 'token'), sa.token);
    assert.equal((await getThrough(conn, `/api/v1/namespaces/${namespace}/serviceaccounts`)).status, 200);
  });
});
