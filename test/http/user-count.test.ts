import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { onPostgres, startTestApp, type TestApp } from '../support/app.js';
import { DEFAULT_PASSWORD, signedIn } from '../support/factories.js';
import { client } from '../support/http.js';

/**
 * On PostgreSQL the unfiltered user list takes its total from the row the triggers of migration
 * 1795410000000 keep. Whatever changes the users — the API one by one or many at once, SQL statements
 * of many rows, a rolled-back transaction, a statement that matches nothing — the total must be what
 * counting the table gives.
 */
describe('PostgreSQL: the user list total follows every change', { skip: !onPostgres && 'PostgreSQL only' }, () => {
  let t: TestApp;
  let api: ReturnType<typeof client>;

  before(async () => {
    t = await startTestApp();
    api = client(t.app, (await signedIn(t, 'admin', { username: 'counter-admin' })).token);
  });
  after(() => t?.close());

  async function totals(): Promise<{ listed: number; counted: number }> {
    const res = await api.get('/api/v1/admin/users', { query: { page: '1', size: '1' } });
    assert.equal(res.status, 200, res.text);
    const [{ n }] = await t.dataSource.query('SELECT COUNT(*)::int AS n FROM users');
    return { listed: res.body.total, counted: n };
  }

  async function assertExact(after: string, expected?: number): Promise<void> {
    const { listed, counted } = await totals();
    assert.equal(listed, counted, `after ${after}: the list says ${listed}, the table holds ${counted}`);
    if (expected !== undefined) assert.equal(listed, expected, after);
  }

  test('creates and deletes through the API, 12 at once', async () => {
    const start = (await totals()).counted;
    const created = await Promise.all(
      Array.from({ length: 12 }, (_, i) =>
        api.post('/api/v1/admin/users', { body: { username: `count-${i}`, password: DEFAULT_PASSWORD } }),
      ),
    );
    assert.deepEqual(
      created.map((r) => r.status),
      Array(12).fill(201),
    );
    await assertExact('12 creates at once', start + 12);
    const deleted = await Promise.all(created.slice(0, 5).map((r) => api.delete(`/api/v1/admin/users/${r.body.id}`)));
    assert.deepEqual(
      deleted.map((r) => r.status),
      Array(5).fill(200),
    );
    await assertExact('5 deletes at once', start + 7);
    // A refused create (the username is taken) changes nothing.
    const taken = await api.post('/api/v1/admin/users', { body: { username: 'count-11', password: DEFAULT_PASSWORD } });
    assert.equal(taken.status, 409, taken.text);
    await assertExact('a refused create', start + 7);
  });

  test('statements of many rows, none, and a rolled-back transaction', async () => {
    const start = (await totals()).counted;
    await t.dataSource.query(
      `INSERT INTO users (username, username_key, provider, name, enabled)
         SELECT 'Many' || i, 'many' || i, 'password', 'Many ' || i, true FROM generate_series(1, 250) AS i`,
    );
    await assertExact('an insert of 250 rows', start + 250);
    await t.dataSource.query(`DELETE FROM users WHERE username_key LIKE 'many%' AND username_key LIKE '%0'`);
    await assertExact('a delete of 25 rows', start + 225);
    await t.dataSource.query(`DELETE FROM users WHERE username_key = 'nobody-has-this-name'`);
    await assertExact('a delete of no row', start + 225);
    await assert.rejects(
      t.dataSource.transaction(async (manager) => {
        await manager.query(
          `INSERT INTO users (username, username_key, provider, name, enabled)
             SELECT 'Gone' || i, 'gone' || i, 'password', 'Gone', true FROM generate_series(1, 40) AS i`,
        );
        throw new Error('rolled back');
      }),
      /rolled back/,
    );
    await assertExact('a rolled-back insert of 40 rows', start + 225);
    await t.dataSource.query(`DELETE FROM users WHERE username_key LIKE 'many%'`);
    await assertExact('deleting the rest', start);
  });

  test('two transactions inserting at once: neither change is lost', async () => {
    const start = (await totals()).counted;
    const insert = (prefix: string) =>
      t.dataSource.transaction(async (manager) => {
        await manager.query(
          `INSERT INTO users (username, username_key, provider, name, enabled)
             SELECT $1 || i, lower($1) || i, 'password', 'Both', true FROM generate_series(1, 30) AS i`,
          [prefix],
        );
        await manager.query('SELECT pg_sleep(0.2)'); // both hold their insert open together
      });
    await Promise.all([insert('First'), insert('Second')]);
    await assertExact('two concurrent inserts of 30', start + 60);
    await t.dataSource.query(`DELETE FROM users WHERE name = 'Both'`);
    await assertExact('deleting them', start);
  });
});
