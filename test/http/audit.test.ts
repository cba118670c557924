import assert from 'node:assert/strict';
import http from 'node:http';
import { after, before, describe, test } from 'node:test';
import { AuditEventEntity } from '../../src/audit/audit-event.entity.js';
import { AuditRetentionService, AUDIT_RETENTION_LEASE } from '../../src/audit/audit-retention.service.js';
import { AuditService } from '../../src/audit/audit.service.js';
import { ConfigError, loadConfig } from '../../src/config/config.js';
import { LeaseEntity } from '../../src/database/lease.entity.js';
import { onPostgres, startTestApp, type TestApp } from '../support/app.js';
import { signedIn } from '../support/factories.js';
import { client, request } from '../support/http.js';

/** Every row stored so far, oldest first (after the writer has caught up). */
async function rows(t: TestApp): Promise<AuditEventEntity[]> {
  await t.app.get(AuditService).flush();
  return t.dataSource.getRepository(AuditEventEntity).find({ order: { id: 'ASC' } });
}

/** The whole table as text, for secret greps. */
async function dump(t: TestApp): Promise<string> {
  await t.app.get(AuditService).flush();
  return JSON.stringify(await t.dataSource.query('SELECT * FROM audit_events'));
}

const summary = (r: AuditEventEntity) =>
  [r.operation, r.method, r.statusCode, r.actorKind, r.actorName, r.targetKind, r.targetId].join(' ');

describe('audit log: admin plane and authentication', () => {
  let t: TestApp;
  before(async () => {
    t = await startTestApp();
  });
  after(() => t.close());

  test('each state-changing or refused call is one row; reads and anonymous 401s are not; no secret is stored', async () => {
    const rootPassword = 'root-password-7d1f0b';
    const carolPassword = 'carol-password-51ae2c';
    const carolNewPassword = 'carol-new-password-92be77';
    const boot = await request(t.app, 'POST', '/api/v1/admin/users/create_super_user', {
      body: { username: 'root', password: rootPassword },
    });
    assert.equal(boot.status, 201);
    const rootId = boot.body.id;
    const good = await request(t.app, 'POST', '/api/v1/auth/login', {
      body: { username: 'root', password: rootPassword },
    });
    assert.equal(good.status, 200);
    const rootToken: string = good.body.token;
    const admin = client(t.app, rootToken);
    const wrong = await request(t.app, 'POST', '/api/v1/auth/login', {
      body: { username: 'Root', password: 'not-the-password' },
    });
    assert.equal(wrong.status, 401);
    assert.equal(
      (await request(t.app, 'POST', '/api/v1/auth/login', { body: { username: 'ghost', password: 'whatever1' } }))
        .status,
      401,
    );
    // Not audited: a read, and a write without credentials (no username: nothing to attribute).
    assert.equal((await admin.get('/api/v1/admin/users')).status, 200);
    assert.equal((await request(t.app, 'POST', '/api/v1/admin/users', { body: {} })).status, 401);

    const created = await admin.post('/api/v1/admin/users', {
      body: { username: 'carol', password: carolPassword },
    });
    assert.equal(created.status, 201);
    const carolId = created.body.id;
    assert.equal((await admin.put(`/api/v1/admin/users/${carolId}`, { body: { name: 'Carol C' } })).status, 200);
    assert.equal(
      (await admin.post(`/api/v1/admin/users/${carolId}/reset_password`, { body: { password: carolNewPassword } }))
        .status,
      200,
    );
    assert.equal(
      (await admin.put(`/api/v1/admin/users/${carolId}/roles`, { body: { roles: ['viewer'] } })).status,
      200,
    );
    assert.equal((await admin.post(`/api/v1/admin/users/${carolId}/enable`, { body: { enabled: true } })).status, 200);
    const invalid = await admin.post('/api/v1/admin/users', { body: { username: '-bad', password: 'x' } });
    assert.equal(invalid.status, 400);
    const key = await admin.post('/api/v1/admin/apikeys', { body: { name: 'ci', role: 'viewer' } });
    assert.equal(key.status, 201);
    const carol = await request(t.app, 'POST', '/api/v1/auth/login', {
      body: { username: 'carol', password: carolNewPassword },
    });
    assert.equal(carol.status, 200);
    const refused = await request(t.app, 'GET', '/api/v1/admin/users', { token: carol.body.token });
    assert.equal(refused.status, 403);
    const keyRefused = await request(t.app, 'DELETE', `/api/v1/admin/users/${rootId}`, {
      headers: { authorization: key.body.key },
    });
    assert.equal(keyRefused.status, 403);
    assert.equal((await admin.delete(`/api/v1/admin/apikeys/${key.body.id}`)).status, 200);
    assert.equal((await admin.delete(`/api/v1/admin/users/${carolId}`)).status, 200);
    assert.equal((await admin.post('/api/v1/auth/logout')).status, 200);

    const got = await rows(t);
    assert.deepEqual(got.map(summary), [
      `createSuperUser POST 201 anonymous  user ${rootId}`,
      `login POST 200 user root user ${rootId}`,
      'login POST 401 user Root  ',
      'login POST 401 user ghost  ',
      `createUser POST 201 user root user ${carolId}`,
      `updateUser PUT 200 user root user ${carolId}`,
      `resetUserPassword POST 200 user root user ${carolId}`,
      `setUserRoles PUT 200 user root user ${carolId}`,
      `setUserEnabled POST 200 user root user ${carolId}`,
      'createUser POST 400 user root user ',
      `createApiKey POST 201 user root apiKey ${key.body.id}`,
      `login POST 200 user carol user ${carolId}`,
      'listUsers GET 403 user carol user ',
      `deleteUser DELETE 403 apiKey ci user ${rootId}`,
      `deleteApiKey DELETE 200 user root apiKey ${key.body.id}`,
      `deleteUser DELETE 200 user root user ${carolId}`,
      'logout POST 200 user root  ',
    ]);
    const byOperation = (op: string) => got.find((r) => r.operation === op)!;
    assert.equal(byOperation('createUser').actorId, rootId);
    assert.equal(byOperation('deleteApiKey').actorKind, 'user');
    assert.equal(got.find((r) => r.actorKind === 'apiKey')!.actorId, key.body.id);
    assert.equal(byOperation('createSuperUser').requestId, boot.headers['x-request-id']);
    assert.equal(got[2].actorId, null, 'a failed login names the username tried, not an id');
    for (const row of got) {
      assert.equal(row.clientAddress, '127.0.0.1');
      assert.ok(Math.abs(row.at.getTime() - Date.now()) < 120_000, `${row.at.toISOString()} is about now`);
      assert.equal(row.cluster, null);
      assert.equal(row.uid, null);
    }

    const text = await dump(t);
    for (const secret of [rootPassword, carolPassword, carolNewPassword, 'not-the-password', rootToken]) {
      assert.ok(!text.includes(secret), `the audit table holds a secret: ${secret.slice(0, 12)}…`);
    }
    assert.ok(!text.includes(key.body.key), 'the audit table holds the API key');
    assert.ok(!text.includes(carol.body.token), 'the audit table holds a session token');
    assert.ok(!text.includes('cas_sess_') && !text.includes('cas_key_'));
  });
});

describe('GET /api/v1/admin/audit', () => {
  let t: TestApp;
  let api: ReturnType<typeof client>;
  let viewerToken: string;
  const BASE = Date.parse('2025-03-01T00:00:00Z');
  const OLD = { until: '2025-06-01T00:00:00Z' }; // only the seeded rows, not those of the test's own calls

  before(async () => {
    t = await startTestApp();
    api = client(t.app, (await signedIn(t, 'admin')).token);
    viewerToken = (await signedIn(t, 'viewer')).token;
    const seeded = Array.from({ length: 30 }, (_, i) => ({
      at: new Date(BASE + i * 60_000),
      actorKind: 'user',
      actorId: i % 3,
      actorName: ['Alice', 'bob', 'carol'][i % 3],
      actorKey: ['alice', 'bob', 'carol'][i % 3],
      clientAddress: '10.0.0.1',
      operation: i % 2 === 0 ? 'patchResource' : 'createUser',
      method: i % 2 === 0 ? 'PATCH' : 'POST',
      statusCode: 200,
      requestId: `seed-${i}`,
      targetKind: null,
      targetId: null,
      cluster: i % 2 === 0 ? (i % 4 === 0 ? 'prod' : 'dev') : null,
      resource: null,
      namespace: null,
      name: null,
      uid: null,
      resourceVersion: null,
    }));
    // Insert in a shuffled order: the list orders by time, not by id.
    const order = seeded.map((_, i) => (i * 7) % 30);
    await t.dataSource.getRepository(AuditEventEntity).insert(order.map((i) => seeded[i]));
  });
  after(() => t.close());

  const ids = (body: any) => body.events.map((e: any) => e.requestId);

  test('newest first, paged, with the total', async () => {
    const first = await api.get('/api/v1/admin/audit', { query: { ...OLD, size: '4' } });
    assert.equal(first.status, 200, first.text);
    assert.deepEqual(ids(first.body), ['seed-29', 'seed-28', 'seed-27', 'seed-26']);
    assert.equal(first.body.total, 30);
    assert.equal(first.body.page, 1);
    assert.equal(first.body.size, 4);
    const last = await api.get('/api/v1/admin/audit', { query: { ...OLD, size: '4', page: '8' } });
    assert.deepEqual(ids(last.body), ['seed-1', 'seed-0']);
    const past = await api.get('/api/v1/admin/audit', { query: { ...OLD, size: '4', page: '9' } });
    assert.deepEqual(past.body.events, []);
    assert.equal(past.body.total, 30);
    const e = last.body.events[1];
    assert.deepEqual(e.actor, { kind: 'user', id: 0, name: 'Alice' });
    assert.equal(e.at, '2025-03-01T00:00:00.000Z');
    assert.deepEqual(e.target, { kind: null, id: null, cluster: 'prod', resource: null, namespace: null, name: null });
    assert.deepEqual(Object.keys(e).sort(), [
      'actor',
      'at',
      'clientAddress',
      'count',
      'detail',
      'id',
      'method',
      'operation',
      'requestId',
      'resourceVersion',
      'statusCode',
      'target',
      'uid',
    ]);
  });

  test('filters: actor (ignoring case), operation, cluster, since ≤ time < until, combined', async () => {
    const q = async (query: Record<string, string>) => {
      const res = await api.get('/api/v1/admin/audit', { query: { size: '100', ...query } });
      assert.equal(res.status, 200, res.text);
      return res.body;
    };
    const alice = await q({ ...OLD, actor: 'ALICE' });
    assert.equal(alice.total, 10);
    assert.ok(alice.events.every((e: any) => e.actor.name === 'Alice'));
    assert.equal((await q({ ...OLD, operation: 'createUser' })).total, 15);
    assert.deepEqual(ids(await q({ cluster: 'prod', since: '2025-03-01T00:10:00Z' })), [
      'seed-28',
      'seed-24',
      'seed-20',
      'seed-16',
      'seed-12',
    ]);
    assert.deepEqual(ids(await q({ since: '2025-03-01T00:03:00Z', until: '2025-03-01T00:06:00Z' })), [
      'seed-5',
      'seed-4',
      'seed-3',
    ]);
    assert.deepEqual(ids(await q({ since: '2025-03-01T01:03:00+01:00', until: '2025-03-01T00:05:00.000Z' })), [
      'seed-4',
      'seed-3',
    ]);
    assert.deepEqual(ids(await q({ actor: 'bob', operation: 'patchResource', cluster: 'dev', ...OLD })), [
      'seed-22',
      'seed-10',
    ]);
    assert.equal((await q({ actor: 'nobody' })).total, 0);
  });

  test('strict: unknown parameters and bad values are a 400 naming the parameter', async () => {
    const cases: Array<[Record<string, string>, RegExp]> = [
      [{ sort: 'at' }, /property sort should not exist/],
      [{ size: '0' }, /size/],
      [{ size: '101' }, /size/],
      [{ page: '0' }, /page/],
      [{ page: 'x' }, /page/],
      [{ actor: '' }, /actor/],
      [{ operation: 'drop table' }, /operation/],
      [{ cluster: 'a b' }, /cluster/],
      [{ since: 'yesterday' }, /since/],
      [{ since: '2025-13-01' }, /since/],
      [{ since: '2025-03-01T00:00:00' }, /since must be an ISO 8601 date or date-time with Z or an offset/],
      [{ until: '2025-02-30T00:00:00Z' }, /until/],
      [{ since: '2025-03-02', until: '2025-03-01' }, /since must be earlier than until/],
      [{ since: '2025-03-01', until: '2025-03-01' }, /since must be earlier than until/],
    ];
    for (const [query, message] of cases) {
      const res = await api.get('/api/v1/admin/audit', { query });
      assert.equal(res.status, 400, `${JSON.stringify(query)} → ${res.status}`);
      assert.match([res.body.message].flat().join('; '), message, JSON.stringify(query));
      assert.ok(res.body.requestId);
    }
  });

  test('admin only: a viewer gets 403 (and that refusal is itself recorded)', async () => {
    const res = await request(t.app, 'GET', '/api/v1/admin/audit', { token: viewerToken });
    assert.equal(res.status, 403);
    assert.equal((await request(t.app, 'GET', '/api/v1/admin/audit')).status, 401);
    await t.app.get(AuditService).flush(); // rows are written just after the response
    const refused = await api.get('/api/v1/admin/audit', { query: { operation: 'listAuditEvents' } });
    assert.equal(refused.body.total, 1);
    assert.equal(refused.body.events[0].statusCode, 403);
    assert.equal(refused.body.events[0].requestId, res.headers['x-request-id']);
  });
});

describe("GET /api/v1/admin/audit: one object's history and statuses", () => {
  let t: TestApp;
  let api: ReturnType<typeof client>;
  const BASE = Date.parse('2025-05-01T00:00:00Z');
  const OLD = { until: '2025-06-01T00:00:00Z' };
  // [cluster, resource, namespace, name, status, operation]
  const SEEDED: Array<[string, string, string, string | null, number, string]> = [
    ['prod', 'deployments.apps', 'shop', 'web', 201, 'createResource'],
    ['prod', 'deployments.apps', 'shop', 'web', 200, 'patchResource'],
    ['prod', 'deployments.apps', 'shop', 'web', 409, 'replaceResource'],
    ['prod', 'deployments.apps', 'shop', 'web', 403, 'deleteResource'],
    ['prod', 'deployments.apps', 'shop', 'web', 200, 'deleteResource'],
    ['prod', 'deployments.apps', 'shop', 'api', 201, 'createResource'], // another object in the same namespace
    ['prod', 'deployments.apps', 'shop2', 'web', 201, 'createResource'], // same name, another namespace
    ['dev', 'deployments.apps', 'shop', 'web', 201, 'createResource'], // same object, another cluster
    ['prod', 'configmaps', 'shop', 'web', 201, 'createResource'], // same name, another resource
    ['prod', 'deployments.apps', 'shop', null, 403, 'listResources'], // a refused list of the namespace
    ['prod', 'pods', 'shop', 'web-0', 502, 'deleteResource'],
    ['prod', 'pods', 'shop', 'web-0', 504, 'deleteResource'],
  ];

  before(async () => {
    t = await startTestApp();
    api = client(t.app, (await signedIn(t, 'admin')).token);
    await t.dataSource.getRepository(AuditEventEntity).insert(
      SEEDED.map(([cluster, resource, namespace, name, statusCode, operation], i) => ({
        at: new Date(BASE + i * 60_000),
        actorKind: 'user',
        actorId: 1,
        actorName: 'alice',
        actorKey: 'alice',
        clientAddress: '10.0.0.1',
        operation,
        method: operation === 'listResources' ? 'GET' : 'POST',
        statusCode,
        requestId: `obj-${i}`,
        targetKind: null,
        targetId: null,
        cluster,
        resource,
        namespace,
        name,
        uid: null,
        resourceVersion: null,
      })),
    );
  });
  after(() => t.close());

  const ids = async (query: Record<string, string>) => {
    const res = await api.get('/api/v1/admin/audit', { query: { size: '100', ...OLD, ...query } });
    assert.equal(res.status, 200, res.text);
    assert.equal(res.body.total, res.body.events.length);
    return res.body.events.map((e: any) => e.requestId);
  };

  test("one object's history: cluster, resource, namespace and name, newest first", async () => {
    const web = { cluster: 'prod', resource: 'deployments.apps', namespace: 'shop', name: 'web' };
    assert.deepEqual(await ids(web), ['obj-4', 'obj-3', 'obj-2', 'obj-1', 'obj-0']);
    assert.deepEqual(await ids({ ...web, operation: 'deleteResource' }), ['obj-4', 'obj-3']);
    // Each part narrows on its own too.
    assert.deepEqual(await ids({ cluster: 'prod', resource: 'deployments.apps', namespace: 'shop' }), [
      'obj-9',
      'obj-5',
      'obj-4',
      'obj-3',
      'obj-2',
      'obj-1',
      'obj-0',
    ]);
    assert.deepEqual(await ids({ name: 'web', namespace: 'shop2' }), ['obj-6']);
    assert.deepEqual(await ids({ resource: 'configmaps' }), ['obj-8']);
    assert.deepEqual(await ids({ ...web, cluster: 'dev' }), ['obj-7']);
    assert.deepEqual(await ids({ ...web, name: 'nothing-here' }), []);
  });

  test('status: an exact code, a class (4xx), several, with the object filter', async () => {
    assert.deepEqual(await ids({ status: '403' }), ['obj-9', 'obj-3']);
    assert.deepEqual(await ids({ status: '4xx' }), ['obj-9', 'obj-3', 'obj-2']);
    assert.deepEqual(await ids({ status: '5XX' }), ['obj-11', 'obj-10']);
    assert.deepEqual(await ids({ status: '409,5xx' }), ['obj-11', 'obj-10', 'obj-2']);
    assert.deepEqual(await ids({ status: '2xx', resource: 'deployments.apps', name: 'web', namespace: 'shop' }), [
      'obj-7',
      'obj-4',
      'obj-1',
      'obj-0',
    ]);
    assert.deepEqual(await ids({ status: '4xx', cluster: 'prod', resource: 'deployments.apps', name: 'web' }), [
      'obj-3',
      'obj-2',
    ]);
    assert.deepEqual(await ids({ status: '1xx' }), []);
  });

  test('a bad filter is a 400 naming it', async () => {
    const cases: Array<[Record<string, string>, RegExp]> = [
      [{ status: '4' }, /status must be status codes \(404\) or classes \(4xx\)/],
      [{ status: '600' }, /status must be/],
      [{ status: '4xy' }, /status must be/],
      [{ status: '404,' }, /status must be/],
      [{ status: '404;5xx' }, /status must be/],
      [{ status: Array.from({ length: 11 }, () => '404').join(',') }, /at most 10/],
      [{ resource: 'deploy ments' }, /resource must be/],
      [{ resource: 'x'.repeat(254) }, /resource must be/],
      [{ namespace: '' }, /namespace must be/],
      [{ name: 'a\tb' }, /name must be/],
      [{ object: 'web' }, /property object should not exist/],
    ];
    for (const [query, message] of cases) {
      const res = await api.get('/api/v1/admin/audit', { query });
      assert.equal(res.status, 400, `${JSON.stringify(query)} → ${res.status}`);
      assert.match([res.body.message].flat().join('; '), message, JSON.stringify(query));
    }
  });

  test('the filters have indexes: by object and by status, each with the time', async () => {
    const sql = onPostgres
      ? "SELECT indexname AS name, indexdef AS def FROM pg_indexes WHERE tablename = 'audit_events'"
      : "SELECT name, sql AS def FROM sqlite_master WHERE type = 'index' AND tbl_name = 'audit_events'";
    const indexes = new Map(
      ((await t.dataSource.query(sql)) as Array<{ name: string; def: string }>).map((i) => [i.name, i.def]),
    );
    assert.match(
      indexes.get('idx_audit_events_object') ?? '',
      /\("?cluster"?, "?resource"?, "?namespace"?, "?name"?, "?at"?\)/,
    );
    assert.match(indexes.get('idx_audit_events_status') ?? '', /\("?status_code"?, "?at"?\)/);
  });
});

describe('audit log: writing never fails the call; mirror to stdout; retention', () => {
  test('a failed insert is logged, the response is unaffected', async () => {
    const t = await startTestApp();
    try {
      const api = client(t.app, (await signedIn(t, 'admin')).token);
      await t.app.get(AuditService).flush();
      await t.dataSource.query('DROP TABLE audit_events');
      const res = await api.post('/api/v1/admin/users', { body: { username: 'dave', password: 'dave-password-1' } });
      assert.equal(res.status, 201, res.text);
      await t.app.get(AuditService).flush(); // resolves: the failure stays inside the writer
      const list = await api.get('/api/v1/admin/users', { query: { search: 'dave' } });
      assert.equal(list.body.total, 1, 'the call did its work');
    } finally {
      await t.close();
    }
  });

  test('a caller that hangs up before the answer: still one row, with the outcome', async () => {
    const t = await startTestApp();
    try {
      const admin = await signedIn(t, 'admin');
      await t.app.listen({ port: 0, host: '127.0.0.1' });
      const port = (t.app.getHttpServer().address() as { port: number }).port;
      const body = JSON.stringify({ username: 'frank', password: 'frank-password-1' });
      // Creating a user hashes the password with argon2id (a few hundred ms): time enough to hang up.
      await new Promise<void>((resolve) => {
        const req = http.request({
          host: '127.0.0.1',
          port,
          method: 'POST',
          path: '/api/v1/admin/users',
          headers: {
            authorization: `Bearer ${admin.token}`,
            'content-type': 'application/json',
            'content-length': Buffer.byteLength(body),
          },
        });
        req.on('error', () => resolve());
        req.end(body, () => setTimeout(() => req.destroy(), 20));
      });
      const api = client(t.app, admin.token);
      for (
        let i = 0;
        i < 100 && (await api.get('/api/v1/admin/users', { query: { search: 'frank' } })).body.total === 0;
        i++
      ) {
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      await new Promise((resolve) => setTimeout(resolve, 200)); // the handler's own answer, to nobody
      const created = (await rows(t)).filter((r) => r.operation === 'createUser');
      const frank = (await api.get('/api/v1/admin/users', { query: { search: 'frank' } })).body.users[0];
      assert.deepEqual(
        created.map((r) => [r.statusCode, r.actorName, r.targetKind, r.targetId]),
        [[201, admin.username, 'user', String(frank.id)]],
      );
    } finally {
      await t.close();
    }
  });

  test('CAS_AUDIT_LOG=stdout writes each row as one JSON line, whatever LOG_LEVEL says', async () => {
    const lines: string[] = [];
    const original = process.stdout.write.bind(process.stdout);
    process.stdout.write = ((chunk: string | Uint8Array, ...rest: unknown[]) => {
      const text = String(chunk);
      if (!text.startsWith('{"audit":')) return (original as (...a: unknown[]) => boolean)(chunk, ...rest);
      lines.push(...text.split('\n').filter(Boolean));
      return true;
    }) as typeof process.stdout.write;
    const t = await startTestApp({ env: { CAS_AUDIT_LOG: 'stdout', LOG_LEVEL: 'silent' } });
    try {
      const admin = await signedIn(t, 'admin');
      const api = client(t.app, admin.token);
      const res = await api.post('/api/v1/admin/users', { body: { username: 'erin', password: 'erin-password-1' } });
      assert.equal(res.status, 201);
      await t.app.get(AuditService).flush();
      assert.deepEqual(
        lines.map((l) => JSON.parse(l).audit.operation),
        ['login', 'createUser'],
      );
      const event = JSON.parse(lines[1]).audit;
      assert.equal(event.statusCode, 201);
      assert.deepEqual(event.actor, { kind: 'user', id: admin.id, name: admin.username });
      assert.equal(event.target.id, String(res.body.id));
      assert.ok(!lines.join('\n').includes('erin-password-1'));
      assert.ok(!lines.join('\n').includes(admin.token));
      assert.equal((await rows(t)).filter((r) => r.operation === 'createUser').length, 1, 'and stored');
    } finally {
      process.stdout.write = original;
      await t.close();
    }
  });

  test('rows older than CAS_AUDIT_RETENTION_DAYS are pruned, only by the replica holding the lease', async () => {
    const t = await startTestApp({ env: { CAS_AUDIT_RETENTION_DAYS: '30' } });
    try {
      const retention = t.app.get(AuditRetentionService);
      await retention.tick(); // the round every replica starts with
      const repo = t.dataSource.getRepository(AuditEventEntity);
      const row = (daysAgo: number, requestId: string) => ({
        at: new Date(Date.now() - daysAgo * 86_400_000),
        actorKind: 'user',
        actorId: 1,
        actorName: 'x',
        actorKey: 'x',
        clientAddress: null,
        operation: 'createUser',
        method: 'POST',
        statusCode: 201,
        requestId,
        targetKind: null,
        targetId: null,
        cluster: null,
        resource: null,
        namespace: null,
        name: null,
        uid: null,
        resourceVersion: null,
      });
      await repo.insert([row(31, 'old'), row(29, 'recent'), row(400, 'ancient')]);
      const leases = t.dataSource.getRepository(LeaseEntity);
      // Another replica holds the lease: this one leaves the rows alone.
      await leases.save({
        name: AUDIT_RETENTION_LEASE,
        holder: 'another-replica',
        expiresAt: new Date(Date.now() + 3600_000),
      });
      assert.equal(await retention.tick(), null);
      assert.equal(await repo.count(), 3);
      // Its lease ran out: this replica takes it over and prunes.
      await leases.update({ name: AUDIT_RETENTION_LEASE }, { expiresAt: new Date(Date.now() - 1000) });
      assert.equal(await retention.tick(), 2);
      assert.deepEqual(
        (await repo.find()).map((r) => r.requestId),
        ['recent'],
      );
      assert.notEqual((await leases.findOneBy({ name: AUDIT_RETENTION_LEASE }))!.holder, 'another-replica');
    } finally {
      await t.close();
    }
  });

  test('configuration: the two variables are validated', () => {
    assert.deepEqual(loadConfig({}).audit, { retentionDays: 90, log: 'off' });
    assert.deepEqual(loadConfig({ CAS_AUDIT_RETENTION_DAYS: '0', CAS_AUDIT_LOG: 'stdout' }).audit, {
      retentionDays: 0,
      log: 'stdout',
    });
    assert.throws(() => loadConfig({ CAS_AUDIT_LOG: 'file' }), ConfigError);
    assert.throws(() => loadConfig({ CAS_AUDIT_RETENTION_DAYS: '-1' }), /CAS_AUDIT_RETENTION_DAYS/);
  });
});
