import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { startTestApp, type TestApp } from '../support/app.js';
import { signedIn } from '../support/factories.js';
import { client } from '../support/http.js';
import { closedPort, contextFor, kubeconfigYaml, testCertificates } from '../support/kubeconfigs.js';

/** GET of one user and of one cluster: what the list shows of it, admin only, 404/400 on an unknown or bad id. */
describe('single-item GETs of users and clusters', () => {
  let t: TestApp;
  let admin: ReturnType<typeof client>;
  let viewer: ReturnType<typeof client>;
  let viewerId: number;

  before(async () => {
    t = await startTestApp({ env: { CAS_CLUSTER_HEALTH_INTERVAL_SECONDS: '0', CAS_CLUSTER_PROBE_TIMEOUT_MS: '2000' } });
    admin = client(t.app, (await signedIn(t, 'admin')).token);
    const v = await signedIn(t, 'viewer');
    viewerId = v.id;
    viewer = client(t.app, v.token);
  });
  after(() => t.close());

  test('GET /admin/users/{id} → the user as the list shows it, plus avatar_url; what PUT answered', async () => {
    const updated = await admin.put(`/api/v1/admin/users/${viewerId}`, {
      body: { name: 'Vera Viewer', avatar_url: 'https://example.com/v.png' },
    });
    assert.equal(updated.status, 200, updated.text);
    const res = await admin.get(`/api/v1/admin/users/${viewerId}`);
    assert.equal(res.status, 200, res.text);
    assert.deepEqual(res.body, updated.body);
    assert.equal(res.body.avatar_url, 'https://example.com/v.png');
    assert.deepEqual(
      res.body.roles.map((r: { name: string }) => r.name),
      ['viewer'],
    );
    assert.ok(!('password' in res.body) && !('passwordHash' in res.body), 'no password');
    const listed = (await admin.get('/api/v1/admin/users', { query: { search: res.body.username } })).body.users;
    const { avatar_url, ...rest } = res.body;
    assert.equal(avatar_url, 'https://example.com/v.png');
    assert.deepEqual(listed, [rest]);
  });

  test('GET /admin/clusters/{id} → the cluster as the list shows it; config is ""', async () => {
    const certs = await testCertificates();
    const server = `https://127.0.0.1:${await closedPort()}`;
    const config = kubeconfigYaml([
      contextFor({
        server,
        caData: certs.caData,
        adminCertData: certs.certData,
        adminKeyData: certs.keyData,
        adminToken: 'single-get-token',
      }),
    ]);
    const created = await admin.post('/api/v1/admin/clusters', { body: { name: 'one', config } });
    assert.equal(created.status, 201, created.text);
    const res = await admin.get(`/api/v1/admin/clusters/${created.body.id}`);
    assert.equal(res.status, 200, res.text);
    const listed = (await admin.get('/api/v1/admin/clusters')).body;
    assert.deepEqual([res.body], listed);
    assert.equal(res.body.name, 'one');
    assert.equal(res.body.config, '');
    assert.ok(!res.text.includes('single-get-token'), 'no credential in the answer');
  });

  test('an unknown id → 404 naming it; a malformed id → 400; a viewer → 403', async () => {
    for (const kind of ['users', 'clusters']) {
      const missing = await admin.get(`/api/v1/admin/${kind}/999999`);
      assert.equal(missing.status, 404, missing.text);
      assert.equal(missing.body.message, `${kind.slice(0, -1)} 999999 not found`);
      for (const bad of ['abc', '0', '-1', '99999999999']) {
        const res = await admin.get(`/api/v1/admin/${kind}/${bad}`);
        assert.equal(res.status, 400, `${kind}/${bad}: ${res.text}`);
        assert.match(res.body.message[0], /^id must be a positive integer/);
      }
      const refused = await viewer.get(`/api/v1/admin/${kind}/${viewerId}`);
      assert.equal(refused.status, 403, refused.text);
    }
    const anonymous = await client(t.app).get(`/api/v1/admin/users/${viewerId}`);
    assert.equal(anonymous.status, 401);
  });
});
