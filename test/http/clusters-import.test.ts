import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { createApp } from '../../src/app.js';
import { loadConfig } from '../../src/config/config.js';
import { createPostgresDatabase, onPostgres, startTestApp, type TestApp } from '../support/app.js';
import { login, signedIn } from '../support/factories.js';
import { client, request } from '../support/http.js';
import { closedPort, contextFor, kubeconfigYaml, testCertificates, type ContextSpec } from '../support/kubeconfigs.js';

const QUICK = { CAS_CLUSTER_HEALTH_INTERVAL_SECONDS: '0', CAS_CLUSTER_PROBE_TIMEOUT_MS: '1000' };
let certs: Awaited<ReturnType<typeof testCertificates>>;
let server: string;

function offline(name: string, user?: Record<string, unknown>): ContextSpec {
  const spec = contextFor(
    { server, caData: certs.caData, adminCertData: certs.certData, adminKeyData: certs.keyData },
    { name, token: `token-of-${name}` },
  );
  return user ? { ...spec, user } : spec;
}

async function names(t: TestApp): Promise<Array<{ name: string; is_default: unknown }>> {
  return t.dataSource.query('SELECT name, is_default FROM clusters ORDER BY id');
}

before(async () => {
  certs = await testCertificates();
  server = `https://127.0.0.1:${await closedPort()}`;
});

describe('import during initial setup (no user yet)', () => {
  let t: TestApp;
  const anonymous = () => client(t.app);
  before(async () => {
    t = await startTestApp({ env: QUICK });
  });
  after(() => t.close());

  test('bad bodies and one invalid context → 400 listing every problem; nothing stored', async () => {
    const cases: Array<[unknown, RegExp]> = [
      [{}, /config \(a kubeconfig\) is required unless inCluster is true/],
      [{ inCluster: false }, /config \(a kubeconfig\) is required/],
      [{ config: kubeconfigYaml([offline('x')]), inCluster: true }, /send config or inCluster: true, not both/],
      [{ config: 'x', clusters: [] }, /property clusters should not exist/],
    ];
    for (const [body, pattern] of cases) {
      const res = await anonymous().post('/api/v1/admin/clusters/import', { body });
      assert.equal(res.status, 400, JSON.stringify(body).slice(0, 80));
      assert.match(res.body.message.join('\n'), pattern);
    }
    const mixed = kubeconfigYaml(
      [
        offline('good'),
        offline('runs-a-program', { exec: { command: 'aws', args: ['eks', 'get-token'] } }),
        offline('with space'),
      ],
      'good',
    );
    const res = await anonymous().post('/api/v1/admin/clusters/import', { body: { config: mixed } });
    assert.equal(res.status, 400);
    assert.deepEqual(res.body.message, [
      'users[1].user.exec is not allowed: a stored kubeconfig must never run a program',
      "contexts[2].name 'with space' cannot be a cluster name: use 1–253 printable ASCII characters without spaces",
    ]);
    assert.deepEqual(await names(t), []);
  });

  test('a three-context kubeconfig → three clusters named after the contexts, current-context the default; then 409', async () => {
    const config = kubeconfigYaml([offline('dev'), offline('staging'), offline('prod')], 'staging');
    const res = await anonymous().post('/api/v1/admin/clusters/import', { body: { config } });
    assert.equal(res.status, 201, res.text);
    assert.equal(res.body.message, 'imported 3 clusters');
    assert.deepEqual(
      res.body.clusters.map((c: { name: string; isDefault: boolean }) => [c.name, c.isDefault]),
      [
        ['dev', false],
        ['staging', true],
        ['prod', false],
      ],
    );
    for (const c of res.body.clusters) assert.equal(typeof c.id, 'number');
    assert.ok(!res.text.includes('token-of-'));

    const again = await anonymous().post('/api/v1/admin/clusters/import', { body: { config } });
    assert.equal(again.status, 409);
    assert.match(again.body.message, /clusters already exist: import is for initial setup only/);
    assert.equal((await names(t)).length, 3);
  });

  test('once a user exists, an anonymous import is 401 and an admin one still 409', async () => {
    const admin = await signedIn(t, 'admin');
    const config = kubeconfigYaml([offline('late')]);
    const res = await anonymous().post('/api/v1/admin/clusters/import', { body: { config } });
    assert.equal(res.status, 401);
    const viewer = await signedIn(t, 'viewer');
    assert.equal(
      (await client(t.app, viewer.token).post('/api/v1/admin/clusters/import', { body: { config } })).status,
      403,
    );
    assert.equal(
      (await client(t.app, admin.token).post('/api/v1/admin/clusters/import', { body: { config } })).status,
      409,
    );
    const listed = await client(t.app, admin.token).get('/api/v1/admin/clusters');
    assert.deepEqual(
      listed.body.map((c: { name: string; status: string; server: string }) => [c.name, c.status, c.server]),
      [
        ['dev', 'unreachable', server],
        ['staging', 'unreachable', server],
        ['prod', 'unreachable', server],
      ],
    );
  });
});

describe('import of concurrent callers', () => {
  let t: TestApp;
  before(async () => {
    t = await startTestApp({ env: QUICK });
  });
  after(() => t.close());

  test('10 concurrent imports: exactly one 201, the rest 409, and one set of clusters', async () => {
    const results = await Promise.all(
      Array.from({ length: 10 }, (_, i) =>
        request(t.app, 'POST', '/api/v1/admin/clusters/import', {
          body: { config: kubeconfigYaml([offline(`a${i}`), offline(`b${i}`)]) },
        }),
      ),
    );
    const statuses = results.map((r) => r.status);
    assert.equal(statuses.filter((s) => s === 201).length, 1, statuses.join(','));
    assert.equal(statuses.filter((s) => s === 409).length, 9);
    assert.equal((await names(t)).length, 2);
  });

  test('inCluster: true outside a Kubernetes pod → the cluster in-cluster, with status error saying why', async () => {
    const fresh = await startTestApp({ env: QUICK });
    try {
      const admin = client(fresh.app, (await signedIn(fresh, 'admin')).token);
      const res = await admin.post('/api/v1/admin/clusters/import', { body: { inCluster: true } });
      assert.equal(res.status, 201, res.text);
      assert.deepEqual(
        res.body.clusters.map((c: { name: string; isDefault: boolean }) => [c.name, c.isDefault]),
        [['in-cluster', true]],
      );
      const [c] = (await admin.get('/api/v1/admin/clusters')).body;
      assert.equal(c.inCluster, true);
      assert.equal(c.status, 'error');
      assert.match(c.error, /does not run in a Kubernetes cluster/);
      const update = await admin.put(`/api/v1/admin/clusters/${c.id}`, {
        body: { config: kubeconfigYaml([offline('x')]) },
      });
      assert.equal(update.status, 400);
      assert.match(update.body.message.join(), /config cannot be set on an in-cluster cluster/);
    } finally {
      await fresh.close();
    }
  });
});

describe('bootstrap from the environment (CAS_BOOTSTRAP_KUBECONFIG_FILE)', () => {
  let dir: string;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'cas-bootstrap-kc-'));
  });
  after(() => rm(dir, { recursive: true, force: true }));

  test('imports at start; a restart on the same database imports nothing more', async () => {
    const file = join(dir, 'kubeconfig');
    await writeFile(file, kubeconfigYaml([offline('one'), offline('two')], 'two'), { mode: 0o600 });
    const env = {
      ...QUICK,
      CAS_BOOTSTRAP_KUBECONFIG_FILE: file,
      CAS_ENCRYPTION_KEY: randomBytes(32).toString('base64'),
    };
    const first = await startTestApp({ env });
    try {
      assert.deepEqual(
        (await names(first)).map((r) => [r.name, Boolean(r.is_default)]),
        [
          ['one', false],
          ['two', true],
        ],
      );
      const second = await startTestApp({ env, databaseUrl: first.databaseUrl });
      await second.close();
      assert.equal((await names(first)).length, 2);
    } finally {
      await first.close();
    }
  });

  test('an unusable file stops the start with a message naming the variable', async () => {
    const bad = join(dir, 'bad-kubeconfig');
    await writeFile(bad, kubeconfigYaml([offline('x', { tokenFile: '/etc/token' })]));
    const cases: Array<[string, RegExp]> = [
      [bad, /^CAS_BOOTSTRAP_KUBECONFIG_FILE: users\[0\]\.user\.tokenFile is not allowed/],
      [join(dir, 'missing'), /^CAS_BOOTSTRAP_KUBECONFIG_FILE: cannot read .*missing \(ENOENT\)/],
    ];
    for (const [file, pattern] of cases) {
      const dataDir = await mkdtemp(join(tmpdir(), 'cas-bootstrap-bad-'));
      const db = onPostgres ? await createPostgresDatabase() : undefined;
      try {
        const config = loadConfig({
          ...QUICK,
          CAS_DATA_DIR: dataDir,
          LOG_LEVEL: 'silent',
          DATABASE_URL: db?.url ?? `sqlite:${join(dataDir, 'cas.sqlite')}`,
          CAS_BOOTSTRAP_KUBECONFIG_FILE: file,
        });
        await assert.rejects(createApp(config), (error: Error) => pattern.test(error.message));
      } finally {
        await db?.drop();
        await rm(dataDir, { recursive: true, force: true });
      }
    }
  });

  test('together with CAS_BOOTSTRAP_USERNAME: the super user sees the imported cluster as the default', async () => {
    const file = join(dir, 'kubeconfig-with-user');
    await writeFile(file, kubeconfigYaml([offline('solo')]));
    const t = await startTestApp({
      env: {
        ...QUICK,
        CAS_BOOTSTRAP_KUBECONFIG_FILE: file,
        CAS_BOOTSTRAP_USERNAME: 'root',
        CAS_BOOTSTRAP_PASSWORD: 'root-password-1',
      },
    });
    try {
      const token = await login(t, { username: 'root', password: 'root-password-1' });
      const listed = await client(t.app, token).get('/api/v1/clusters');
      assert.deepEqual(
        listed.body.map((c: { name: string; isDefault: boolean }) => [c.name, c.isDefault]),
        [['solo', true]],
      );
    } finally {
      await t.close();
    }
  });
});
