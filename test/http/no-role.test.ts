import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { startTestApp, type TestApp } from '../support/app.js';
import { signedIn } from '../support/factories.js';
import { client } from '../support/http.js';

// Review finding 6: a user whose roles were all taken away could still read cluster resources.
describe('a caller with no role', () => {
  let t: TestApp;
  let token: string;
  before(async () => {
    t = await startTestApp();
    await signedIn(t, 'admin', { username: 'root' });
    token = (await signedIn(t, [], { username: 'nobody' })).token;
  });
  after(() => t?.close());

  test('may see who it is and log out', async () => {
    const api = client(t.app, token);
    const me = await api.get('/api/v1/auth/me');
    assert.equal(me.status, 200);
    assert.deepEqual(me.body.roles, []);
    assert.equal((await api.post('/api/v1/auth/logout')).status, 200);
  });

  test('gets 403 on the cluster picker and on every resource route, before any cluster is looked up', async () => {
    const { token: fresh } = await signedIn(t, [], { username: 'nobody2' });
    const api = client(t.app, fresh);
    const headers = { 'x-cluster-name': 'no-such-cluster' };
    const calls = [
      await api.get('/api/v1/clusters'),
      await api.get('/api/v1/configmaps/default', { headers }),
      await api.get('/api/v1/configmaps/default/x', { headers }),
      await api.get('/api/v1/namespaces/_all', { headers }),
      await api.post('/api/v1/configmaps/default', { headers, body: { metadata: { name: 'x' } } }),
      await api.delete('/api/v1/configmaps/default/x', { headers }),
      await api.get('/api/v1/admin/users'),
    ];
    for (const res of calls) {
      assert.equal(res.status, 403, res.text);
      assert.match(res.body.message, /role/);
      assert.ok(res.headers['x-request-id']);
    }
  });
});
