import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { ClusterClientFactory } from '../../src/clusters/cluster-client.factory.js';
import { startTestApp, onPostgres, type TestApp } from '../support/app.js';
import { signedIn } from '../support/factories.js';
import { client } from '../support/http.js';
import {
  b64,
  closedPort,
  contextFor,
  kubeconfigYaml,
  testCertificates,
  type ContextSpec,
} from '../support/kubeconfigs.js';

const CLUSTER_KEYS = [
  'config',
  'createdAt',
  'description',
  'enabled',
  'error',
  'id',
  'impersonate',
  'inCluster',
  'isDefault',
  'metricsError',
  'metricsStatus',
  'metricsURL',
  'name',
  'server',
  'status',
  'updatedAt',
  'version',
];
const TOKEN = 'cas-test-token-that-must-never-leak-7f3a9c';

let certs: Awaited<ReturnType<typeof testCertificates>>;
let server: string;

/** A kubeconfig for a server nothing listens on: registering it needs no cluster. */
function offline(options: { name?: string; token?: string; auth?: 'token' | 'cert' } = {}): ContextSpec {
  return contextFor(
    { server, caData: certs.caData, adminCertData: certs.certData, adminKeyData: certs.keyData, adminToken: TOKEN },
    options,
  );
}

function yaml(spec: ContextSpec = offline()): string {
  return kubeconfigYaml([spec]);
}

async function count(t: TestApp): Promise<number> {
  return Number((await t.dataSource.query('SELECT COUNT(*) AS n FROM clusters'))[0].n);
}

describe('cluster registry', () => {
  let t: TestApp;
  let admin: ReturnType<typeof client>;
  let viewer: ReturnType<typeof client>;

  before(async () => {
    certs = await testCertificates();
    server = `https://127.0.0.1:${await closedPort()}`;
    t = await startTestApp({ env: { CAS_CLUSTER_HEALTH_INTERVAL_SECONDS: '0', CAS_CLUSTER_PROBE_TIMEOUT_MS: '2000' } });
    admin = client(t.app, (await signedIn(t, 'admin')).token);
    viewer = client(t.app, (await signedIn(t, 'viewer')).token);
  });
  after(() => t.close());

  async function list(): Promise<any[]> {
    const res = await admin.get('/api/v1/admin/clusters');
    assert.equal(res.status, 200);
    return res.body;
  }

  async function create(body: Record<string, unknown>): Promise<number> {
    const res = await admin.post('/api/v1/admin/clusters', { body: { config: yaml(), ...body } });
    assert.equal(res.status, 201, res.text);
    return res.body.id;
  }

  test('create → 201 {id, message}; an unreachable server is registered with status unreachable; no credential is returned', async () => {
    const res = await admin.post('/api/v1/admin/clusters', {
      body: {
        name: 'first',
        description: 'the first one',
        config: kubeconfigYaml([offline({ auth: 'cert' })]),
        metricsURL: 'http://prometheus.monitoring:9090',
      },
    });
    assert.equal(res.status, 201, res.text);
    assert.deepEqual(Object.keys(res.body).sort(), ['id', 'message']);
    assert.equal(typeof res.body.id, 'number');
    assert.equal(res.body.message, "cluster 'first' created");

    const clusters = await list();
    assert.equal(clusters.length, 1);
    const [c] = clusters;
    assert.deepEqual(Object.keys(c).sort(), CLUSTER_KEYS);
    assert.equal(c.id, res.body.id);
    assert.equal(c.name, 'first');
    assert.equal(c.description, 'the first one');
    assert.equal(c.metricsURL, 'http://prometheus.monitoring:9090');
    assert.equal(c.config, '');
    assert.equal(c.server, server);
    assert.equal(c.enabled, true);
    assert.equal(c.inCluster, false);
    assert.equal(c.isDefault, true, 'the first cluster becomes the default');
    assert.equal(c.status, 'unreachable');
    assert.equal(c.error, 'unreachable: connection refused', 'a short class, not the socket message');
    assert.equal(c.version, '');
    assert.match(c.createdAt, /Z$/);
    for (const secret of [b64(certs.keyData), b64(certs.certData), certs.keyData.split('\n')[1]]) {
      assert.ok(!JSON.stringify(clusters).includes(secret));
    }
  });

  test('kubeconfigs that run programs, read files or cannot be used → 400 naming the field; nothing stored', async () => {
    const before = await count(t);
    const withUser = (user: Record<string, unknown>) => yaml({ ...offline(), user });
    const withCluster = (cluster: Record<string, unknown>) => yaml({ ...offline(), cluster: { server, ...cluster } });
    const cases: Array<[string, RegExp]> = [
      [
        withUser({ exec: { command: 'sh', apiVersion: 'client.authentication.k8s.io/v1' } }),
        /users\[0\]\.user\.exec is not allowed/,
      ],
      [withUser({ 'auth-provider': { name: 'oidc', config: {} } }), /users\[0\]\.user\.auth-provider is not allowed/],
      [withUser({ tokenFile: '/var/run/secrets/token' }), /users\[0\]\.user\.tokenFile is not allowed/],
      [
        withUser({ 'client-certificate': '/etc/cas/admin.crt', 'client-key-data': b64(certs.keyData) }),
        /users\[0\]\.user\.client-certificate is not allowed/,
      ],
      [
        withCluster({ 'certificate-authority': '/etc/cas/ca.crt' }),
        /clusters\[0\]\.cluster\.certificate-authority is not allowed/,
      ],
      ['clusters: [\n  - name: x\n', /config is not valid YAML/],
      ['apiVersion: v1\nkind: Config\nclusters: []\nusers: []\ncontexts: []\n', /no usable context/],
      [kubeconfigYaml([offline({ name: 'a' }), offline({ name: 'b' })], null), /no current-context/],
      [withUser({}), /no inline credentials/],
    ];
    for (const [config, pattern] of cases) {
      const res = await admin.post('/api/v1/admin/clusters', { body: { name: 'refused', config } });
      assert.equal(res.status, 400, `${pattern}: ${res.text}`);
      assert.ok(Array.isArray(res.body.message));
      assert.match(res.body.message.join('\n'), pattern);
    }
    assert.equal(await count(t), before);
  });

  test('create body rules → 400 naming the property; nothing stored', async () => {
    const before = await count(t);
    const cases: Array<[Record<string, unknown>, RegExp]> = [
      [{ name: 'x', config: yaml(), metricsUrl: 'http://m' }, /property metricsUrl should not exist/],
      [{ name: 'x', config: yaml(), enabled: false }, /property enabled should not exist/],
      [{ name: 'has space', config: yaml() }, /name must be 1–253 printable ASCII/],
      [{ name: '', config: yaml() }, /name must be 1–253/],
      [{ name: 'n'.repeat(254), config: yaml() }, /name must be 1–253/],
      [{ config: yaml() }, /name/],
      [{ name: 'x' }, /config \(a kubeconfig\) is required unless inCluster is true/],
      [{ name: 'x', config: '' }, /config \(a kubeconfig\) is required/],
      [{ name: 'x', config: yaml(), inCluster: true }, /config must be empty when inCluster is true/],
      [{ name: 'x', config: yaml(), metricsURL: 'ftp://m' }, /metricsURL must be an http\(s\) URL/],
      [{ name: 'x', config: yaml(), isDefault: 'yes' }, /isDefault must be a boolean/],
    ];
    for (const [body, pattern] of cases) {
      const res = await admin.post('/api/v1/admin/clusters', { body });
      assert.equal(res.status, 400, `${JSON.stringify(body).slice(0, 80)}: ${res.text}`);
      assert.match(res.body.message.join('\n'), pattern);
    }
    assert.equal(await count(t), before);
  });

  test("a stored kubeconfig's token and key appear nowhere in clear in the database", async () => {
    const tokenId = await create({ name: 'token-holder', config: yaml(offline({ auth: 'token' })) });
    const keyId = await create({ name: 'key-holder', config: yaml(offline({ auth: 'cert' })) });
    const rows = await t.dataSource.query(`SELECT * FROM clusters WHERE id IN (${tokenId}, ${keyId})`);
    assert.equal(rows.length, 2);
    const secrets = [TOKEN, b64(certs.keyData), certs.keyData.split('\n')[1], b64(TOKEN)];
    const dump = JSON.stringify(rows);
    for (const secret of secrets) assert.ok(!dump.includes(secret), 'a credential is in a row in clear');
    for (const row of rows)
      assert.match(row.config_sealed, /^v1\.[A-Za-z0-9_-]{11}\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/);
    if (!onPostgres) {
      await t.dataSource.query('PRAGMA wal_checkpoint(FULL)');
      for (const file of ['cas.sqlite', 'cas.sqlite-wal']) {
        const bytes = await readFile(join(t.dataDir, file)).catch(() => Buffer.alloc(0));
        for (const secret of secrets) assert.equal(bytes.indexOf(secret), -1, `${file} holds a credential in clear`);
      }
    }
  });

  test('exactly one default: isDefault moves it; 50 concurrent moves leave one; refusing to unset or delete it', async () => {
    const ids: number[] = [];
    for (let i = 0; i < 5; i++) ids.push(await create({ name: `pool-${i}` }));
    const moved = await admin.put(`/api/v1/admin/clusters/${ids[2]}`, { body: { isDefault: true } });
    assert.equal(moved.status, 200);
    assert.deepEqual(moved.body, { message: "cluster 'pool-2' updated" });
    assert.deepEqual(
      (await list()).filter((c) => c.isDefault).map((c) => c.id),
      [ids[2]],
    );

    const results = await Promise.all(
      Array.from({ length: 50 }, (_, i) =>
        admin.put(`/api/v1/admin/clusters/${ids[i % ids.length]}`, { body: { isDefault: true } }),
      ),
    );
    assert.deepEqual(
      results.map((r) => r.status),
      Array(50).fill(200),
    );
    const defaults = (await list()).filter((c) => c.isDefault);
    assert.equal(defaults.length, 1, `defaults: ${defaults.map((c) => c.name)}`);
    const [theDefault] = defaults;

    const unset = await admin.put(`/api/v1/admin/clusters/${theDefault.id}`, { body: { isDefault: false } });
    assert.equal(unset.status, 409);
    assert.match(unset.body.message, /is the default cluster; make another cluster the default/);
    const del = await admin.delete(`/api/v1/admin/clusters/${theDefault.id}`);
    assert.equal(del.status, 409);
    assert.match(del.body.message, /default cluster and cannot be deleted/);
    assert.equal((await list()).filter((c) => c.isDefault).length, 1);

    const other = ids.find((id) => id !== theDefault.id)!;
    const noop = await admin.put(`/api/v1/admin/clusters/${other}`, { body: { isDefault: false } });
    assert.equal(noop.status, 200, 'isDefault: false on a cluster that is not the default changes nothing');
    const deleted = await admin.delete(`/api/v1/admin/clusters/${other}`);
    assert.equal(deleted.status, 200);
    assert.match(deleted.body.message, /^cluster 'pool-\d' deleted$/);
    assert.equal((await admin.delete(`/api/v1/admin/clusters/${other}`)).status, 404);
  });

  test('update changes only what is sent; config omitted or "" keeps it; rename; 409, 404, 400', async () => {
    const id = await create({ name: 'mutable', description: 'before', metricsURL: 'https://m.example.com' });
    const row = async () =>
      (await t.dataSource.query(`SELECT config_sealed, generation FROM clusters WHERE id = ${id}`))[0];
    const original = await row();
    const get = async () => (await list()).find((c) => c.id === id);
    const start = await get();

    assert.equal((await admin.put(`/api/v1/admin/clusters/${id}`, { body: { description: 'after' } })).status, 200);
    let now = await get();
    assert.deepEqual({ ...now, updatedAt: undefined }, { ...start, description: 'after', updatedAt: undefined });
    assert.deepEqual(await row(), original, 'config and generation unchanged');

    assert.equal((await admin.put(`/api/v1/admin/clusters/${id}`, { body: { config: '' } })).status, 200);
    assert.deepEqual(await row(), original, 'config "" keeps the stored one');
    assert.equal((await admin.put(`/api/v1/admin/clusters/${id}`, { body: {} })).status, 200);
    assert.deepEqual(await get(), now, 'an empty update changes nothing, not even updatedAt');

    const renamed = await admin.put(`/api/v1/admin/clusters/${id}`, { body: { name: 'renamed' } });
    assert.equal(renamed.status, 200);
    assert.equal(renamed.body.message, "cluster 'renamed' updated");
    now = await get();
    assert.equal(now.name, 'renamed');
    assert.equal(now.metricsURL, 'https://m.example.com');
    assert.equal(Number((await row()).generation), Number(original.generation) + 1, 'a rename bumps the generation');

    assert.equal(
      (await admin.put(`/api/v1/admin/clusters/${id}`, { body: { config: yaml(offline({ token: 'new' })) } })).status,
      200,
    );
    assert.notEqual((await row()).config_sealed, original.config_sealed, 'a new config is stored');

    const cases: Array<[string, unknown, number, RegExp]> = [
      [`${id}`, { name: 'first' }, 409, /a cluster named 'first' already exists/],
      ['999999', { description: 'x' }, 404, /cluster 999999 not found/],
      [`${id}`, { metricsUrl: 'http://m' }, 400, /property metricsUrl should not exist/],
      [`${id}`, { inCluster: true }, 400, /property inCluster should not exist/],
      [`${id}`, { name: '' }, 400, /name must be 1–253/],
      [
        `${id}`,
        { config: yaml({ ...offline(), user: { exec: { command: 'x' } } }) },
        400,
        /users\[0\]\.user\.exec is not allowed/,
      ],
      ['abc', { description: 'x' }, 400, /id must be a positive integer/],
    ];
    for (const [target, body, status, pattern] of cases) {
      const res = await admin.put(`/api/v1/admin/clusters/${target}`, { body });
      assert.equal(res.status, status, `${JSON.stringify(body).slice(0, 60)}: ${res.text}`);
      assert.match([res.body.message].flat().join('\n'), pattern);
    }
    assert.equal((await get()).name, 'renamed');
  });

  test('disabled clusters: status disabled, hidden from GET /clusters, refused by the connection factory', async () => {
    const id = await create({ name: 'switchable' });
    const res = await admin.put(`/api/v1/admin/clusters/${id}`, { body: { enabled: false } });
    assert.equal(res.status, 200);
    const c = (await list()).find((x) => x.id === id);
    assert.equal(c.enabled, false);
    assert.equal(c.status, 'disabled');

    const available = await viewer.get('/api/v1/clusters');
    assert.equal(available.status, 200);
    for (const entry of available.body)
      assert.deepEqual(Object.keys(entry).sort(), ['isDefault', 'name', 'status', 'version']);
    const names = available.body.map((x: { name: string }) => x.name);
    assert.ok(!names.includes('switchable'));
    const enabled = (await list()).filter((x) => x.enabled).map((x) => x.name);
    assert.deepEqual([...names].sort(), [...enabled].sort());
    assert.equal(available.body.filter((x: { isDefault: boolean }) => x.isDefault).length, 1);

    const connections = t.app.get(ClusterClientFactory);
    await assert.rejects(connections.forName('switchable'), {
      status: 409,
      message: "cluster 'switchable' is disabled",
    });
    await assert.rejects(connections.forName('no-such-cluster'), {
      status: 404,
      message: "cluster 'no-such-cluster' not found",
    });

    assert.equal((await admin.put(`/api/v1/admin/clusters/${id}`, { body: { enabled: true } })).status, 200);
    const conn = await connections.forName('switchable');
    assert.equal(conn.clusterId, id);
    assert.equal(conn.server.origin, server);
    assert.deepEqual(conn.authHeaders(), { authorization: `Bearer ${TOKEN}` });
  });

  test('who may call: viewers list available clusters but not the admin routes; anonymous callers neither', async () => {
    assert.equal((await viewer.get('/api/v1/admin/clusters')).status, 403);
    assert.equal((await viewer.post('/api/v1/admin/clusters', { body: { name: 'v', config: yaml() } })).status, 403);
    assert.equal((await viewer.post('/api/v1/admin/clusters/import', { body: { config: yaml() } })).status, 403);
    const anonymous = client(t.app);
    assert.equal((await anonymous.get('/api/v1/clusters')).status, 401);
    assert.equal((await anonymous.get('/api/v1/admin/clusters')).status, 401);
  });
});
