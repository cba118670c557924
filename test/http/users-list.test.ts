import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { RoleEntity } from '../../src/users/role.entity.js';
import { UserEntity } from '../../src/users/user.entity.js';
import { onPostgres, startTestApp, type TestApp } from '../support/app.js';
import { signedIn } from '../support/factories.js';
import { client } from '../support/http.js';

interface Model {
  id: number;
  username: string;
  name: string;
  createdAt: number;
  lastLoginAt: number | null;
  roles: string[];
}

type Listed = Omit<Model, 'roles'>;

const SEEDED = 1000;
const BASE = Date.parse('2025-01-01T00:00:00Z');
const SORTS = ['id', 'username', 'name', 'createdAt', 'lastLoginAt'] as const;
const ORDERS = ['asc', 'desc'] as const;

/**
 * The list's order, computed here: the key (username and name lower-cased, by code point), then id in the
 * same direction; users who never logged in come last in both directions.
 */
function listOrder(sortBy: (typeof SORTS)[number], sortOrder: 'asc' | 'desc') {
  const sign = sortOrder === 'asc' ? 1 : -1;
  const key = (m: Listed): string | number | null =>
    sortBy === 'username' ? m.username.toLowerCase() : sortBy === 'name' ? m.name.toLowerCase() : m[sortBy];
  return (a: Listed, b: Listed): number => {
    const ka = key(a);
    const kb = key(b);
    if (ka === null || kb === null) {
      if (ka === null && kb === null) return sign * (a.id - b.id);
      return ka === null ? 1 : -1;
    }
    if (ka < kb) return -sign;
    if (ka > kb) return sign;
    return sign * (a.id - b.id);
  };
}

interface ListedUser {
  id: number;
  username: string;
  name: string;
  createdAt: string;
  lastLoginAt: string | null;
  roles: Array<{ name: string }>;
}

/** A user of the list's response, as the model holds it. */
function asModel(u: ListedUser): Model {
  return {
    id: u.id,
    username: u.username,
    name: u.name,
    createdAt: Date.parse(u.createdAt),
    lastLoginAt: u.lastLoginAt === null ? null : Date.parse(u.lastLoginAt),
    roles: u.roles.map((r) => r.name),
  };
}

function seedSpec(i: number) {
  let username = `u${String(i).padStart(4, '0')}`;
  if (i % 100 === 0) username = `u_${String(i).padStart(4, '0')}`; // literal underscores
  if (i % 7 === 0) username = username.toUpperCase(); // mixed case
  let name = `person ${String((i * 37) % 1000).padStart(3, '0')}`;
  if (i === 5) name = '100% sure';
  if (i === 6) name = 'Mixed Case NAME';
  if (i % 50 === 1 || i % 50 === 2) name = i % 2 ? 'Same Name' : 'SAME name'; // ties, in either case
  // Unordered creation and login times, some equal; every third user never logged in.
  const createdAt = BASE + (i % 40 === 3 ? 0 : ((i * 7919) % SEEDED) * 60_000);
  const lastLogin = BASE + 100 * 86_400_000 + (i % 40 === 4 ? 0 : ((i * 104729) % SEEDED) * 1000);
  const lastLoginAt = i % 3 === 0 ? null : lastLogin;
  return { username, name, createdAt, lastLoginAt, roles: i % 10 === 0 ? ['admin'] : ['viewer'] };
}

describe('GET /api/v1/admin/users with 1,000 users', () => {
  let t: TestApp;
  let api: ReturnType<typeof client>;
  const model: Model[] = [];

  before(async () => {
    t = await startTestApp();
    const admin = await signedIn(t, 'admin', { username: 'zz-admin' });
    api = client(t.app, admin.token);
    const roles = await t.dataSource.getRepository(RoleEntity).find();
    const roleId = (name: string) => roles.find((r) => r.name === name)!.id;
    const repo = t.dataSource.getRepository(UserEntity);
    for (let start = 1; start <= SEEDED; start += 100) {
      const specs = Array.from({ length: 100 }, (_, k) => seedSpec(start + k));
      const result = await repo.insert(
        specs.map((s) => ({
          username: s.username,
          usernameKey: s.username.toLowerCase(),
          name: s.name,
          provider: 'password',
          passwordHash: null,
          enabled: true,
          avatarUrl: null,
          createdAt: new Date(s.createdAt),
          lastLoginAt: s.lastLoginAt === null ? null : new Date(s.lastLoginAt),
        })),
      );
      const ids = result.identifiers.map((x) => x.id as number);
      await t.dataSource
        .createQueryBuilder()
        .insert()
        .into('user_roles')
        .values(specs.map((s, k) => ({ user_id: ids[k], role_id: roleId(s.roles[0]) })))
        .execute();
      specs.forEach((s, k) => model.push({ id: ids[k], ...s }));
    }
    model.push(asModel((await api.get('/api/v1/admin/users', { query: { search: 'zz-admin' } })).body.users[0]));
  });
  after(() => t.close());

  async function allPages(query: Record<string, string>): Promise<{ ids: number[]; totals: number[] }> {
    const ids: number[] = [];
    const totals: number[] = [];
    for (let page = 1; ; page++) {
      const res = await api.get('/api/v1/admin/users', { query: { ...query, size: '100', page: String(page) } });
      assert.equal(res.status, 200, res.text);
      totals.push(res.body.total);
      ids.push(...res.body.users.map((u: { id: number }) => u.id));
      if (res.body.users.length < 100) break;
    }
    return { ids, totals };
  }

  test('a page is one statement on either database: its users, their roles and the total', async () => {
    const sent: string[] = [];
    const subscriber = { beforeQuery: ({ query }: { query: string }) => void sent.push(query) };
    t.dataSource.subscribers.push(subscriber);
    try {
      const queries: Array<Record<string, string>> = [
        { sortBy: 'name', page: '3' },
        { search: 'u00', role: 'viewer', sortBy: 'lastLoginAt', sortOrder: 'desc', page: '2', size: '5' },
      ];
      for (const query of queries) {
        sent.length = 0;
        const res = await api.get('/api/v1/admin/users', { query });
        assert.equal(res.status, 200, res.text);
        assert.ok(res.body.users.length > 0 && res.body.users.every((u: ListedUser) => u.roles.length > 0));
        // Besides the caller's look-up, when the caller cache has to ask.
        const listed = sent.filter((q) => !/\bFROM sessions\b/.test(q));
        assert.equal(listed.length, 1, JSON.stringify({ query, listed }));
      }
    } finally {
      t.dataSource.subscribers.splice(t.dataSource.subscribers.indexOf(subscriber as never), 1);
    }
  });

  test('defaults: page 1, size 20, newest id first; total counts all', async () => {
    const res = await api.get('/api/v1/admin/users/');
    assert.equal(res.status, 200);
    assert.equal(res.body.total, SEEDED + 1);
    assert.equal(res.body.page, 1);
    assert.equal(res.body.size, 20);
    const expected = [...model]
      .sort((a, b) => b.id - a.id)
      .slice(0, 20)
      .map((m) => m.id);
    assert.deepEqual(
      res.body.users.map((u: { id: number }) => u.id),
      expected,
    );
    const keys = Object.keys(res.body.users[0]).sort();
    assert.deepEqual(keys, ['createdAt', 'enabled', 'id', 'lastLoginAt', 'name', 'provider', 'roles', 'username']);
  });

  test('page and size select the right slice; past the end is empty with the same total', async () => {
    const sorted = [...model].sort((a, b) => a.id - b.id).map((m) => m.id);
    const res = await api.get('/api/v1/admin/users', { query: { page: '3', size: '7', sortOrder: 'asc' } });
    assert.deepEqual(
      res.body.users.map((u: { id: number }) => u.id),
      sorted.slice(14, 21),
    );
    assert.equal(res.body.page, 3);
    assert.equal(res.body.size, 7);
    const past = await api.get('/api/v1/admin/users', { query: { page: '500', size: '100' } });
    assert.deepEqual(past.body.users, []);
    assert.equal(past.body.total, SEEDED + 1);
  });

  for (const sortBy of SORTS) {
    for (const sortOrder of ORDERS) {
      test(`sortBy=${sortBy} sortOrder=${sortOrder}`, async () => {
        const expected = [...model].sort(listOrder(sortBy, sortOrder)).map((m) => m.id);
        const { ids, totals } = await allPages({ sortBy, sortOrder });
        assert.deepEqual(ids, expected);
        assert.ok(totals.every((n) => n === SEEDED + 1));
      });
    }
  }

  test('deep pages of 20 in every order: the users, their fields and roles, as computed here (ties, never logged in)', async () => {
    for (const sortBy of SORTS) {
      for (const sortOrder of ORDERS) {
        const expected = [...model].sort(listOrder(sortBy, sortOrder));
        for (const page of [2, 26, 49, 50, 51]) {
          const query = { sortBy, sortOrder, size: '20', page: String(page) };
          const res = await api.get('/api/v1/admin/users', { query });
          assert.equal(res.status, 200, res.text);
          assert.equal(res.body.total, SEEDED + 1);
          assert.deepEqual(
            res.body.users.map(asModel),
            expected.slice((page - 1) * 20, page * 20),
            JSON.stringify(query),
          );
        }
      }
    }
  });

  test('search is a case-insensitive substring of username or name', async () => {
    const res = await api.get('/api/v1/admin/users', { query: { search: 'MIXED case', size: '100' } });
    assert.deepEqual(
      res.body.users.map((u: { name: string }) => u.name),
      ['Mixed Case NAME'],
    );
    const byUsername = await allPages({ search: 'U000' });
    const expected = model.filter((m) => m.username.toLowerCase().includes('u000')).map((m) => m.id);
    assert.deepEqual(
      [...byUsername.ids].sort((a, b) => a - b),
      expected.sort((a, b) => a - b),
    );
    assert.equal(byUsername.totals[0], 9);
  });

  test('% and _ match literally', async () => {
    const percent = await api.get('/api/v1/admin/users', { query: { search: '%', size: '100' } });
    assert.deepEqual(
      percent.body.users.map((u: { name: string }) => u.name),
      ['100% sure'],
    );
    const underscore = await allPages({ search: 'u_0' });
    const expected = model.filter((m) => m.username.toLowerCase().includes('u_0'));
    assert.equal(expected.length, 9); // u_0100 … u_0900; as a wildcard `_` would match hundreds
    assert.deepEqual(
      [...underscore.ids].sort((a, b) => a - b),
      expected.map((m) => m.id).sort((a, b) => a - b),
    );
    const none = await api.get('/api/v1/admin/users', { query: { search: 'no_such%thing' } });
    assert.equal(none.body.total, 0);
  });

  test('role filter', async () => {
    const admins = await allPages({ role: 'admin' });
    const expected = model.filter((m) => m.roles.includes('admin')).map((m) => m.id);
    assert.equal(admins.totals[0], expected.length);
    assert.deepEqual(
      [...admins.ids].sort((a, b) => a - b),
      expected.sort((a, b) => a - b),
    );
    const viewers = await api.get('/api/v1/admin/users', { query: { role: 'viewer', search: 'u00' } });
    assert.equal(
      viewers.body.total,
      model.filter((m) => m.roles.includes('viewer') && m.username.toLowerCase().includes('u00')).length,
    );
  });

  test('invalid query values → 400 naming the parameter', async () => {
    const cases: Array<[Record<string, string>, RegExp]> = [
      [{ page: '0' }, /page/],
      [{ page: '-1' }, /page/],
      [{ page: 'abc' }, /page/],
      [{ page: '1.5' }, /page/],
      [{ size: '0' }, /size/],
      [{ size: '101' }, /size/],
      [{ sortBy: 'password' }, /sortBy/],
      [{ sortOrder: 'up' }, /sortOrder/],
      [{ role: 'root' }, /role/],
      [{ search: 'x'.repeat(129) }, /search/],
      [{ limit: '10' }, /property limit should not exist/],
    ];
    for (const [query, pattern] of cases) {
      const res = await api.get('/api/v1/admin/users', { query });
      assert.equal(res.status, 400, JSON.stringify(query));
      assert.match(res.body.message.join('; '), pattern);
    }
  });
});

describe('PostgreSQL: deep pages of the user list, 30,000 users', { skip: !onPostgres && 'PostgreSQL only' }, () => {
  const BULK = 30_000;
  // The index each order's ids are paged by (migrations 1795353245680 and 1795400000000).
  const SORT_INDEXES: Record<(typeof SORTS)[number], [asc: string, desc: string]> = {
    id: ['PK_a3ffb1c0c8416b9fc6f907b7433', 'PK_a3ffb1c0c8416b9fc6f907b7433'],
    username: ['idx_users_username_sort', 'idx_users_username_sort'],
    name: ['idx_users_name_sort', 'idx_users_name_sort'],
    createdAt: ['idx_users_created_sort', 'idx_users_created_sort'],
    lastLoginAt: ['idx_users_last_login_sort', 'idx_users_last_login_desc_sort'],
  };
  interface PlanNode {
    'Node Type': string;
    'Relation Name'?: string;
    'Index Name'?: string;
    'Heap Fetches'?: number;
    'Actual Rows': number;
    'Actual Loops': number;
    Plans?: PlanNode[];
  }
  const flatten = (node: PlanNode): PlanNode[] => [node, ...(node.Plans ?? []).flatMap(flatten)];
  let t: TestApp;
  let api: ReturnType<typeof client>;
  let everyone: Listed[];
  const sent: Array<{ query: string; parameters?: unknown[] }> = [];

  before(async () => {
    t = await startTestApp();
    api = client(t.app, (await signedIn(t, 'admin', { username: 'zz-admin' })).token);
    // Names equal but for case 30 at a time, equal creation and login times, every third never logged in.
    await t.dataSource.query(
      `INSERT INTO users (username, username_key, provider, name, enabled, created_at, last_login_at)
         SELECT 'Bulk' || i, 'bulk' || i, 'password',
                CASE WHEN i % 2 = 0 THEN 'Bulk Person ' ELSE 'BULK person ' END || (i % 1000), true,
                timestamp '2025-01-01' + (i % 7000) * interval '1 minute',
                CASE WHEN i % 3 = 0 THEN NULL ELSE timestamp '2025-04-01' + (i % 5000) * interval '1 minute' END
           FROM generate_series(0, $1 - 1) AS i`,
      [BULK],
    );
    await t.dataSource.query(
      `INSERT INTO user_roles (user_id, role_id)
         SELECT u.id, r.id FROM users u, roles r WHERE r.name = 'viewer' AND u.username_key LIKE 'bulk%'`,
    );
    // Rows added in bulk are all-visible, so an index-only scan need not read them, once vacuumed: what
    // autovacuum does a little after many inserts. INDEX_CLEANUP ON: the admin's login left one dead row
    // version, too few for VACUUM to clean the indexes by default, and its page stays not all-visible.
    await t.dataSource.query('VACUUM (ANALYZE, INDEX_CLEANUP ON) users');
    const rows: Array<{ id: number; username: string; name: string; created_at: Date; last_login_at: Date | null }> =
      await t.dataSource.query('SELECT id, username, name, created_at, last_login_at FROM users');
    everyone = rows.map((r) => ({
      id: r.id,
      username: r.username,
      name: r.name,
      createdAt: r.created_at.getTime(),
      lastLoginAt: r.last_login_at?.getTime() ?? null,
    }));
    t.dataSource.subscribers.push({
      beforeQuery: ({ query, parameters }) => void sent.push({ query, parameters: parameters as unknown[] }),
    });
  });
  after(() => t?.close());

  /** Asks for a page and explains (analyzed) the page query the service sent for it. */
  async function pageAndPlan(query: Record<string, string>) {
    sent.length = 0;
    const res = await api.get('/api/v1/admin/users', { query });
    assert.equal(res.status, 200, res.text);
    // One statement, one round trip: the page, its total and its roles (besides the caller's look-up).
    const listed = sent.filter((q) => !/\bFROM sessions\b/.test(q.query));
    assert.equal(listed.length, 1, JSON.stringify(listed));
    const pageQuery = listed[0];
    assert.match(pageQuery.query, /\bOFFSET\b/);
    const [{ 'QUERY PLAN': plan }] = await t.dataSource.query(
      `EXPLAIN (ANALYZE, FORMAT JSON) ${pageQuery.query}`,
      pageQuery.parameters,
    );
    return { users: (res.body.users as ListedUser[]).map(asModel), total: res.body.total, plan };
  }

  /**
   * The ids are paged by an index-only scan of `index` that reads no row (all-visible pages), the offset
   * included; of the table, only the page's rows are read, by primary key; nothing reads the whole table.
   */
  function assertIdsFromIndexOnly(plan: [{ Plan: PlanNode }], index: string, offset: number, size: number) {
    const text = JSON.stringify(plan);
    const nodes = flatten(plan[0].Plan);
    assert.ok(!nodes.some((n) => n['Node Type'] === 'Seq Scan' && n['Relation Name'] === 'users'), text);
    const ids = nodes.find((n) => n['Node Type'] === 'Index Only Scan');
    assert.equal(ids?.['Index Name'], index, text);
    assert.equal(ids['Heap Fetches'], 0, text);
    assert.equal(ids['Actual Rows'], offset + size, text);
    const rows = nodes.filter((n) => n !== ids && n['Relation Name'] === 'users');
    assert.deepEqual(
      rows.map((n) => [n['Node Type'], n['Index Name'], n['Actual Rows'] * n['Actual Loops']]),
      [['Index Scan', SORT_INDEXES.id[0], size]],
      text,
    );
  }

  test('by username: the ids from the sort index alone, then only the 20 rows of the page', async () => {
    const { users, total, plan } = await pageAndPlan({
      sortBy: 'username',
      sortOrder: 'asc',
      page: '1000',
      size: '20',
    });
    assertIdsFromIndexOnly(plan, 'idx_users_username_sort', 19_980, 20);
    assert.equal(total, BULK + 1);
    const expected = [...everyone].sort(listOrder('username', 'asc')).slice(19_980, 20_000);
    assert.deepEqual(
      users.map(({ roles, ...user }) => [user, roles]),
      expected.map((user) => [user, ['viewer']]),
    );
  });

  test('a search with a role filter: one statement too, and the users as computed here', async () => {
    const { users, total } = await pageAndPlan({
      search: 'BULK12',
      role: 'viewer',
      sortBy: 'lastLoginAt',
      sortOrder: 'desc',
      page: '2',
      size: '7',
    });
    const matches = everyone.filter((u) => `${u.username}\n${u.name}`.toLowerCase().includes('bulk12'));
    assert.equal(total, matches.length);
    const expected = [...matches].sort(listOrder('lastLoginAt', 'desc')).slice(7, 14);
    assert.deepEqual(
      users.map(({ roles, ...user }) => [user, roles]),
      expected.map((user) => [user, ['viewer']]),
    );
    // Past the last page no row carries the total: it is counted on its own, the same.
    const past = await api.get('/api/v1/admin/users', { query: { search: 'BULK12', role: 'viewer', page: '500' } });
    assert.deepEqual([past.status, past.body.users, past.body.total], [200, [], matches.length]);
  });

  test('every order: the same plan and the users as computed here', async () => {
    for (const sortBy of SORTS) {
      for (const sortOrder of ORDERS) {
        const { users, plan } = await pageAndPlan({ sortBy, sortOrder, page: '1000', size: '20' });
        assertIdsFromIndexOnly(plan, SORT_INDEXES[sortBy][sortOrder === 'asc' ? 0 : 1], 19_980, 20);
        const expected = [...everyone].sort(listOrder(sortBy, sortOrder)).slice(19_980, 20_000);
        assert.deepEqual(
          users.map(({ roles: _roles, ...user }) => user),
          expected,
          `${sortBy} ${sortOrder}`,
        );
      }
    }
  });
});
