// Database: runs on PostgreSQL too: several replicas share one PostgreSQL.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { kubeRequest, readAudit, sharedControlPlane, type ControlPlane } from '../harness/control-plane.js';
import { createPostgresDatabase, onPostgres, startTestApp, type TestApp } from '../support/app.js';
import { kubeconfigFor } from '../support/clusters.js';
import { createUser, login } from '../support/factories.js';
import { request } from '../support/http.js';
import { serviceAccountToken } from '../support/kube.js';

const HEALTH_INTERVAL_SECONDS = 1;

describe(
  'three replicas on one PostgreSQL, in front of real clusters',
  { skip: onPostgres ? false : 'replicas need PostgreSQL' },
  () => {
    let replicas: TestApp[] = [];
    let dropDatabase: () => Promise<void>;
    let a: ControlPlane;
    let b: ControlPlane;
    let token: string;
    const ns = `rep-${process.pid}`;
    const on = (i: number) => replicas[i % replicas.length];
    const admin = (i: number, method: string, url: string, body?: unknown) =>
      request(on(i).app, method, `/api/v1/${url}`, { token, body });

    before(async () => {
      [a, b] = await Promise.all([sharedControlPlane('a'), sharedControlPlane('b')]);
      const db = await createPostgresDatabase();
      dropDatabase = db.drop;
      // Replicas share the database and the encryption key (docs/DEPLOYMENT.md).
      const env = {
        CAS_CLUSTER_HEALTH_INTERVAL_SECONDS: String(HEALTH_INTERVAL_SECONDS),
        CAS_ENCRYPTION_KEY: randomBytes(32).toString('base64'),
      };
      replicas.push(await startTestApp({ databaseUrl: db.url, env }));
      replicas.push(...(await Promise.all([1, 2].map(() => startTestApp({ databaseUrl: db.url, env })))));
      token = await login(on(0), await createUser(on(0), { role: 'admin' }));
      for (const cp of [a, b]) {
        await kubeRequest(cp, 'POST', '/api/v1/namespaces', { metadata: { name: ns } });
        await kubeRequest(cp, 'POST', `/api/v1/namespaces/${ns}/configmaps`, {
          metadata: { name: 'which' },
          data: { cluster: cp === a ? 'a' : 'b' },
        });
      }
    });
    after(async () => {
      for (const r of replicas) await r.close();
      replicas = [];
      await dropDatabase?.();
      for (const cp of [a, b]) await kubeRequest(cp, 'DELETE', `/api/v1/namespaces/${ns}`);
    });

    test("a cluster's config changed on one replica is used by resource calls on the others within 1 s", async () => {
      const created = await admin(0, 'POST', 'admin/clusters', { name: 'moving', config: kubeconfigFor(a) });
      assert.equal(created.status, 201, created.text);
      const read = (i: number) =>
        request(on(i).app, 'GET', `/api/v1/configmaps/${ns}/which`, { token, headers: { 'x-cluster-name': 'moving' } });
      assert.equal((await read(2)).body.data.cluster, 'a', 'replica 2 has a cached connection to a');
      const moved = await admin(1, 'PUT', `admin/clusters/${created.body.id}`, { config: kubeconfigFor(b) });
      assert.equal(moved.status, 200, moved.text);
      assert.equal((await read(1)).body.data.cluster, 'b', 'the very next call on the replica that made it');
      // The others trust the row they read for at most 1 s.
      for (const i of [0, 2]) {
        // Staleness is when the first request that reached b was sent, not how long it took (discovery of b).
        const started = Date.now();
        for (;;) {
          const sentAt = Date.now() - started;
          if ((await read(i)).body.data.cluster === 'b') {
            console.log(`config change seen by replica ${i} after ${sentAt} ms`);
            break;
          }
          assert.ok(sentAt < 1300, `replica ${i} still reached a ${sentAt} ms after the change`);
          await new Promise((r) => setTimeout(r, 20));
        }
      }
    });

    test('30 concurrent default switches spread over the replicas leave exactly one default', async () => {
      const ids: number[] = [];
      for (let i = 0; i < 5; i++) {
        const res = await admin(i, 'POST', 'admin/clusters', { name: `sw-${i}`, config: kubeconfigFor(b) });
        assert.equal(res.status, 201, res.text);
        ids.push(res.body.id);
      }
      const results = await Promise.all(
        Array.from({ length: 30 }, (_, i) =>
          admin(i, 'PUT', `admin/clusters/${ids[i % ids.length]}`, { isDefault: true }),
        ),
      );
      assert.ok(
        results.every((r) => r.status === 200),
        results.map((r) => r.status).join(','),
      );
      for (const i of [0, 1, 2]) {
        const list = await admin(i, 'GET', 'admin/clusters');
        assert.equal(list.body.filter((c: { isDefault: boolean }) => c.isDefault).length, 1, `replica ${i}`);
      }
    });

    test("background health polling: each cluster's /version is polled by one replica per interval", async () => {
      const sa = await serviceAccountToken(a, ns, 'health');
      const created = await admin(0, 'POST', 'admin/clusters', {
        name: 'polled',
        config: kubeconfigFor(a, { token: sa.token }),
      });
      assert.equal(created.status, 201, created.text);
      const windowStart = new Date(Date.now() + 1000).toISOString();
      const seconds = 6;
      await new Promise((r) => setTimeout(r, (seconds + 1.5) * 1000));
      const windowEnd = new Date(Date.parse(windowStart) + seconds * 1000).toISOString();
      const polls = (await readAudit(a)).filter(
        (e) =>
          e.user.username === sa.username &&
          e.requestURI === '/version' &&
          e.userAgent?.includes('(health)') &&
          e.requestReceivedTimestamp >= windowStart &&
          e.requestReceivedTimestamp < windowEnd,
      );
      // One replica polling once a second: about 6. All three polling would be about 18.
      assert.ok(polls.length >= seconds - 2 && polls.length <= seconds + 2, `${polls.length} polls in ${seconds} s`);
    });
  },
);
