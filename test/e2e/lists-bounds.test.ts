import assert from 'node:assert/strict';
import http from 'node:http';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { kubeRequest, sharedControlPlane, waitFor } from '../harness/control-plane.js';
import { signedIn } from '../support/factories.js';
import { request } from '../support/http.js';
import { createCrd } from '../support/kube.js';
import { configmaps, ended, names, page, startWorld, stopWorld, upstream, type World } from '../support/list-world.js';

const pid = process.pid;

describe('lists on an impersonating cluster: the cluster’s RBAC for the person decides what `_all` holds', () => {
  let w: World;
  before(async () => {
    w = await startWorld({ tag: 'imp', namespaces: 3, impersonate: true });
  });
  after(() => stopWorld(w));

  test('a person the cluster lets list only namespace A gets A’s objects, `total` counts them; B’s appear once bound', async () => {
    const [, A, B] = w.namespaces;
    const inA = await configmaps(w, A, 'a', 3);
    const inB = await configmaps(w, B, 'b', 2);
    // The service's rules let the caller list ConfigMaps in every namespace: only the cluster narrows it.
    const role = {
      name: `lb-imp-${pid}`,
      rules: [{ clusters: ['c'], namespaces: ['*'], resources: ['configmaps'], verbs: ['list'] }],
    };
    const made = await request(w.t.app, 'POST', '/api/v1/admin/roles', { token: w.admin, body: role });
    assert.equal(made.status, 201, made.text);
    const person = (await signedIn(w.t, role.name as never, { username: `lb-${pid}` })).token;
    const bind = async (namespace: string) => {
      const res = await kubeRequest(
        w.cp,
        'POST',
        `/apis/rbac.authorization.k8s.io/v1/namespaces/${namespace}/rolebindings`,
        {
          metadata: { name: 'cas-role-view' },
          roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'view' },
          subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'Group', name: `cas:role:${role.name}` }],
        },
      );
      assert.equal(res.status, 201, JSON.stringify(res.body));
    };
    const q = { labelSelector: w.label, size: 100 };

    const unbound = await page(w, 'configmaps/_all', q, person);
    assert.equal(unbound.status, 200, unbound.text);
    assert.deepEqual([unbound.body.total, names(unbound.body)], [0, []], 'no binding yet: nothing');

    // The cluster's answers are reused for 5 s, and its RBAC takes a moment to see a new binding.
    const more = (than: number) =>
      waitFor(
        `more than ${than} objects in the page`,
        async () => {
          const res = await page(w, 'configmaps/_all', q, person);
          assert.equal(res.status, 200, res.text);
          return res.body.total > than ? res.body : undefined;
        },
        15_000,
        250,
      );
    await bind(A);
    const onlyA = await more(0);
    assert.deepEqual([onlyA.total, names(onlyA)], [3, inA.sort()]);
    await bind(B);
    const both = await more(3);
    assert.deepEqual([both.total, names(both)], [5, [...inA, ...inB].sort()]);
    // The service's admin is a person too: the cluster has no binding for cas:role:admin here.
    const admin = await page(w, 'configmaps/_all', q);
    assert.deepEqual([admin.status, admin.body.total], [200, 0]);
  });
});

describe('an idle list cache is dropped with its watch', () => {
  let w: World;
  before(async () => {
    w = await startWorld({ tag: 'idle', namespaces: 1, env: { CAS_LIST_CACHE_IDLE_SECONDS: '1' } });
  });
  after(() => stopWorld(w));

  test('queried, it stays; left alone past CAS_LIST_CACHE_IDLE_SECONDS, its watch ends; the next page is right', async () => {
    const [N] = w.namespaces;
    const made = await configmaps(w, N, 'cm', 3);
    const q = { labelSelector: w.label, size: 100 };
    const first = await page(w, 'configmaps/_all', q);
    assert.equal(first.status, 200, first.text);
    assert.deepEqual(names(first.body), made.sort());

    // Queried every 250 ms for longer than a sweep (5 s): never idle, never dropped.
    for (const until = Date.now() + 6_000; Date.now() < until; await sleep(250)) {
      assert.equal((await page(w, 'configmaps/_all', q)).status, 200);
    }
    assert.deepEqual(await upstream(w, 'configmaps'), { ended: 0, lists: 1 }, 'a queried cache is kept');

    // Left alone: its watch ends within the idle time and one sweep.
    await ended(w, 'configmaps', 1, 8_000);
    // A change made while no cache exists: the next page lists again and has it.
    made.push(...(await configmaps(w, N, 'later', 1)));
    const next = await page(w, 'configmaps/_all', q);
    assert.equal(next.status, 200, next.text);
    assert.deepEqual([next.body.total, names(next.body)], [4, made.sort()]);
    assert.deepEqual(await upstream(w, 'configmaps'), { ended: 1, lists: 2 }, 'a new cache listed the cluster again');
  });
});

describe('a paged watch keeps its list cache', () => {
  let w: World;
  before(async () => {
    w = await startWorld({ tag: 'held', namespaces: 1, env: { CAS_LIST_CACHE_IDLE_SECONDS: '1' } });
  });
  after(() => stopWorld(w));

  test('a watch=true stream open past the idle time keeps its cache: no ERROR, and a CHANGED when the list changes', async () => {
    const [N] = w.namespaces;
    await configmaps(w, N, 'cm', 2);
    await w.t.app.listen({ port: 0, host: '127.0.0.1' });
    const url = `${await w.t.app.getUrl()}/api/v1/configmaps/_all?${new URLSearchParams({ labelSelector: w.label, page: '1', watch: 'true' })}`;
    const events: Array<{ type: string; total?: number }> = [];
    const req = http.get(url.replace('[::1]', '127.0.0.1'), {
      headers: { authorization: `Bearer ${w.admin}`, 'x-cluster-name': 'c' },
    });
    const res = await new Promise<http.IncomingMessage>((resolve, reject) =>
      req.once('response', resolve).once('error', reject),
    );
    assert.equal(res.statusCode, 200);
    let pending = '';
    res.setEncoding('utf8').on('data', (chunk: string) => {
      pending += chunk;
      for (let nl = pending.indexOf('\n'); nl >= 0; nl = pending.indexOf('\n')) {
        events.push(JSON.parse(pending.slice(0, nl)));
        pending = pending.slice(nl + 1);
      }
    });
    try {
      // Nothing changes and no page is asked for over an idle time and more than a sweep (5 s).
      await sleep(7_000);
      assert.equal(events.length, 0, `no ERROR: the cache was kept for the stream (${JSON.stringify(events)})`);
      assert.deepEqual(await upstream(w, 'configmaps'), { ended: 0, lists: 1 });
      await configmaps(w, N, 'later', 1);
      await waitFor('a CHANGED notice with total 3', async () => events.find((e) => e.total === 3), 5_000);
      assert.equal(events[0].type, 'CHANGED');
    } finally {
      req.destroy();
    }
  });
});

describe('the object bound: CAS_LIST_CACHE_MAX_OBJECTS', () => {
  let w: World;
  const group = `lb${pid}.example.com`;
  const types = ['alphas', 'betas', 'gammas'];
  before(async () => {
    w = await startWorld({ tag: 'max', namespaces: 1, env: { CAS_LIST_CACHE_MAX_OBJECTS: '50' } });
    const [N] = w.namespaces;
    for (const plural of types) {
      await createCrd(w.cp, { group, plural, kind: plural[0].toUpperCase() + plural.slice(1, -1), namespace: N });
      // 20 objects each: any two types fit in 50, all three do not.
      await Promise.all(
        Array.from({ length: 20 }, async (_, i) => {
          const res = await kubeRequest(w.cp, 'POST', `/apis/${group}/v1/namespaces/${N}/${plural}`, {
            apiVersion: `${group}/v1`,
            kind: plural[0].toUpperCase() + plural.slice(1, -1),
            metadata: { name: `o-${String(i).padStart(2, '0')}` },
          });
          assert.equal(res.status, 201, JSON.stringify(res.body));
        }),
      );
    }
    // ConfigMaps are a type with more than 50: 51 of this test's own, whatever other tests on the shared
    // cluster create and delete meanwhile (counting theirs once made the count drop below the bound).
    await configmaps(w, N, 'filler', 51, false);
  });
  after(async () => {
    await stopWorld(w);
    const cp = await sharedControlPlane('a');
    for (const plural of types) {
      await kubeRequest(cp, 'DELETE', `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${plural}.${group}`);
    }
  });

  const of = (plural: string) => `${plural}.${group}/_all`;

  test('a type needing more is a 503 naming it and the bound; the caches that fit are served and kept', async () => {
    const alphas = await page(w, of('alphas'), { page: 1, size: 5 });
    assert.deepEqual([alphas.status, alphas.body.total], [200, 20], alphas.text);

    const big = await page(w, 'configmaps/_all', { page: 1 });
    assert.equal(big.status, 503, big.text);
    assert.match(
      big.body.message,
      /^the list of configmaps on cluster 'c' needs more than the 50 objects .*\(CAS_LIST_CACHE_MAX_OBJECTS\)$/,
    );
    assert.equal((await page(w, 'configmaps/_all', { page: 1 })).status, 503, 'and again on the next query');

    // The smaller type is still served, from the cache it had: refusing the big one dropped nothing.
    const again = await page(w, of('alphas'), { page: 4, size: 5 });
    assert.deepEqual([again.status, again.body.total, again.body.items.length], [200, 20, 5], again.text);
    assert.deepEqual(await upstream(w, 'alphas'), { ended: 0, lists: 1 });
  });

  test('two types fit but not three: the least recently used cache is dropped; its next query lists again', async () => {
    const served = async (plural: string) => {
      const res = await page(w, of(plural), { page: 1, size: 50 });
      assert.equal(res.status, 200, res.text);
      assert.equal(res.body.total, 20, `${plural}: ${res.text.slice(0, 200)}`);
    };
    const seen = async () =>
      Object.fromEntries(await Promise.all(types.map(async (plural) => [plural, await upstream(w, plural)])));
    await served('alphas');
    await served('betas');
    const start = await seen();
    await served('alphas'); // betas is now the least recently used
    await served('gammas');
    await ended(w, 'betas', start.betas.ended + 1, 3_000);
    assert.deepEqual(await seen(), {
      alphas: start.alphas, // used more recently: kept, with its watch
      betas: { ended: start.betas.ended + 1, lists: start.betas.lists },
      gammas: { ended: start.gammas.ended, lists: start.gammas.lists + 1 },
    });

    await served('alphas');
    await served('betas'); // listed again; makes room by dropping gammas, now the least recently used
    await ended(w, 'gammas', start.gammas.ended + 1, 3_000);
    assert.deepEqual(await seen(), {
      alphas: start.alphas,
      betas: { ended: start.betas.ended + 1, lists: start.betas.lists + 1 },
      gammas: { ended: start.gammas.ended + 1, lists: start.gammas.lists + 1 },
    });
  });
});

describe('a cluster disabled or reconfigured while its caches are live', () => {
  let w: World;
  before(async () => {
    w = await startWorld({ tag: 'off', namespaces: 1 });
  });
  after(() => stopWorld(w));

  const put = async (body: Record<string, unknown>) => {
    const res = await request(w.t.app, 'PUT', `/api/v1/admin/clusters/${w.clusterId}`, { token: w.admin, body });
    assert.equal(res.status, 200, res.text);
  };

  test('disabled: its caches end within the 5 s sweep, pages are a 409 as every call; enabled again: pages again', async () => {
    const [N] = w.namespaces;
    const made = (await configmaps(w, N, 'cm', 3)).sort();
    const q = { labelSelector: w.label, size: 100 };
    assert.deepEqual(names((await page(w, 'configmaps/_all', q)).body), made);
    assert.equal((await page(w, `secrets/${N}`, { page: 1 })).status, 200);

    await put({ enabled: false });
    const refused = await page(w, 'configmaps/_all', q);
    assert.equal(refused.status, 409, refused.text);
    assert.equal(refused.body.message, "cluster 'c' is disabled");
    // Within the 5 s sweep (and the moment the apiserver takes to write it down).
    await ended(w, 'configmaps', 1, 6_500);
    await ended(w, 'secrets', 1, 1_000);

    await put({ enabled: true });
    const back = await page(w, 'configmaps/_all', q);
    assert.equal(back.status, 200, back.text);
    assert.deepEqual(names(back.body), made);
    assert.deepEqual(await upstream(w, 'configmaps'), { ended: 1, lists: 2 }, 'a new cache');
  });

  test('reconfigured: the old caches end within the sweep; pages come from new ones at once', async () => {
    const q = { labelSelector: w.label, size: 100 };
    const expected = names((await page(w, 'configmaps/_all', q)).body);
    const was = await upstream(w, 'configmaps');
    await put({ impersonate: true });
    await put({ impersonate: false }); // the same connection as before, at a new generation
    const res = await page(w, 'configmaps/_all', q);
    assert.equal(res.status, 200, res.text);
    assert.deepEqual(names(res.body), expected);
    assert.deepEqual(await upstream(w, 'configmaps'), { ended: was.ended, lists: was.lists + 1 }, 'a new cache');
    await ended(w, 'configmaps', was.ended + 1, 7_000);
    await sleep(5_500); // one more sweep: the new cache is the cluster's current one and stays
    assert.deepEqual(await upstream(w, 'configmaps'), { ended: was.ended + 1, lists: was.lists + 1 });
  });
});
