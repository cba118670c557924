// Issue 30: the Kubernetes API path on its own terms — bad input is a clear 4xx Status and nothing is sent
// upstream; only the service's credentials reach the cluster; on an impersonating cluster the apiserver's
// audit log names the person for reads, writes and watches, and an access review asks the cluster too.
import assert from 'node:assert/strict';
import https from 'node:https';
import { after, before, describe, test } from 'node:test';
import { parse } from 'yaml';
import { kubeRequest, waitFor, waitForAudit } from '../harness/control-plane.js';
import { kubeconfigFor, registerCluster } from '../support/clusters.js';
import { createUser, login } from '../support/factories.js';
import { startKubeApiApp, type KubeApiApp } from '../support/kube-api.js';

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
  json(): any;
}

/** One request over TLS to the service, as a kubeconfig's user (no Authorization when `token` is ''). */
function call(
  app: KubeApiApp,
  token: string,
  method: string,
  path: string,
  options: { headers?: Record<string, string>; body?: string | Buffer } = {},
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const { hostname, port } = new URL(app.base);
    const req = https.request(
      {
        host: hostname,
        port,
        // As sent: a URL object would resolve dot segments (even encoded ones) before the service sees them.
        path,
        method,
        ca: app.caPem,
        agent: false,
        headers: {
          ...(token ? { authorization: `Bearer ${token}` } : {}),
          accept: 'application/json',
          ...options.headers,
        },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          resolve({ status: res.statusCode ?? 0, headers: res.headers, text, json: () => JSON.parse(text) });
        });
      },
    );
    req.on('error', reject);
    req.end(options.body);
  });
}

async function role(app: KubeApiApp, name: string, rules: unknown[]): Promise<string> {
  const res = await app.t.app.inject({
    method: 'POST',
    url: '/api/v1/admin/roles',
    headers: { authorization: `Bearer ${app.adminToken}`, 'content-type': 'application/json' },
    payload: JSON.stringify({ name, rules }),
  });
  assert.equal(res.statusCode, 201, res.body);
  const user = await createUser(app.t, { role: name as never, username: `${name}-user` });
  const config = parse(await app.mint(await login(app.t, user)));
  return config.users[0].user.token as string;
}

describe('the Kubernetes API path: bad input, credentials, refusals', () => {
  const ns = `kube-api-${process.pid}`;
  let app: KubeApiApp;
  let devKey: string;
  const k8s = (cluster = 'alpha') => `/api/v1/clusters/${cluster}/k8s`;

  before(async () => {
    app = await startKubeApiApp({ cluster: 'alpha', namespace: ns });
    devKey = await role(app, 'api-dev', [
      { clusters: ['alpha'], namespaces: [ns], resources: ['configmaps', 'pods'], verbs: ['*'] },
    ]);
    const id = await registerCluster(app.t, app.adminToken, 'dormant', kubeconfigFor(app.cp));
    const disabled = await app.t.app.inject({
      method: 'PUT',
      url: `/api/v1/admin/clusters/${id}`,
      headers: { authorization: `Bearer ${app.adminToken}`, 'content-type': 'application/json' },
      payload: JSON.stringify({ enabled: false }),
    });
    assert.equal(disabled.statusCode, 200, disabled.body);
  });
  after(() => app?.close());

  test('bad input: a Status naming the problem, with the right code', async () => {
    const cases: Array<[string, string, number, string, RegExp]> = [
      [app.adminToken, `${k8s('nowhere')}/api/v1/pods`, 404, 'NotFound', /cluster 'nowhere' not found/],
      [app.adminToken, `${k8s('dormant')}/api/v1/pods`, 409, 'Conflict', /cluster 'dormant' is disabled/],
      [devKey, `${k8s('nowhere')}/api/v1/pods`, 403, 'Forbidden', /grant nothing on cluster 'nowhere'/],
      [app.adminToken, `${k8s()}/api/v1/watch`, 404, 'NotFound', /names no resource: unable to determine kind/],
      [app.adminToken, `${k8s()}/api/v1/namespaces/a/%2e%2e/x`, 400, 'BadRequest', /'\.\.'/],
      [app.adminToken, `${k8s()}/api/v1/namespaces/a%2Fb/pods`, 400, 'BadRequest', /encoded-slash/],
      [app.adminToken, `${k8s()}/api/v1/Pods`, 404, 'NotFound', /'Pods' is not a resource name/],
      [
        devKey,
        `${k8s()}/api/v1/namespaces/${ns}/pods/p/exec?command=ls`,
        403,
        'Forbidden',
        /exec on pods needs a role that names the verb 'exec'/,
      ],
      [devKey, `${k8s()}/healthz`, 403, 'Forbidden', /only the admin role/],
    ];
    for (const [token, path, status, reason, message] of cases) {
      const res = await call(app, token, 'GET', path);
      assert.equal(res.status, status, `${path}: ${res.text}`);
      const body = res.json();
      assert.deepEqual(
        [body.kind, body.apiVersion, body.status, body.reason, body.code],
        ['Status', 'v1', 'Failure', reason, status],
      );
      assert.match(body.message, message, path);
    }
  });

  test('a malformed URL is refused by the router before any route (the service’s error shape)', async () => {
    const res = await call(app, app.adminToken, 'GET', `${k8s()}/api/v1/namespaces/%zz/pods`);
    assert.equal(res.status, 400, res.text);
  });

  test('a session cookie alone is a 401 Status on every method and upgrade; every answer is sandboxed', async () => {
    const session = await login(app.t, await createUser(app.t, { role: 'admin' }));
    const cookie = { cookie: `cas_session=${session}`, origin: app.base };
    const list = `${k8s()}/api/v1/namespaces/${ns}/configmaps`;
    const refusals: Array<{ method: string; path: string; headers: Record<string, string> }> = [
      ...['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE'].map((method) => ({ method, path: list, headers: {} })),
      {
        method: 'GET',
        path: `${k8s()}/api/v1/namespaces/${ns}/pods/p/exec?command=ls&stdout=true`,
        headers: {
          connection: 'Upgrade',
          upgrade: 'websocket',
          'sec-websocket-key': 'dGhlIHNhbXBsZSBub25jZQ==',
          'sec-websocket-version': '13',
          'sec-websocket-protocol': 'v4.channel.k8s.io',
        },
      },
      {
        method: 'POST',
        path: `${k8s()}/api/v1/namespaces/${ns}/pods/p/exec?command=ls&stdout=true`,
        headers: { connection: 'Upgrade', upgrade: 'SPDY/3.1', 'x-stream-protocol-version': 'v4.channel.k8s.io' },
      },
    ];
    for (const { method, path, headers } of refusals) {
      const res = await call(app, '', method, path, { headers: { ...cookie, ...headers } });
      const what = `${method} ${path} ${headers.upgrade ?? ''}`;
      assert.equal(res.status, 401, `${what}: ${res.text}`);
      if (method === 'HEAD') continue;
      const status = res.json();
      assert.deepEqual([status.kind, status.reason, status.code], ['Status', 'Unauthorized', 401], what);
      assert.match(status.message, /session cookie is not accepted on the Kubernetes API path/, what);
    }
    // The same session in Authorization works; every answer of the path carries the sandboxing CSP.
    for (const [path, code] of [
      [list, 200],
      [`${k8s()}/version`, 200],
      [`${k8s('nowhere')}/api/v1/pods`, 404],
    ] as const) {
      const res = await call(app, session, 'GET', path);
      assert.equal(res.status, code, res.text);
      assert.match(String(res.headers['content-security-policy']), /^sandbox;/, path);
    }
  });

  test('a refused write is never sent: the object does not exist afterwards', async () => {
    const res = await call(app, devKey, 'POST', `${k8s()}/api/v1/namespaces/kube-system/configmaps`, {
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ metadata: { name: `never-${process.pid}` } }),
    });
    assert.equal(res.status, 403, res.text);
    assert.deepEqual(res.json().details, { group: '', kind: 'configmaps' });
    const probe = await kubeRequest(app.cp, 'GET', `/api/v1/namespaces/kube-system/configmaps/never-${process.pid}`);
    assert.equal(probe.status, 404);
  });

  test("only the service's credentials and the allowed headers reach the cluster", async () => {
    const name = `headers-${process.pid}`;
    const res = await call(app, devKey, 'POST', `${k8s()}/api/v1/namespaces/${ns}/configmaps?fieldManager=probe`, {
      headers: { 'content-type': 'application/json', cookie: 'cas_session=stolen', 'x-forwarded-for': '10.9.9.9' },
      body: JSON.stringify({ metadata: { name } }),
    });
    assert.equal(res.status, 201, res.text);
    const [event] = await waitForAudit(
      app.cp,
      (e) => e.objectRef?.name === name && e.verb === 'create' && e.responseStatus?.code === 201,
    );
    assert.equal(event.user.username, 'cas-admin', "the stored credential's identity, not the caller's");
    assert.equal(event.impersonatedUser, undefined);
    assert.ok(!(event.sourceIPs ?? []).includes('10.9.9.9'), 'X-Forwarded-For is not passed on');
    assert.match(event.requestURI, /fieldManager=probe/, 'the query is passed on');
    assert.match(event.userAgent ?? '', /^cluster-admin-service\//);
  });

  test('Accept is passed on: a Table for kubectl, protobuf for client-go', async () => {
    const table = await call(app, devKey, 'GET', `${k8s()}/api/v1/namespaces/${ns}/configmaps`, {
      headers: { accept: 'application/json;as=Table;v=v1;g=meta.k8s.io,application/json' },
    });
    assert.equal(table.status, 200);
    assert.equal(table.json().kind, 'Table');
    const proto = await call(app, devKey, 'GET', `${k8s()}/api/v1/namespaces/${ns}/configmaps`, {
      headers: { accept: 'application/vnd.kubernetes.protobuf' },
    });
    assert.equal(proto.status, 200);
    assert.equal(proto.headers['content-type'], 'application/vnd.kubernetes.protobuf');
    assert.ok(proto.text.startsWith('k8s\u0000'), 'the protobuf envelope, unchanged');
    // HEAD reaches the cluster as HEAD: its answer, whatever it is, comes back without a body.
    const path = `/api/v1/namespaces/${ns}/configmaps/kube-root-ca.crt`;
    const head = await call(app, devKey, 'HEAD', `${k8s()}${path}`);
    assert.equal(head.status, (await kubeRequest(app.cp, 'HEAD', path)).status);
    assert.equal(head.text, '');
  });

  test('a watch ends cleanly once its key is revoked', async () => {
    const config = parse(await app.mint(app.adminToken, { clusters: ['alpha'] }));
    const key = config.users[0].user.token as string;
    const { hostname, port } = new URL(app.base);
    const ended = await new Promise<{ end: Promise<string> }>((resolve, reject) => {
      const req = https.get(
        {
          host: hostname,
          port,
          path: `${k8s()}/api/v1/namespaces/${ns}/configmaps?watch=1`,
          ca: app.caPem,
          agent: false,
          headers: { authorization: `Bearer ${key}` },
        },
        (res) => {
          assert.equal(res.statusCode, 200);
          res.resume();
          resolve({
            end: new Promise<string>((done) => {
              res.on('end', () => done('end'));
              res.on('aborted', () => done('aborted'));
              res.on('error', () => done('aborted'));
            }),
          });
        },
      );
      req.on('error', reject);
    });
    const keys = await app.t.app.inject({
      method: 'GET',
      url: '/api/v1/auth/apikeys',
      headers: { authorization: `Bearer ${app.adminToken}` },
    });
    const id = (JSON.parse(keys.body) as Array<{ id: number; prefix: string }>).find((k) =>
      key.startsWith(k.prefix),
    )!.id;
    const started = Date.now();
    const revoked = await app.t.app.inject({
      method: 'DELETE',
      url: `/api/v1/auth/apikeys/${id}`,
      headers: { authorization: `Bearer ${app.adminToken}` },
    });
    assert.equal(revoked.statusCode, 200, revoked.body);
    const how = await Promise.race([ended.end, new Promise<string>((r) => setTimeout(() => r('still open'), 15_000))]);
    assert.equal(how, 'end', 'the watch ended cleanly');
    assert.ok(Date.now() - started < 10_000);
  });

  test('a body larger than the bound is a 413 Status', async () => {
    const res = await call(app, devKey, 'POST', `${k8s()}/api/v1/namespaces/${ns}/configmaps`, {
      headers: { 'content-type': 'application/json' },
      body: Buffer.alloc(10 * 1024 * 1024 + 1, 0x20),
    });
    assert.equal(res.status, 413, res.text);
    assert.equal(res.json().reason, 'RequestEntityTooLarge');
  });
});

describe('the Kubernetes API path on an impersonating cluster', () => {
  const ns = `kube-imp-${process.pid}`;
  let app: KubeApiApp;
  let key: string;
  let keyId: number;
  const base = '/api/v1/clusters/alpha/k8s';

  before(async () => {
    app = await startKubeApiApp({ cluster: 'alpha', namespace: ns, impersonate: true });
    key = await role(app, 'imp-dev', [
      { clusters: ['alpha'], namespaces: [ns], resources: ['configmaps'], verbs: ['*'] },
    ]);
    const keys = await app.t.app.inject({
      method: 'GET',
      url: '/api/v1/auth/apikeys',
      headers: { authorization: `Bearer ${key}` },
    });
    keyId = JSON.parse(keys.body)[0].id;
  });
  after(() => app?.close());

  test('an access review the service allows is put to the cluster as the person; its no is the answer', async () => {
    const review = () =>
      call(app, key, 'POST', `${base}/apis/authorization.k8s.io/v1/selfsubjectaccessreviews`, {
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          apiVersion: 'authorization.k8s.io/v1',
          kind: 'SelfSubjectAccessReview',
          spec: { resourceAttributes: { verb: 'list', resource: 'configmaps', namespace: ns } },
        }),
      });
    const before = await review();
    assert.equal(before.status, 201, before.text);
    assert.equal(before.json().status.allowed, false);
    assert.match(
      before.json().status.reason,
      /your roles allow it, but cluster 'alpha' does not allow it for cas:imp-dev-user/,
    );

    const binding = await kubeRequest(
      app.cp,
      'POST',
      `/apis/rbac.authorization.k8s.io/v1/namespaces/${ns}/rolebindings`,
      {
        metadata: { name: 'imp-dev-edit' },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'edit' },
        subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'Group', name: 'cas:role:imp-dev' }],
      },
    );
    assert.equal(binding.status, 201, JSON.stringify(binding.body));
    const allowed = await waitFor('the binding to take effect', async () => {
      const res = await review();
      return res.json().status.allowed === true ? res : undefined;
    });
    assert.match(allowed.json().status.reason, /role imp-dev; cluster 'alpha' allows it too/);
  });

  test("the apiserver's audit log names the person for reads, writes and watches", async () => {
    const name = `imp-${process.pid}`;
    const created = await call(app, key, 'POST', `${base}/api/v1/namespaces/${ns}/configmaps`, {
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ metadata: { name } }),
    });
    assert.equal(created.status, 201, created.text);
    assert.equal((await call(app, key, 'GET', `${base}/api/v1/namespaces/${ns}/configmaps/${name}`)).status, 200);
    const watched = await call(
      app,
      key,
      'GET',
      `${base}/api/v1/namespaces/${ns}/configmaps?watch=1&timeoutSeconds=1&fieldSelector=metadata.name%3D${name}`,
    );
    assert.equal(watched.status, 200);
    assert.match(watched.text, /"type":"ADDED"/);
    for (const verb of ['create', 'get', 'watch']) {
      const events = await waitForAudit(
        app.cp,
        (e) =>
          e.verb === verb &&
          e.objectRef?.namespace === ns &&
          e.objectRef?.resource === 'configmaps' &&
          e.impersonatedUser?.username === 'cas:imp-dev-user' &&
          e.impersonatedUser.extra?.['cas-key']?.[0] === String(keyId),
      );
      assert.ok(events.length > 0, `${verb} names the person`);
      assert.ok(events[0].impersonatedUser!.groups!.includes('cas:role:imp-dev'));
    }
  });
});
