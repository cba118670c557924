import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { kubeRequest, sharedControlPlane, waitFor, waitForAudit, type ControlPlane } from '../harness/control-plane.js';
import { startTestApp, type TestApp } from '../support/app.js';
import { kubeconfigFor } from '../support/clusters.js';
import { signedIn } from '../support/factories.js';
import { client, request } from '../support/http.js';

const pid = process.pid;
const SHOP = `shop-${pid}`;
const WEB = `web-${pid}`;
/** The role, with this test file's own namespace (the control planes are shared). */
const SHOP_DEV = {
  name: 'shop-dev',
  rules: [
    { clusters: ['a'], namespaces: [SHOP], resources: ['deployments.apps', 'pods'], verbs: ['get', 'list', 'patch'] },
  ],
};

function deployment(name: string) {
  return {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name },
    spec: {
      replicas: 1,
      selector: { matchLabels: { app: name } },
      template: {
        metadata: { labels: { app: name } },
        spec: { containers: [{ name: 'c', image: 'example.invalid/x:1' }] },
      },
    },
  };
}

async function seed(cp: ControlPlane): Promise<void> {
  for (const ns of [SHOP, WEB]) {
    const res = await kubeRequest(cp, 'POST', '/api/v1/namespaces', { metadata: { name: ns } });
    assert.ok(res.status === 201 || res.status === 409, `namespace ${ns}: ${res.status}`);
    await kubeRequest(cp, 'POST', `/apis/apps/v1/namespaces/${ns}/deployments`, deployment('app'));
    await kubeRequest(cp, 'POST', `/api/v1/namespaces/${ns}/configmaps`, {
      metadata: { name: 'cm' },
      data: { a: '1' },
    });
  }
}

async function unseed(cp: ControlPlane | undefined): Promise<void> {
  if (!cp) return;
  for (const ns of [SHOP, WEB]) await kubeRequest(cp, 'DELETE', `/api/v1/namespaces/${ns}`);
}

describe('scoped access on real clusters a and b', () => {
  let t: TestApp;
  let cpA: ControlPlane;
  let cpB: ControlPlane;
  let admin: ReturnType<typeof client>;
  let dev: { id: number; token: string };

  before(async () => {
    [cpA, cpB] = await Promise.all([sharedControlPlane('a'), sharedControlPlane('b')]);
    await Promise.all([seed(cpA), seed(cpB)]);
    t = await startTestApp();
    admin = client(t.app, (await signedIn(t, 'admin')).token);
    for (const [name, cp] of [
      ['a', cpA],
      ['b', cpB],
    ] as const) {
      const res = await admin.post('/api/v1/admin/clusters', { body: { name, config: kubeconfigFor(cp) } });
      assert.equal(res.status, 201, res.text);
    }
    assert.equal((await admin.post('/api/v1/admin/roles', { body: SHOP_DEV })).status, 201);
    dev = await signedIn(t, 'shop-dev', { username: `dev-${pid}` });
  });
  after(async () => {
    await t?.close();
    await Promise.all([unseed(cpA), unseed(cpB)]);
  });

  test("the role's user reads and patches Deployments in its namespace on a; everything else is 403; can-i and permissions agree", async () => {
    const call = (method: string, cluster: string, path: string, body?: unknown, query?: Record<string, string>) =>
      request(t.app, method, `/api/v1/${path}`, {
        token: dev.token,
        headers: { 'x-cluster-name': cluster },
        body,
        query,
      });
    const canI = async (cluster: string, resource: string, namespace: string, verb: string) => {
      const res = await request(t.app, 'POST', '/api/v1/auth/can-i', {
        token: dev.token,
        body: { cluster, resource, namespace, verb },
      });
      assert.equal(res.status, 200, res.text);
      return res.body as { allowed: boolean; reason: string };
    };
    const cases: Array<{
      what: string;
      send: () => ReturnType<typeof call>;
      ask: [string, string, string, string];
      allowed: boolean;
    }> = [
      {
        what: 'get a Deployment in shop on a',
        send: () => call('GET', 'a', `deployments.apps/${SHOP}/app`),
        ask: ['a', 'deployments.apps', SHOP, 'get'],
        allowed: true,
      },
      {
        what: 'list Deployments in shop on a',
        send: () => call('GET', 'a', `deployments.apps/${SHOP}`),
        ask: ['a', 'deployments.apps', SHOP, 'list'],
        allowed: true,
      },
      {
        what: 'patch (restart) a Deployment in shop on a',
        send: () =>
          call(
            'PATCH',
            'a',
            `deployments.apps/${SHOP}/app`,
            { spec: { template: { metadata: { annotations: { 'cas/restartedAt': '2026-11-22T13:00:00Z' } } } } },
            { patchType: 'merge' },
          ),
        ask: ['a', 'deployments.apps', SHOP, 'patch'],
        allowed: true,
      },
      {
        what: 'list Pods in shop on a',
        send: () => call('GET', 'a', `pods/${SHOP}`),
        ask: ['a', 'pods', SHOP, 'list'],
        allowed: true,
      },
      {
        what: 'get the Deployment in shop on b',
        send: () => call('GET', 'b', `deployments.apps/${SHOP}/app`),
        ask: ['b', 'deployments.apps', SHOP, 'get'],
        allowed: false,
      },
      {
        what: 'get a Deployment in web on a',
        send: () => call('GET', 'a', `deployments.apps/${WEB}/app`),
        ask: ['a', 'deployments.apps', WEB, 'get'],
        allowed: false,
      },
      {
        what: 'get a ConfigMap in shop on a',
        send: () => call('GET', 'a', `configmaps/${SHOP}/cm`),
        ask: ['a', 'configmaps', SHOP, 'get'],
        allowed: false,
      },
      {
        what: 'delete the Deployment in shop on a',
        send: () => call('DELETE', 'a', `deployments.apps/${SHOP}/app`),
        ask: ['a', 'deployments.apps', SHOP, 'delete'],
        allowed: false,
      },
      {
        what: 'list Deployments in all namespaces on a',
        send: () => call('GET', 'a', 'deployments.apps/_all'),
        ask: ['a', 'deployments.apps', '_all', 'list'],
        allowed: false,
      },
      {
        what: 'patch a Deployment in shop on b',
        send: () => call('PATCH', 'b', `deployments.apps/${SHOP}/app`, { metadata: { labels: { x: 'y' } } }),
        ask: ['b', 'deployments.apps', SHOP, 'patch'],
        allowed: false,
      },
    ];
    for (const c of cases) {
      const [res, answer] = [await c.send(), await canI(...c.ask)];
      assert.equal(answer.allowed, c.allowed, `can-i: ${c.what}: ${answer.reason}`);
      if (c.allowed) {
        assert.equal(res.status, 200, `${c.what}: ${res.text}`);
      } else {
        assert.equal(res.status, 403, `${c.what}: ${res.text}`);
        assert.equal(res.body.message, answer.reason, `${c.what}: the route and can-i give the same reason`);
        assert.ok(res.headers['x-request-id']);
      }
    }
    const allNs = await canI('a', 'deployments.apps', '_all', 'list');
    assert.match(allNs.reason, new RegExp(SHOP), 'the _all refusal names the namespace it may use');

    // The patch really happened, and the refused delete did not.
    const onCluster = await kubeRequest(cpA, 'GET', `/apis/apps/v1/namespaces/${SHOP}/deployments/app`);
    assert.equal(onCluster.body.spec.template.metadata.annotations['cas/restartedAt'], '2026-11-22T13:00:00Z');
    assert.equal(onCluster.body.metadata.deletionTimestamp, undefined);

    const perms = async (cluster: string) =>
      (await request(t.app, 'GET', '/api/v1/auth/me/permissions', { token: dev.token, query: { cluster } })).body;
    assert.deepEqual(await perms('a'), {
      cluster: 'a',
      admin: false,
      rules: [
        {
          role: 'shop-dev',
          namespaces: [SHOP],
          resources: ['deployments.apps', 'pods'],
          verbs: ['get', 'list', 'patch'],
        },
      ],
    });
    assert.deepEqual((await perms('b')).rules, []);
  });

  test('a viewer reads both clusters but not Secrets; a caller with no role gets 403', async () => {
    const viewer = await signedIn(t, 'viewer');
    const nobody = await signedIn(t, []);
    for (const cluster of ['a', 'b']) {
      const read = await request(t.app, 'GET', `/api/v1/configmaps/${WEB}/cm`, {
        token: viewer.token,
        headers: { 'x-cluster-name': cluster },
      });
      assert.equal(read.status, 200, read.text);
      const secrets = await request(t.app, 'GET', `/api/v1/secrets/${WEB}`, {
        token: viewer.token,
        headers: { 'x-cluster-name': cluster },
      });
      assert.equal(secrets.status, 403);
      const none = await request(t.app, 'GET', `/api/v1/configmaps/${WEB}/cm`, {
        token: nobody.token,
        headers: { 'x-cluster-name': cluster },
      });
      assert.equal(none.status, 403);
    }
  });

  test('a refused create, replace, patch or delete says as much as a refused list: verb, resource, namespace, where it is allowed', async () => {
    const writer = {
      name: `cm-writer-${pid}`,
      rules: [
        {
          clusters: ['a'],
          namespaces: [SHOP],
          resources: ['configmaps'],
          verbs: ['get', 'list', 'create', 'update', 'patch', 'delete'],
        },
      ],
    };
    assert.equal((await admin.post('/api/v1/admin/roles', { body: writer })).status, 201);
    const cmWriter = await signedIn(t, writer.name, { username: `cmw-${pid}` });
    const viewer = await signedIn(t, 'viewer');
    const cm = (name: string, namespace: string) => ({
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name, namespace },
      data: { a: '1' },
    });
    const send = (token: string, method: string, path: string, body?: unknown, query?: Record<string, string>) =>
      request(t.app, method, `/api/v1/${path}`, { token, headers: { 'x-cluster-name': 'a' }, body, query });
    const canI = async (token: string, resource: string, namespace: string, verb: string) =>
      (await request(t.app, 'POST', '/api/v1/auth/can-i', { token, body: { cluster: 'a', resource, namespace, verb } }))
        .body as { allowed: boolean; reason: string };
    const current = await kubeRequest(cpA, 'GET', `/api/v1/namespaces/${WEB}/configmaps/cm`);

    // [who, verb, method, path, body, query, resource, namespace, allowed in]
    const cases: Array<
      [string, string, string, string, unknown, Record<string, string> | undefined, string, string, string]
    > = [
      [
        cmWriter.token,
        'list',
        'GET',
        `configmaps/${WEB}`,
        undefined,
        undefined,
        'configmaps',
        WEB,
        `namespaces: ${SHOP}`,
      ],
      [
        cmWriter.token,
        'create',
        'POST',
        `configmaps/${WEB}`,
        cm('new', WEB),
        undefined,
        'configmaps',
        WEB,
        `namespaces: ${SHOP}`,
      ],
      [
        cmWriter.token,
        'update',
        'PUT',
        `configmaps/${WEB}/cm`,
        { ...current.body, data: { a: 'x' } },
        undefined,
        'configmaps',
        WEB,
        `namespaces: ${SHOP}`,
      ],
      [
        cmWriter.token,
        'patch',
        'PATCH',
        `configmaps/${WEB}/cm`,
        { data: { a: 'x' } },
        { patchType: 'merge' },
        'configmaps',
        WEB,
        `namespaces: ${SHOP}`,
      ],
      [
        cmWriter.token,
        'delete',
        'DELETE',
        `configmaps/${WEB}/cm`,
        undefined,
        undefined,
        'configmaps',
        WEB,
        `namespaces: ${SHOP}`,
      ],
      // No role of these callers allows the verb at all on the cluster: the refusal still names what was asked.
      [
        dev.token,
        'create',
        'POST',
        `deployments.apps/${SHOP}`,
        deployment('new'),
        undefined,
        'deployments.apps',
        SHOP,
        'no namespace',
      ],
      [
        dev.token,
        'delete',
        'DELETE',
        `deployments.apps/${SHOP}/app`,
        undefined,
        undefined,
        'deployments.apps',
        SHOP,
        'no namespace',
      ],
      [
        viewer.token,
        'create',
        'POST',
        `configmaps/${WEB}`,
        cm('new', WEB),
        undefined,
        'configmaps',
        WEB,
        'no namespace',
      ],
      [
        viewer.token,
        'patch',
        'PATCH',
        `configmaps/${WEB}/cm`,
        { data: { a: 'x' } },
        { patchType: 'merge' },
        'configmaps',
        WEB,
        'no namespace',
      ],
    ];
    for (const [token, verb, method, path, body, query, resource, namespace, allowedIn] of cases) {
      const res = await send(token, method, path, body, query);
      assert.equal(res.status, 403, `${method} ${path}: ${res.text}`);
      assert.equal(
        res.body.message,
        `your roles do not allow ${verb} on ${resource} in namespace '${namespace}' on cluster 'a'; they allow it in ${allowedIn}`,
      );
      assert.equal(
        (await canI(token, resource, namespace, verb)).reason,
        res.body.message,
        'can-i gives the same reason',
      );
    }
    const after = await kubeRequest(cpA, 'GET', `/api/v1/namespaces/${WEB}/configmaps/cm`);
    assert.equal(after.body.metadata.resourceVersion, current.body.metadata.resourceVersion, 'nothing was written');
    assert.equal((await kubeRequest(cpA, 'GET', `/api/v1/namespaces/${WEB}/configmaps/new`)).status, 404);
  });

  test("owner demoted to viewer → the owner's admin-role key can no longer write to the cluster", async () => {
    const owner = await signedIn(t, 'admin', { username: `owner-${pid}` });
    const key = (
      await client(t.app, owner.token).post('/api/v1/admin/apikeys', { body: { name: `k-${pid}`, role: 'admin' } })
    ).body.key as string;
    const patch = (value: string) =>
      request(t.app, 'PATCH', `/api/v1/configmaps/${WEB}/cm`, {
        headers: { authorization: key, 'x-cluster-name': 'a' },
        body: { data: { a: value } },
        query: { patchType: 'merge' },
      });
    assert.equal((await patch('2')).status, 200);
    await admin.put(`/api/v1/admin/users/${owner.id}/roles`, { body: { roles: ['viewer'] } });
    const refused = await patch('3');
    assert.equal(refused.status, 403, refused.text);
    const cm = await kubeRequest(cpA, 'GET', `/api/v1/namespaces/${WEB}/configmaps/cm`);
    assert.equal(cm.body.data.a, '2', 'the refused patch changed nothing');
  });
});

describe('impersonation on a real cluster', () => {
  let t: TestApp;
  let cp: ControlPlane;
  let admin: ReturnType<typeof client>;
  const ns = `imp-${pid}`;
  const username = `alice-${pid}`;

  before(async () => {
    cp = await sharedControlPlane('a');
    await kubeRequest(cp, 'POST', '/api/v1/namespaces', { metadata: { name: ns } });
    await kubeRequest(cp, 'POST', `/apis/apps/v1/namespaces/${ns}/deployments`, deployment('app'));
    t = await startTestApp();
    admin = client(t.app, (await signedIn(t, 'admin')).token);
    const res = await admin.post('/api/v1/admin/clusters', {
      body: { name: 'a', config: kubeconfigFor(cp), impersonate: true },
    });
    assert.equal(res.status, 201, res.text);
    const role = { ...SHOP_DEV, rules: [{ ...SHOP_DEV.rules[0], namespaces: [ns] }] };
    assert.equal((await admin.post('/api/v1/admin/roles', { body: role })).status, 201);
  });
  after(async () => {
    await t?.close();
    if (cp) await kubeRequest(cp, 'DELETE', `/api/v1/namespaces/${ns}`);
  });

  test('the cluster sees cas:<username> with group cas:role:<role>: its RBAC decides, its audit log names the person', async () => {
    const alice = await signedIn(t, 'shop-dev', { username });
    const list = () =>
      request(t.app, 'GET', `/api/v1/deployments.apps/${ns}`, {
        token: alice.token,
        headers: { 'x-cluster-name': 'a' },
      });

    // The service allows it; the cluster, without a binding for the group, refuses: its 403 passes through.
    const refused = await list();
    assert.equal(refused.status, 403, refused.text);
    assert.equal(refused.body.kind, 'Status', "the cluster's own Status");
    assert.equal(refused.body.reason, 'Forbidden');
    assert.match(refused.body.message, new RegExp(`User "cas:${username}"`));

    const binding = await kubeRequest(cp, 'POST', `/apis/rbac.authorization.k8s.io/v1/namespaces/${ns}/rolebindings`, {
      metadata: { name: 'shop-dev-view' },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'view' },
      subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'Group', name: 'cas:role:shop-dev' }],
    });
    assert.equal(binding.status, 201, JSON.stringify(binding.body));
    const allowed = await waitFor('the RoleBinding to take effect', async () => {
      const res = await list();
      return res.status === 200 ? res : undefined;
    });
    assert.equal(allowed.body.kind, 'DeploymentList');
    assert.deepEqual(
      allowed.body.items.map((d: any) => d.metadata.name),
      ['app'],
    );

    const events = await waitForAudit(
      cp,
      (e) =>
        e.impersonatedUser?.username === `cas:${username}` &&
        e.objectRef?.namespace === ns &&
        e.responseStatus?.code === 200,
    );
    assert.ok(events.length > 0, 'the apiserver audit log records the impersonated user');
    assert.ok(events[0].impersonatedUser!.groups!.includes('cas:role:shop-dev'));

    // The service still decides first: a verb its rules do not grant never reaches the cluster.
    const del = await request(t.app, 'DELETE', `/api/v1/deployments.apps/${ns}/app`, {
      token: alice.token,
      headers: { 'x-cluster-name': 'a' },
    });
    assert.equal(del.status, 403);
    assert.equal(del.body.kind, undefined, "the service's 403, not the cluster's");
  });

  test('an API key acts as its owner (cas:<owner>, extra cas-key: <key id>); an admin without a cluster binding for cas:role:admin is refused by the cluster', async () => {
    const alice = await signedIn(t, 'shop-dev', { username: `${username}-k` });
    const keyName = `ci-${pid}`;
    const created = (
      await client(t.app, alice.token).post('/api/v1/auth/apikeys', { body: { name: keyName, roles: ['shop-dev'] } })
    ).body;
    const key = created.key as string;
    const res = await waitFor('the key to be allowed by the binding', async () => {
      const r = await request(t.app, 'GET', `/api/v1/deployments.apps/${ns}/app`, {
        headers: { authorization: key, 'x-cluster-name': 'a' },
      });
      return r.status === 200 ? r : undefined;
    });
    assert.equal(res.body.metadata.name, 'app');
    // Issue 29 #12: never the key's name (free for anyone to take once the key is deleted).
    const events = await waitForAudit(
      cp,
      (e) =>
        e.impersonatedUser?.username === `cas:${username}-k` &&
        e.objectRef?.namespace === ns &&
        e.objectRef?.name === 'app' &&
        (e.impersonatedUser?.extra?.['cas-key'] ?? []).includes(String(created.id)),
    );
    assert.ok(events.length > 0, 'the audit log names the owner and the key id');
    assert.ok(events[0].impersonatedUser!.groups!.includes('cas:role:shop-dev'));
    const byName = await waitForAudit(cp, (e) => e.impersonatedUser?.username === `cas:key:${keyName}`, 500);
    assert.deepEqual(byName, [], 'no request impersonates cas:key:<name> any more');

    const asAdmin = await admin.get(`/api/v1/configmaps/${ns}`, { headers: { 'x-cluster-name': 'a' } });
    assert.equal(asAdmin.status, 403, 'cas:role:admin has no binding on this cluster');
    assert.equal(asAdmin.body.kind, 'Status');

    // Impersonation off: the stored credential's identity again.
    const id = (await admin.get('/api/v1/admin/clusters')).body[0].id;
    await admin.put(`/api/v1/admin/clusters/${id}`, { body: { impersonate: false } });
    assert.equal((await admin.get(`/api/v1/configmaps/${ns}`, { headers: { 'x-cluster-name': 'a' } })).status, 200);
  });
});
