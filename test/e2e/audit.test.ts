// Database: runs on PostgreSQL too: audit rows are stored and queried.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { AuditEventEntity } from '../../src/audit/audit-event.entity.js';
import { AuditService } from '../../src/audit/audit.service.js';
import { kubeRequest, sharedControlPlane, type ControlPlane } from '../harness/control-plane.js';
import { startTestApp, type TestApp } from '../support/app.js';
import { kubeconfigFor } from '../support/clusters.js';
import { createUser } from '../support/factories.js';
import { request } from '../support/http.js';

const b64 = (text: string) => Buffer.from(text, 'utf8').toString('base64');

describe('audit log of a scenario of 20 calls, resource writes on a real cluster', () => {
  let t: TestApp;
  let cp: ControlPlane;
  const ns = `audit-${process.pid}`;
  const cluster = `audit-a-${process.pid}`;

  before(async () => {
    cp = await sharedControlPlane('a');
    t = await startTestApp();
  });
  after(async () => {
    await kubeRequest(cp, 'DELETE', `/api/v1/namespaces/${ns}`);
    await t.close();
  });

  test('exactly the expected rows, with uid and resourceVersion of each write; no secret in the table', async () => {
    const adminPassword = 'admin-password-4c8e1d';
    const danaPassword = 'dana-password-0b7f3a';
    const secretValue = 'recognisable-secret-value-6e2d91';
    const secretToken = 'recognisable-secret-token-a83c55';
    const admin = await createUser(t, { username: 'audit-admin', role: 'admin', password: adminPassword });
    const kubeconfig = kubeconfigFor(cp);
    const as =
      (token: string | undefined, headers: Record<string, string> = {}) =>
      (method: string, url: string, options: { body?: unknown; query?: Record<string, string> } = {}) =>
        request(t.app, method, `/api/v1/${url}`, { token, headers, ...options });

    // 1–2: logins, good and bad.
    const login = await as(undefined)('POST', 'auth/login', {
      body: { username: 'audit-admin', password: adminPassword },
    });
    assert.equal(login.status, 200);
    const token: string = login.body.token;
    const bad = await as(undefined)('POST', 'auth/login', {
      body: { username: 'audit-admin', password: 'wrong-pw-1' },
    });
    assert.equal(bad.status, 401);
    const api = as(token);
    const kube = as(token, { 'x-cluster-name': cluster });
    // 3–4: a user.
    const dana = await api('POST', 'admin/users', { body: { username: 'dana', password: danaPassword } });
    assert.equal(dana.status, 201);
    assert.equal((await api('PUT', `admin/users/${dana.body.id}`, { body: { name: 'Dana D' } })).status, 200);
    // 5–6: a cluster and an API key.
    const created = await api('POST', 'admin/clusters', { body: { name: cluster, config: kubeconfig } });
    assert.equal(created.status, 201, created.text);
    const key = await api('POST', 'admin/apikeys', { body: { name: 'deployer', role: 'admin' } });
    assert.equal(key.status, 201);
    const byKey = as(undefined, { authorization: key.body.key, 'x-cluster-name': cluster });
    // 7–9: resource creates (a cluster-scoped Namespace, a Secret, a ConfigMap).
    const namespace = await kube('POST', 'namespaces/_all', { body: { metadata: { name: ns } } });
    assert.equal(namespace.status, 201, namespace.text);
    const secret = await kube('POST', `secrets/${ns}`, {
      body: { metadata: { name: 's1' }, stringData: { password: secretValue }, data: { token: b64(secretToken) } },
    });
    assert.equal(secret.status, 201, secret.text);
    const cm = await kube('POST', `configmaps/${ns}`, { body: { metadata: { name: 'cm1' }, data: { a: '1' } } });
    assert.equal(cm.status, 201, cm.text);
    // 10: a read: no row.
    assert.equal((await kube('GET', `configmaps/${ns}/cm1`)).status, 200);
    // 11: a patch by the API key.
    const patched = await byKey('PATCH', `configmaps/${ns}/cm1`, { body: { data: { a: '2' } } });
    assert.equal(patched.status, 200, patched.text);
    // 12: the cluster refuses a duplicate: its 409 passes through, and is recorded.
    const duplicate = await kube('POST', `configmaps/${ns}`, { body: { metadata: { name: 'cm1' } } });
    assert.equal(duplicate.status, 409);
    // 13–15: the viewer logs in and is refused a Secret and a patch.
    const danaLogin = await as(undefined)('POST', 'auth/login', { body: { username: 'dana', password: danaPassword } });
    assert.equal(danaLogin.status, 200);
    const viewer = as(danaLogin.body.token, { 'x-cluster-name': cluster });
    assert.equal((await viewer('GET', `secrets/${ns}/s1`)).status, 403);
    assert.equal((await viewer('PATCH', `configmaps/${ns}/cm1`, { body: { data: { a: '3' } } })).status, 403);
    // 16–17: deletes (waited; and at once).
    const cmBeforeDelete = (await kubeRequest(cp, 'GET', `/api/v1/namespaces/${ns}/configmaps/cm1`)).body;
    const deleted = await kube('DELETE', `configmaps/${ns}/cm1`);
    assert.equal(deleted.status, 200, deleted.text);
    const secretDeleted = await kube('DELETE', `secrets/${ns}/s1`, { query: { wait: 'false' } });
    assert.equal(secretDeleted.status, 200, secretDeleted.text);
    // 18–20: clean-up of the admin plane, and logout.
    assert.equal((await api('DELETE', `admin/apikeys/${key.body.id}`)).status, 200);
    assert.equal((await api('DELETE', `admin/users/${dana.body.id}`)).status, 200);
    assert.equal((await api('POST', 'auth/logout')).status, 200);

    await t.app.get(AuditService).flush();
    const rows = await t.dataSource.getRepository(AuditEventEntity).find({ order: { id: 'ASC' } });
    const shape = (r: AuditEventEntity) => ({
      op: r.operation,
      status: r.statusCode,
      actor: `${r.actorKind}:${r.actorName}`,
      target: r.targetKind ? `${r.targetKind}:${r.targetId}` : null,
      resource: r.resource ? `${r.cluster}/${r.resource}/${r.namespace}/${r.name ?? ''}` : null,
      uid: r.uid,
      rv: r.resourceVersion,
    });
    const res = (resource: string, namespaceName: string, name = '') =>
      `${cluster}/${resource}/${namespaceName}/${name}`;
    const adminActor = 'user:audit-admin';
    assert.deepEqual(rows.map(shape), [
      { op: 'login', status: 200, actor: adminActor, target: `user:${admin.id}`, resource: null, uid: null, rv: null },
      { op: 'login', status: 401, actor: adminActor, target: null, resource: null, uid: null, rv: null },
      {
        op: 'createUser',
        status: 201,
        actor: adminActor,
        target: `user:${dana.body.id}`,
        resource: null,
        uid: null,
        rv: null,
      },
      {
        op: 'updateUser',
        status: 200,
        actor: adminActor,
        target: `user:${dana.body.id}`,
        resource: null,
        uid: null,
        rv: null,
      },
      {
        op: 'createCluster',
        status: 201,
        actor: adminActor,
        target: `cluster:${created.body.id}`,
        resource: null,
        uid: null,
        rv: null,
      },
      {
        op: 'createApiKey',
        status: 201,
        actor: adminActor,
        target: `apiKey:${key.body.id}`,
        resource: null,
        uid: null,
        rv: null,
      },
      {
        op: 'createResource',
        status: 201,
        actor: adminActor,
        target: null,
        resource: res('namespaces', '_all'),
        uid: namespace.body.metadata.uid,
        rv: namespace.body.metadata.resourceVersion,
      },
      {
        op: 'createResource',
        status: 201,
        actor: adminActor,
        target: null,
        resource: res('secrets', ns),
        uid: secret.body.metadata.uid,
        rv: secret.body.metadata.resourceVersion,
      },
      {
        op: 'createResource',
        status: 201,
        actor: adminActor,
        target: null,
        resource: res('configmaps', ns),
        uid: cm.body.metadata.uid,
        rv: cm.body.metadata.resourceVersion,
      },
      {
        op: 'patchResource',
        status: 200,
        actor: 'apiKey:deployer',
        target: null,
        resource: res('configmaps', ns, 'cm1'),
        uid: cm.body.metadata.uid,
        rv: patched.body.metadata.resourceVersion,
      },
      {
        op: 'createResource',
        status: 409,
        actor: adminActor,
        target: null,
        resource: res('configmaps', ns),
        uid: null,
        rv: null,
      },
      {
        op: 'login',
        status: 200,
        actor: 'user:dana',
        target: `user:${dana.body.id}`,
        resource: null,
        uid: null,
        rv: null,
      },
      {
        op: 'getResource',
        status: 403,
        actor: 'user:dana',
        target: null,
        resource: res('secrets', ns, 's1'),
        uid: null,
        rv: null,
      },
      {
        op: 'patchResource',
        status: 403,
        actor: 'user:dana',
        target: null,
        resource: res('configmaps', ns, 'cm1'),
        uid: null,
        rv: null,
      },
      {
        op: 'deleteResource',
        status: 200,
        actor: adminActor,
        target: null,
        resource: res('configmaps', ns, 'cm1'),
        uid: cm.body.metadata.uid,
        rv: deleted.body.metadata.resourceVersion,
      },
      {
        op: 'deleteResource',
        status: 200,
        actor: adminActor,
        target: null,
        resource: res('secrets', ns, 's1'),
        uid: secret.body.metadata.uid,
        rv: secretDeleted.body.metadata?.resourceVersion ?? null,
      },
      {
        op: 'deleteApiKey',
        status: 200,
        actor: adminActor,
        target: `apiKey:${key.body.id}`,
        resource: null,
        uid: null,
        rv: null,
      },
      {
        op: 'deleteUser',
        status: 200,
        actor: adminActor,
        target: `user:${dana.body.id}`,
        resource: null,
        uid: null,
        rv: null,
      },
      { op: 'logout', status: 200, actor: adminActor, target: null, resource: null, uid: null, rv: null },
    ]);
    // The patch's resourceVersion is the one the cluster held afterwards (until the delete).
    assert.equal(cmBeforeDelete.metadata.resourceVersion, patched.body.metadata.resourceVersion);
    assert.notEqual(patched.body.metadata.resourceVersion, cm.body.metadata.resourceVersion);
    assert.equal(rows[9].actorId, key.body.id);

    // The audit API answers with the same rows, newest first, filterable by cluster.
    const listed = await request(t.app, 'GET', '/api/v1/admin/audit', {
      headers: { authorization: key.body.key },
    });
    assert.equal(listed.status, 401, 'the deleted key no longer works');
    const adminToken = (
      await as(undefined)('POST', 'auth/login', { body: { username: 'audit-admin', password: adminPassword } })
    ).body.token;
    const byCluster = await as(adminToken)('GET', 'admin/audit', { query: { cluster, size: '100' } });
    assert.equal(byCluster.status, 200);
    assert.equal(byCluster.body.total, 9);
    assert.equal(byCluster.body.events[0].operation, 'deleteResource');
    assert.equal(byCluster.body.events[0].target.name, 's1');

    // A full dump of the table holds none of the secrets the scenario used.
    const dump = JSON.stringify(await t.dataSource.query('SELECT * FROM audit_events'));
    const secrets = {
      adminPassword,
      danaPassword,
      wrongPassword: 'wrong-pw-1',
      sessionToken: token,
      viewerToken: danaLogin.body.token,
      apiKey: key.body.key,
      secretValue,
      secretValueBase64: b64(secretValue),
      secretToken,
      secretTokenBase64: b64(secretToken),
      clientKey: b64(cp.adminKeyData),
      clientCert: b64(cp.adminCertData),
    };
    for (const [what, value] of Object.entries(secrets)) {
      assert.ok(!dump.includes(value), `the audit table holds ${what}`);
    }
    for (const marker of ['cas_sess_', 'cas_key_', 'PRIVATE KEY', 'client-key-data', 'stringData']) {
      assert.ok(!dump.includes(marker), `the audit table holds ${marker}`);
    }
  });
});
