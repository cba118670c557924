/**
 * GET /api/v1/clusters/{name}/namespaces: the namespaces a caller can reach on a cluster, with the verbs
 * it holds in each — for a console's namespace picker, also for a person who may not list namespaces.
 * Against the shared real control plane.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { kubeRequest, waitFor } from '../harness/control-plane.js';
import { signedIn } from '../support/factories.js';
import { request } from '../support/http.js';
import { startWorld, stopWorld, type World } from '../support/list-world.js';

const pid = process.pid;
const ALL_VERBS = ['get', 'list', 'watch', 'create', 'update', 'patch', 'delete', 'log', 'exec', 'attach', 'portforward'];

type Reach = { name: string; verbs: string[] };

async function role(w: World, name: string, rules: object[]): Promise<string> {
  const made = await request(w.t.app, 'POST', '/api/v1/admin/roles', { token: w.admin, body: { name, rules } });
  assert.equal(made.status, 201, made.text);
  return (await signedIn(w.t, name as never, { username: name })).token;
}

function namespacesOf(w: World, token: string, cluster = 'c') {
  return request(w.t.app, 'GET', `/api/v1/clusters/${encodeURIComponent(cluster)}/namespaces`, { token });
}

describe('the namespaces a caller can reach (cluster without impersonation)', () => {
  let w: World;
  before(async () => {
    w = await startWorld({ tag: 'ns-reach', namespaces: 3 });
  });
  after(() => stopWorld(w));

  test('an admin: every namespace of the cluster, every verb', async () => {
    const res = await namespacesOf(w, w.admin);
    assert.equal(res.status, 200, res.text);
    assert.equal(res.body.cluster, 'c');
    const reach = res.body.namespaces as Reach[];
    const names = reach.map((r) => r.name);
    for (const ns of [...w.namespaces, 'default', 'kube-system']) assert.ok(names.includes(ns), `${ns} listed`);
    assert.deepEqual(names, [...names].sort(), 'sorted by name');
    assert.ok(reach.every((r) => JSON.stringify(r.verbs) === JSON.stringify(ALL_VERBS)));
  });

  test('a namespace-scoped person (who may not list namespaces): its namespaces, its verbs in each', async () => {
    const [A, B] = w.namespaces;
    const name = `nsr-${pid}`;
    const token = await role(w, name, [
      { clusters: ['c'], namespaces: [A], resources: ['configmaps', 'deployments.apps'], verbs: ['get', 'list'] },
      { clusters: ['c'], namespaces: [B, `missing-${pid}`], resources: ['pods'], verbs: ['log', 'exec'] },
      { clusters: ['other'], namespaces: ['*'], resources: ['*'], verbs: ['*'] },
    ]);
    const denied = await request(w.t.app, 'GET', '/api/v1/namespaces/_all', {
      token,
      headers: { 'x-cluster-name': 'c' },
    });
    assert.equal(denied.status, 403, 'the person may not list namespaces');
    const res = await namespacesOf(w, token);
    assert.equal(res.status, 200, res.text);
    assert.deepEqual(
      res.body.namespaces,
      [
        { name: A, verbs: ['get', 'list'] },
        { name: B, verbs: ['log', 'exec'] },
      ].sort((x, y) => (x.name < y.name ? -1 : 1)),
      'a namespace the cluster does not have is left out',
    );
    // A cluster the caller has no rule on is refused before it is looked up; an unknown one is a 404 for an admin.
    const elsewhere = await namespacesOf(w, token, `nowhere-${pid}`);
    assert.equal(elsewhere.status, 403, elsewhere.text);
    assert.match(elsewhere.body.message, /grant nothing on cluster/);
    assert.equal((await namespacesOf(w, w.admin, `nowhere-${pid}`)).status, 404);
    assert.equal((await namespacesOf(w, w.admin, 'a b')).status, 400);
  });
});

describe('the namespaces a person can reach on an impersonating cluster', () => {
  let w: World;
  before(async () => {
    w = await startWorld({ tag: 'ns-reach-imp', namespaces: 2, impersonate: true });
  });
  after(() => stopWorld(w));

  test('rules over every namespace, a RoleBinding in one: that namespace alone, with the verbs both grant', async () => {
    const [A] = w.namespaces;
    const name = `nsri-${pid}`;
    const token = await role(w, name, [
      { clusters: ['c'], namespaces: ['*'], resources: ['*'], verbs: ['get', 'list', 'watch', 'delete'] },
    ]);
    const bound = await kubeRequest(w.cp, 'POST', `/apis/rbac.authorization.k8s.io/v1/namespaces/${A}/rolebindings`, {
      metadata: { name: 'cas-view' },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'view' },
      subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'Group', name: `cas:role:${name}` }],
    });
    assert.equal(bound.status, 201, JSON.stringify(bound.body));
    // The cluster's RBAC takes a moment to see a new binding, and its answers are reused for 5 s.
    let last: unknown;
    await waitFor(
      `${A} in the answer`,
      async () => {
        const res = await namespacesOf(w, token);
        assert.equal(res.status, 200, res.text);
        last = res.body.namespaces;
        return (res.body.namespaces as Reach[]).length > 0;
      },
      15_000,
      250,
    );
    // `view` grants no delete: the service's rules alone would have said every namespace and delete.
    assert.deepEqual(last, [{ name: A, verbs: ['get', 'list', 'watch'] }]);

    // The admin is impersonated too, and the control plane binds nothing to its group: nothing to reach.
    const admin = await namespacesOf(w, w.admin);
    assert.equal(admin.status, 200, admin.text);
    assert.deepEqual(admin.body.namespaces, []);
  });
});
