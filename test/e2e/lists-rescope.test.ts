/**
 * A paged watch (`watch=true` on a paged query) follows what its caller may see while it runs: a role
 * change or, on an impersonating cluster, a RoleBinding removed, re-scopes its `CHANGED` notices at the
 * next re-check; a caller left with nothing ends it. Against the shared real control plane.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { kubeRequest, waitFor } from '../harness/control-plane.js';
import { signedIn } from '../support/factories.js';
import { request } from '../support/http.js';
import {
  baseOf,
  configmaps,
  openNotices,
  page,
  startWorld,
  stopWorld,
  type Notices,
  type World,
} from '../support/list-world.js';

const pid = process.pid;
/** Streams are re-checked every second here (the default is 4 s). */
const env = { CAS_WATCH_REAUTH_SECONDS: '1' };

async function role(w: World, name: string, namespaces: string[], resources = ['configmaps']): Promise<number> {
  const made = await request(w.t.app, 'POST', '/api/v1/admin/roles', {
    token: w.admin,
    body: { name, rules: [{ clusters: ['c'], namespaces, resources, verbs: ['list'] }] },
  });
  assert.equal(made.status, 201, made.text);
  return made.body.id;
}

async function changeRole(w: World, id: number, namespaces: string[], resources = ['configmaps']): Promise<void> {
  const res = await request(w.t.app, 'PUT', `/api/v1/admin/roles/${id}`, {
    token: w.admin,
    body: { rules: [{ clusters: ['c'], namespaces, resources, verbs: ['list'] }] },
  });
  assert.equal(res.status, 200, res.text);
}

/** Writes in `namespace` alone, more than a second apart (one notice each, were they counted). */
async function writesIn(w: World, namespace: string, prefix: string): Promise<void> {
  for (let i = 0; i < 3; i++) {
    await configmaps(w, namespace, `${prefix}-${i}`, 1);
    await sleep(1_100);
  }
  await sleep(600);
}

const totals = (notices: Notices) => notices.events.map((e) => e.total ?? e.type);

describe('a paged watch after a role change', () => {
  let w: World;
  before(async () => {
    w = await startWorld({ tag: 'rescope', namespaces: 3, env });
  });
  after(() => stopWorld(w));

  test('namespace B removed from the rules: the notices count A only (16 → 11), writes in B send none; no namespace left: the stream ends', async () => {
    const [, A, B] = w.namespaces;
    await configmaps(w, A, 'a', 11);
    await configmaps(w, B, 'b', 5);
    const id = await role(w, `lr-${pid}`, [A, B]);
    const person = (await signedIn(w.t, `lr-${pid}` as never)).token;
    const q = { labelSelector: w.label, page: '1', size: '5' };
    const first = await page(w, 'configmaps/_all', q, person);
    assert.deepEqual([first.status, first.body.total], [200, 16], first.text);

    const notices = await openNotices(await baseOf(w), 'configmaps/_all', q, { token: person });
    assert.equal(notices.status, 200, notices.text);
    try {
      await changeRole(w, id, [A]);
      const now = await page(w, 'configmaps/_all', q, person);
      assert.equal(now.body.total, 11, 'the page itself counts A only');
      // At the next re-check the stream's view follows: one notice with the total the page now has.
      await waitFor('a notice with total 11', async () => notices.events.some((e) => e.total === 11), 6_000, 50);
      assert.deepEqual(totals(notices), [11]);

      await writesIn(w, B, 'lost');
      assert.deepEqual(totals(notices), [11], 'writes in a namespace the caller lost send no notice');
      await configmaps(w, A, 'kept', 1);
      await waitFor('a notice with total 12', async () => notices.events.some((e) => e.total === 12), 5_000, 50);

      // Rules that cover no namespace for the type: the query would be a 403, and the stream ends with one.
      await changeRole(w, id, [A], ['pods']);
      await waitFor('the stream to end', async () => notices.events.some((e) => e.type === 'ERROR'), 6_000, 50);
      const error = notices.events.at(-1)!;
      assert.equal(error.object?.code, 403, JSON.stringify(error));
      assert.match(String(error.object?.message), /configmaps/);
      await notices.done;
    } finally {
      notices.close();
    }
  });
});

describe('a paged watch on an impersonating cluster after a RoleBinding is removed', () => {
  let w: World;
  before(async () => {
    w = await startWorld({ tag: 'rescope-imp', namespaces: 3, env, impersonate: true });
  });
  after(() => stopWorld(w));

  test('the cluster stops letting the person list B: the notices count A only, writes in B send none', async () => {
    const [, A, B] = w.namespaces;
    await configmaps(w, A, 'a', 4);
    await configmaps(w, B, 'b', 3);
    const name = `lri-${pid}`;
    await role(w, name, [A, B]);
    const person = (await signedIn(w.t, name as never, { username: `lri-${pid}` })).token;
    for (const namespace of [A, B]) {
      const res = await kubeRequest(
        w.cp,
        'POST',
        `/apis/rbac.authorization.k8s.io/v1/namespaces/${namespace}/rolebindings`,
        {
          metadata: { name: 'cas-view' },
          roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'view' },
          subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'Group', name: `cas:role:${name}` }],
        },
      );
      assert.equal(res.status, 201, JSON.stringify(res.body));
    }
    const q = { labelSelector: w.label, page: '1' };
    // The cluster's RBAC takes a moment to see new bindings, and its answers are reused for 5 s.
    await waitFor(
      'both namespaces in the page',
      async () => (await page(w, 'configmaps/_all', q, person)).body.total === 7,
      15_000,
      250,
    );
    const notices = await openNotices(await baseOf(w), 'configmaps/_all', q, { token: person });
    assert.equal(notices.status, 200, notices.text);
    try {
      const removed = await kubeRequest(
        w.cp,
        'DELETE',
        `/apis/rbac.authorization.k8s.io/v1/namespaces/${B}/rolebindings/cas-view`,
      );
      assert.equal(removed.status, 200, JSON.stringify(removed.body));
      await waitFor('a notice with total 4', async () => notices.events.some((e) => e.total === 4), 15_000, 100);
      assert.deepEqual(totals(notices), [4]);
      await writesIn(w, B, 'lost');
      assert.deepEqual(totals(notices), [4], 'writes in a namespace the cluster no longer shows send no notice');
      const now = await page(w, 'configmaps/_all', q, person);
      assert.equal(now.body.total, 4);
    } finally {
      notices.close();
    }
  });
});
