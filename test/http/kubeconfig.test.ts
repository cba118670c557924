// POST /api/v1/auth/kubeconfig: a kubeconfig per caller with one new, expiring, revocable
// key of the caller's, contexts only for clusters the caller has a rule on, never a cluster's credentials.
import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { parse } from 'yaml';
import { startTestApp, type TestApp } from '../support/app.js';
import { registerCluster } from '../support/clusters.js';
import { createUser, login, signedIn } from '../support/factories.js';
import { client, request } from '../support/http.js';
import { b64, closedPort, kubeconfigYaml, testCertificates } from '../support/kubeconfigs.js';

const CLUSTER_TOKEN = 'the-clusters-own-token-never-handed-out';

describe('POST /api/v1/auth/kubeconfig', () => {
  let t: TestApp;
  let dir: string;
  let caPem: string;
  let admin: string;
  let scoped: string;
  let scopedId: number;

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'cas-kubeconfig-'));
    const { caData } = await testCertificates();
    caPem = caData;
    await writeFile(join(dir, 'public-ca.crt'), caPem);
    t = await startTestApp({
      env: {
        CAS_PUBLIC_URL: 'https://cas.example.com',
        CAS_PUBLIC_CA_FILE: join(dir, 'public-ca.crt'),
        CAS_KUBECONFIG_MAX_SECONDS: '86400',
        CAS_CLUSTER_HEALTH_INTERVAL_SECONDS: '0',
        CAS_CLUSTER_PROBE_TIMEOUT_MS: '200',
      },
    });
    admin = (await signedIn(t, 'admin')).token;
    const server = `https://127.0.0.1:${await closedPort()}`;
    const config = kubeconfigYaml([
      { name: 'c', cluster: { server, 'certificate-authority-data': b64(caData) }, user: { token: CLUSTER_TOKEN } },
    ]);
    for (const name of ['a', 'b', 'off', 'team/x']) await registerCluster(t, admin, name, config);
    const clusters = (await request(t.app, 'GET', '/api/v1/admin/clusters', { token: admin })).body as Array<{
      id: number;
      name: string;
    }>;
    const off = clusters.find((c) => c.name === 'off')!;
    const disabled = await request(t.app, 'PUT', `/api/v1/admin/clusters/${off.id}`, {
      token: admin,
      body: { enabled: false },
    });
    assert.equal(disabled.status, 200, disabled.text);
    const role = await request(t.app, 'POST', '/api/v1/admin/roles', {
      token: admin,
      body: {
        name: 'a-dev',
        rules: [{ clusters: ['a'], namespaces: ['shop'], resources: ['pods'], verbs: ['get', 'list'] }],
      },
    });
    assert.equal(role.status, 201, role.text);
    const user = await createUser(t, { role: 'a-dev' as never });
    scopedId = user.id;
    scoped = await login(t, user);
  });
  after(async () => {
    await t?.close();
    await rm(dir, { recursive: true, force: true });
  });

  const mint = (token: string, body: unknown = {}) =>
    t.app.inject({
      method: 'POST',
      url: '/api/v1/auth/kubeconfig',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      payload: JSON.stringify(body),
    });

  test("an admin's default kubeconfig: every enabled cluster, the public URL and CA, one expiring key", async () => {
    const before = Date.now();
    const res = await mint(admin);
    assert.equal(res.statusCode, 201, res.body);
    assert.match(String(res.headers['content-type']), /^application\/yaml/);
    assert.equal(res.headers['cache-control'], 'no-store');
    assert.ok(!res.body.includes(CLUSTER_TOKEN), "the cluster's own token is never in a kubeconfig");
    const config = parse(res.body);
    assert.deepEqual(
      config.clusters.map((c: any) => [c.name, c.cluster.server, c.cluster['certificate-authority-data']]),
      [
        ['a', 'https://cas.example.com/api/v1/clusters/a/k8s', b64(caPem)],
        ['b', 'https://cas.example.com/api/v1/clusters/b/k8s', b64(caPem)],
        ['team/x', 'https://cas.example.com/api/v1/clusters/team%2Fx/k8s', b64(caPem)],
      ],
    );
    assert.deepEqual(
      config.contexts.map((c: any) => c.name),
      ['a', 'b', 'team/x'],
    );
    assert.equal(config['current-context'], 'a', 'the default cluster (the first registered)');
    const token = config.users[0].user.token as string;
    assert.match(token, /^cas_key_/);
    const me = await request(t.app, 'GET', '/api/v1/auth/me', { token });
    assert.equal(me.status, 200, 'the key works');
    const keys = (await client(t.app, admin).get('/api/v1/auth/apikeys')).body as Array<Record<string, any>>;
    const key = keys.find((k) => token.startsWith(k.prefix));
    assert.ok(key, 'the key is listed with the caller’s own keys');
    assert.deepEqual(key.roles, ['admin']);
    const expires = Date.parse(key.expiresAt);
    assert.ok(Math.abs(expires - (before + 8 * 3600_000)) < 60_000, `expires in 8 h: ${key.expiresAt}`);
    const revoked = await client(t.app, admin).delete(`/api/v1/auth/apikeys/${key.id}`);
    assert.equal(revoked.status, 200);
    assert.equal((await request(t.app, 'GET', '/api/v1/auth/me', { token })).status, 401, 'revoked at once');
  });

  test('a scoped user gets only the clusters it has a rule on, with its own roles, for the time it asks', async () => {
    const res = await mint(scoped, { expiresInSeconds: 600 });
    assert.equal(res.statusCode, 201, res.body);
    const config = parse(res.body);
    assert.deepEqual(
      config.contexts.map((c: any) => c.name),
      ['a'],
    );
    const keys = (await client(t.app, scoped).get('/api/v1/auth/apikeys')).body as Array<Record<string, any>>;
    assert.equal(keys.length, 1);
    assert.equal(keys[0].owner.id, scopedId);
    assert.deepEqual(keys[0].roles, ['a-dev']);
    assert.ok(Math.abs(Date.parse(keys[0].expiresAt) - (Date.now() + 600_000)) < 60_000);
  });

  test('bad input: a clear 4xx naming the problem, and no key stored', async () => {
    const count = async () => Number((await t.dataSource.query('SELECT COUNT(*) AS n FROM api_keys'))[0].n);
    const keysBefore = await count();
    const cases: Array<[string, unknown, number, RegExp]> = [
      [admin, { expiresInSeconds: 0 }, 400, /expiresInSeconds must not be less than 1/],
      [admin, { expiresInSeconds: 86401 }, 400, /expiresInSeconds must be at most 86400/],
      [admin, { expiresInSeconds: 'soon' }, 400, /expiresInSeconds must be an integer/],
      [admin, { clusters: ['a', 'nope', 'off'] }, 400, /no cluster named 'nope'.*cluster 'off' is disabled/],
      [admin, { clusters: [] }, 400, /clusters must contain at least 1/],
      [admin, { clusters: ['a'], extra: 1 }, 400, /property extra should not exist/],
      [scoped, { clusters: ['a', 'b'] }, 403, /grant nothing on cluster 'b'/],
      [scoped, { clusters: ['nope'] }, 403, /grant nothing on cluster 'nope'/],
    ];
    for (const [token, body, status, message] of cases) {
      const res = await mint(token, body);
      assert.equal(res.statusCode, status, `${JSON.stringify(body)}: ${res.body}`);
      assert.match(res.body, message, JSON.stringify(body));
    }
    assert.equal(await count(), keysBefore, 'nothing stored');
  });

  test('a caller without a rule on any enabled cluster is refused', async () => {
    const { token } = await signedIn(t, 'viewer');
    // viewer has '*' clusters: allowed; a role on a disabled cluster only is not
    assert.equal((await mint(token)).statusCode, 201);
    await request(t.app, 'POST', '/api/v1/admin/roles', {
      token: admin,
      body: { name: 'off-only', rules: [{ clusters: ['off'], namespaces: ['*'], resources: ['*'], verbs: ['get'] }] },
    });
    const offOnly = await login(t, await createUser(t, { role: 'off-only' as never }));
    const res = await mint(offOnly);
    assert.equal(res.statusCode, 403, res.body);
    assert.match(res.body, /grant nothing on any enabled cluster/);
  });
});
