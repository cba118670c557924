import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { onPostgres, startTestApp, type TestApp } from '../support/app.js';
import { createUser, signedIn } from '../support/factories.js';
import { client } from '../support/http.js';

// The user list's search is served by an index (SQLite: a trigram full-text table kept in step by
// triggers; PostgreSQL: pg_trgm): it must follow every insert, rename and delete.
describe('user search follows changes', () => {
  let t: TestApp;
  let api: ReturnType<typeof client>;
  const found = async (search: string) =>
    (
      (await api.get('/api/v1/admin/users', { query: { search, size: '100' } })).body.users as Array<{
        username: string;
      }>
    )
      .map((u) => u.username)
      .sort();

  before(async () => {
    t = await startTestApp();
    api = client(t.app, (await signedIn(t, 'admin', { username: 'root' })).token);
  });
  after(() => t?.close());

  test('a new user is found at once; a rename moves it; a delete removes it', async () => {
    const user = await createUser(t, { username: 'quokka1', name: 'Rottnest Island' });
    assert.deepEqual(await found('okka'), ['quokka1']);
    assert.deepEqual(await found('NEST isl'), ['quokka1']);

    const renamed = await api.put(`/api/v1/admin/users/${user.id}`, { body: { name: 'Kangaroo Point' } });
    assert.equal(renamed.status, 200, renamed.text);
    assert.deepEqual(await found('rottnest'), []);
    assert.deepEqual(await found('aroo po'), ['quokka1']);

    assert.equal((await api.delete(`/api/v1/admin/users/${user.id}`)).status, 200);
    assert.deepEqual(await found('okka'), []);
    assert.deepEqual(await found('aroo'), []);
  });

  test('short terms, quotes and search syntax are plain substrings', async () => {
    await createUser(t, { username: 'wombat1', name: 'Say "hi" * NEAR(x) ^' });
    await createUser(t, { username: 'wombat2', name: 'ab' });
    assert.deepEqual(await found('ab'), ['wombat2']);
    assert.deepEqual(await found('"hi"'), ['wombat1']);
    assert.deepEqual(await found('* near('), ['wombat1']);
    assert.deepEqual(await found('^'), ['wombat1']);
    assert.deepEqual(await found('wombat'), ['wombat1', 'wombat2']);
  });

  test(
    'PostgreSQL: right after many users are added, a search reads the trigram indexes, not every row',
    { skip: !onPostgres && 'PostgreSQL only' },
    async () => {
      await t.dataSource.query(
        `INSERT INTO users (username, username_key, provider, name, enabled)
         SELECT 'bulk' || i, 'bulk' || i, 'password', 'Bulk Person ' || i, true FROM generate_series(0, 29999) AS i`,
      );
      await t.dataSource.query('ANALYZE users');
      // The two conditions of the service's search, each served by its own index (users.service.ts).
      for (const [index, condition] of [
        ['idx_users_username_key_trgm', "username_key LIKE '%lk99%'"],
        ['idx_users_name_trgm', "LOWER(name) LIKE '%on 299%'"],
      ]) {
        const [{ 'QUERY PLAN': plan }] = await t.dataSource.query(
          `EXPLAIN (FORMAT JSON) SELECT id FROM users WHERE ${condition}`,
        );
        const text = JSON.stringify(plan);
        assert.match(text, new RegExp(`"Index Name":"${index}"`), `${condition}: ${text}`);
        assert.doesNotMatch(text, /"Node Type":"Seq Scan"/, `${condition}: ${text}`);
      }
      assert.deepEqual(await found('bulk29999'), ['bulk29999']);
    },
  );
});
