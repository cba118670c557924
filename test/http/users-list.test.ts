import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { RoleEntity } from '../../src/users/role.entity.js';
import { UserEntity } from '../../src/users/user.entity.js';
import { startTestApp, type TestApp } from '../support/app.js';
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

const SEEDED = 1000;
const BASE = Date.parse('2025-01-01T00:00:00Z');

function seedSpec(i: number) {
  let username = `u${String(i).padStart(4, '0')}`;
  if (i % 100 === 0) username = `u_${String(i).padStart(4, '0')}`; // literal underscores
  if (i % 7 === 0) username = username.toUpperCase(); // mixed case
  let name = `person ${String((i * 37) % 1000).padStart(3, '0')}`;
  if (i === 5) name = '100% sure';
  if (i === 6) name = 'Mixed Case NAME';
  // Distinct, unordered creation and login times; every third user never logged in.
  const createdAt = BASE + ((i * 7919) % SEEDED) * 60_000;
  const lastLoginAt = i % 3 === 0 ? null : BASE + 100 * 86_400_000 + ((i * 104729) % SEEDED) * 1000;
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
    const me = (await api.get('/api/v1/admin/users', { query: { search: 'zz-admin' } })).body.users[0];
    model.push({
      id: me.id,
      username: me.username,
      name: me.name,
      createdAt: Date.parse(me.createdAt),
      lastLoginAt: Date.parse(me.lastLoginAt),
      roles: ['admin'],
    });
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

  for (const sortBy of ['id', 'username', 'name', 'createdAt', 'lastLoginAt'] as const) {
    for (const sortOrder of ['asc', 'desc'] as const) {
      test(`sortBy=${sortBy} sortOrder=${sortOrder}`, async () => {
        const sign = sortOrder === 'asc' ? 1 : -1;
        const key = (m: Model): string | number | null =>
          sortBy === 'username' ? m.username.toLowerCase() : sortBy === 'name' ? m.name.toLowerCase() : m[sortBy];
        const expected = [...model]
          .sort((a, b) => {
            const ka = key(a);
            const kb = key(b);
            if (ka === null || kb === null) {
              if (ka === null && kb === null) return sign * (a.id - b.id);
              return ka === null ? 1 : -1; // never logged in: last in both orders
            }
            if (ka < kb) return -sign;
            if (ka > kb) return sign;
            return sign * (a.id - b.id);
          })
          .map((m) => m.id);
        const { ids, totals } = await allPages({ sortBy, sortOrder });
        assert.deepEqual(ids, expected);
        assert.ok(totals.every((n) => n === SEEDED + 1));
      });
    }
  }

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
