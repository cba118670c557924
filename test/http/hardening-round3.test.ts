// Issue 29 (security, round 3): the findings that need no cluster. Each test fails on the code
// before its fix.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { AuditEventEntity } from '../../src/audit/audit-event.entity.js';
import { AuditService } from '../../src/audit/audit.service.js';
import { AddressNotAllowedError } from '../../src/clusters/address-policy.js';
import { ClusterTimeoutError, translateFailure } from '../../src/clusters/gateway/failures.js';
import { startTestApp, type TestApp } from '../support/app.js';
import { registerCluster } from '../support/clusters.js';
import { closedPort, contextFor, kubeconfigYaml, testCertificates } from '../support/kubeconfigs.js';
import { createUser, signedIn } from '../support/factories.js';
import { request } from '../support/http.js';

async function auditRows(t: TestApp): Promise<AuditEventEntity[]> {
  await t.app.get(AuditService).flush();
  return t.dataSource.getRepository(AuditEventEntity).find({ order: { id: 'ASC' } });
}

describe('CAS_TRUST_PROXY=1: only the proxy in front is believed (#8)', () => {
  let t: TestApp;
  before(async () => {
    t = await startTestApp({ env: { CAS_TRUST_PROXY: '1' } });
  });
  after(() => t.close());

  test('a forged leading X-Forwarded-For entry is not the recorded address; the proxy-appended one is', async () => {
    const user = await createUser(t);
    const res = await request(t.app, 'POST', '/api/v1/auth/login', {
      body: { username: user.username, password: 'not-the-password' },
      // The client wrote the first entry; the proxy in front appended the address it saw.
      headers: { 'x-forwarded-for': '203.0.113.66, 198.51.100.7' },
    });
    assert.equal(res.status, 401);
    const row = (await auditRows(t)).find((r) => r.operation === 'login' && r.actorName === user.username);
    assert.equal(row?.clientAddress, '198.51.100.7');
  });
});

describe('refused logins are tallied, not one audit row each (#7)', () => {
  const ADDRESSES = ['192.0.2.10', '192.0.2.11'];
  const MAX_FAILURES_PER_ADDRESS = 3;
  let t: TestApp;
  before(async () => {
    t = await startTestApp({
      env: { CAS_LOGIN_MAX_FAILURES_PER_ADDRESS: String(MAX_FAILURES_PER_ADDRESS), CAS_PASSWORD_HASH_QUEUE: '1000' },
    });
  });
  after(() => t.close());

  test('2,000 anonymous logins with chosen usernames add at most the stated bound of rows; a real row made meanwhile is kept', async () => {
    const admin = await signedIn(t, 'admin');
    const before = (await auditRows(t)).length;
    const statuses: Record<number, number> = {};
    let created: number | undefined;
    for (let batch = 0; batch < 20; batch++) {
      const answers = await Promise.all(
        Array.from({ length: 100 }, (_, i) =>
          t.app.inject({
            method: 'POST',
            url: '/api/v1/auth/login',
            remoteAddress: ADDRESSES[i % 2],
            payload: { username: `victim-${batch}-${i}`, password: 'guess-guess' },
          }),
        ),
      );
      for (const a of answers) statuses[a.statusCode] = (statuses[a.statusCode] ?? 0) + 1;
      if (batch === 10) {
        const res = await request(t.app, 'POST', '/api/v1/admin/users', {
          token: admin.token,
          body: { username: 'made-during-the-flood', password: 'a-fine-password-1' },
        });
        assert.equal(res.status, 201, res.text);
        created = res.body.id;
      }
    }
    assert.equal(statuses[429], 2000 - MAX_FAILURES_PER_ADDRESS * ADDRESSES.length, JSON.stringify(statuses));
    const added = (await auditRows(t)).slice(before);
    // Per address and window: the real attempts (401) plus at most 2 statuses × (10 names + 1 shared row).
    const bound = ADDRESSES.length * (MAX_FAILURES_PER_ADDRESS + 2 * 11) + 1;
    // On failure, say which rows there were (operation, status, address, named or shared, window start).
    const breakdown: Record<string, number> = {};
    for (const r of added) {
      const key = `${r.operation} ${r.statusCode} ${r.clientAddress} ${r.actorName === null ? 'shared' : 'named'} ${Math.floor(r.at.getTime() / 900_000)}`;
      breakdown[key] = (breakdown[key] ?? 0) + 1;
    }
    assert.ok(added.length <= bound, `${added.length} rows for 2,000 logins, bound ${bound}: ${JSON.stringify(breakdown)}`);
    const logins = added.filter((r) => r.operation === 'login');
    assert.equal(
      logins.reduce((sum, r) => sum + r.count, 0),
      2000,
      'every refused login is counted in some row',
    );
    const shared = logins.filter((r) => r.statusCode === 429 && r.actorName === null);
    assert.equal(shared.length, ADDRESSES.length, 'past 10 usernames, one row per address without a name');
    assert.ok(added.some((r) => r.operation === 'createUser' && r.targetId === String(created)));
    // The tallies are listed like any row, with their count.
    const listed = await request(t.app, 'GET', '/api/v1/admin/audit', {
      token: admin.token,
      query: { operation: 'login', size: '100' },
    });
    assert.equal(listed.status, 200);
    assert.ok(
      listed.body.events.some((e: { count: number }) => e.count > 100),
      JSON.stringify(listed.body.events[0]),
    );
  });
});

describe('the session cookie: Secure and __Host- over https, through a trusted proxy too (#14)', () => {
  let behindProxy: TestApp;
  let direct: TestApp;
  before(async () => {
    behindProxy = await startTestApp({ env: { CAS_TRUST_PROXY: '1' } });
    direct = await startTestApp();
  });
  after(async () => {
    await behindProxy.close();
    await direct.close();
  });

  const loginCookie = async (t: TestApp, headers: Record<string, string>) => {
    const user = await createUser(t);
    const res = await request(t.app, 'POST', '/api/v1/auth/login', {
      body: { username: user.username, password: user.password },
      headers,
    });
    assert.equal(res.status, 200, res.text);
    return { cookie: String(res.headers['set-cookie']), token: res.body.token as string };
  };

  test('https at a trusted proxy: __Host-cas_session, Secure, Path=/, no Domain; read back under that name', async () => {
    const { cookie, token } = await loginCookie(behindProxy, { 'x-forwarded-proto': 'https' });
    assert.match(cookie, /^__Host-cas_session=cas_sess_/);
    assert.match(cookie, /; Secure/);
    assert.match(cookie, /; Path=\/(;|$)/);
    assert.match(cookie, /; HttpOnly/);
    assert.doesNotMatch(cookie, /Domain=/i);
    const me = await request(behindProxy.app, 'GET', '/api/v1/auth/me', {
      headers: { cookie: `__Host-cas_session=${token}` },
    });
    assert.equal(me.status, 200, me.text);
    const out = await request(behindProxy.app, 'POST', '/api/v1/auth/logout', {
      headers: { cookie: `__Host-cas_session=${token}`, 'x-forwarded-proto': 'https' },
    });
    assert.equal(out.status, 200);
    assert.match(String(out.headers['set-cookie']), /__Host-cas_session=;/);
  });

  test('plain http (or a forwarded https the service does not trust): cas_session without Secure, still read', async () => {
    for (const [t, headers] of [
      [behindProxy, {}],
      [direct, { 'x-forwarded-proto': 'https' }],
    ] as const) {
      const { cookie, token } = await loginCookie(t, headers);
      assert.match(cookie, /^cas_session=cas_sess_/);
      assert.doesNotMatch(cookie, /Secure/);
      const me = await request(t.app, 'GET', '/api/v1/auth/me', { headers: { cookie: `cas_session=${token}` } });
      assert.equal(me.status, 200);
    }
  });
});

describe('what callers learn about clusters and keys they have nothing to do with (#15)', () => {
  let t: TestApp;
  before(async () => {
    t = await startTestApp();
  });
  after(() => t.close());

  test('GET /clusters lists only the clusters the caller has a rule for; admins and viewers (clusters *) all', async () => {
    const admin = await signedIn(t, 'admin');
    const certs = await testCertificates();
    const server = `https://127.0.0.1:${await closedPort()}`;
    const config = (name: string) =>
      kubeconfigYaml([
        contextFor(
          { server, caData: certs.caData, adminCertData: certs.certData, adminKeyData: certs.keyData, adminToken: 'x' },
          { name },
        ),
      ]);
    for (const name of ['alpha', 'beta', 'gamma']) await registerCluster(t, admin.token, name, config(name));
    const role = await request(t.app, 'POST', '/api/v1/admin/roles', {
      token: admin.token,
      body: {
        name: 'beta-dev',
        rules: [{ clusters: ['beta'], namespaces: ['dev'], resources: ['pods'], verbs: ['get'] }],
      },
    });
    assert.equal(role.status, 201, role.text);
    const names = async (token: string) =>
      (await request(t.app, 'GET', '/api/v1/clusters', { token })).body.map((c: { name: string }) => c.name);
    assert.deepEqual(await names((await signedIn(t, 'beta-dev')).token), ['beta']);
    assert.deepEqual(await names(admin.token), ['alpha', 'beta', 'gamma']);
    assert.deepEqual(await names((await signedIn(t, 'viewer')).token), ['alpha', 'beta', 'gamma']);
  });

  test('a metrics 502 names the cluster, never the endpoint host', () => {
    for (const error of [
      new AddressNotAllowedError('prometheus.internal.example resolves to a link-local address (169.254.0.5)'),
      new Error('getaddrinfo failed for prometheus.internal.example'),
      Object.assign(new Error('connect ECONNREFUSED 10.1.2.3:9090'), { code: 'ECONNREFUSED' }),
    ]) {
      const failure = translateFailure("the metrics endpoint of cluster 'prod'", error, 5000);
      assert.match(failure.message, /metrics endpoint of cluster 'prod' could not be reached/);
      assert.doesNotMatch(failure.message, /prometheus\.internal|10\.1\.2\.3|169\.254/, failure.message);
    }
    const timeout = translateFailure("the metrics endpoint of cluster 'prod'", new ClusterTimeoutError('t'), 5000);
    assert.match(timeout.message, /did not answer within 5 s/);
  });
});
