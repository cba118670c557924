/**
 * The list caches hold whole objects (Secrets too, read as the service): their JSON is bounded in bytes
 * (CAS_LIST_CACHE_MAX_BYTES) as well as in count, and a caller the service's rules let list none of a
 * type never makes the service list it. Against the shared real control plane; the cluster's audit log
 * tells which lists and watches the caches of this test made.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { kubeRequest, sharedControlPlane } from '../harness/control-plane.js';
import { signedIn } from '../support/factories.js';
import { request } from '../support/http.js';
import { createCrd } from '../support/kube.js';
import { ended, names, page, startWorld, stopWorld, upstream, type World } from '../support/list-world.js';

const pid = process.pid;
const KIB = 1024;

describe('the byte bound: CAS_LIST_CACHE_MAX_BYTES', () => {
  let w: World;
  const group = `lbb${pid}.example.com`;
  const types = ['alphas', 'betas', 'gammas', 'deltas'];
  const kind = (plural: string) => plural[0].toUpperCase() + plural.slice(1, -1);
  const object = (plural: string, name: string, padBytes: number) => ({
    apiVersion: `${group}/v1`,
    kind: kind(plural),
    metadata: { name },
    spec: { pad: 'x'.repeat(padBytes) },
  });
  before(async () => {
    w = await startWorld({ tag: 'bytes', namespaces: 1, env: { CAS_LIST_CACHE_MAX_BYTES: String(1024 * KIB) } });
    const [N] = w.namespaces;
    for (const plural of types) {
      await createCrd(w.cp, { group, plural, kind: kind(plural), namespace: N });
      // 20 objects of ~20 KiB each (~410 KiB a type): two types fit in 1 MiB, three do not;
      // deltas (~60 KiB each, ~1.2 MiB) does not fit alone, although 20 objects are far below the count bound.
      const pad = plural === 'deltas' ? 60 * KIB : 20 * KIB;
      await Promise.all(
        Array.from({ length: 20 }, async (_, i) => {
          const name = `o-${String(i).padStart(2, '0')}`;
          const res = await kubeRequest(
            w.cp,
            'POST',
            `/apis/${group}/v1/namespaces/${N}/${plural}`,
            object(plural, name, pad),
          );
          assert.equal(res.status, 201, JSON.stringify(res.body).slice(0, 300));
        }),
      );
    }
  });
  after(async () => {
    await stopWorld(w);
    const cp = await sharedControlPlane('a');
    for (const plural of types) {
      await kubeRequest(cp, 'DELETE', `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${plural}.${group}`);
    }
  });

  const of = (plural: string) => `${plural}.${group}/_all`;
  const served = async (plural: string) => {
    const res = await page(w, of(plural), { page: 1, size: 50 });
    assert.equal(res.status, 200, res.text.slice(0, 300));
    assert.equal(res.body.total, 20);
  };
  const seen = async () =>
    Object.fromEntries(await Promise.all(types.map(async (plural) => [plural, await upstream(w, plural)])));

  test('a type whose JSON needs more is a 503 naming the bytes and CAS_LIST_CACHE_MAX_BYTES; what fits is kept', async () => {
    await served('alphas');
    const big = await page(w, of('deltas'), { page: 1 });
    assert.equal(big.status, 503, big.text.slice(0, 300));
    assert.equal(
      big.body.message,
      `the list of deltas.${group} on cluster 'c' needs more than the 1048576 bytes of JSON ` +
        'the list caches of this replica may hold (CAS_LIST_CACHE_MAX_BYTES)',
    );
    assert.equal((await page(w, of('deltas'), { page: 1 })).status, 503, 'and again on the next query');
    await served('alphas');
    assert.deepEqual(await upstream(w, 'alphas'), { ended: 0, lists: 1 }, 'refusing deltas dropped nothing');
  });

  test('two types fit but not three: the least recently used is dropped; a type growing through its watch drops the other', async () => {
    await served('alphas');
    await served('betas');
    const start = await seen();
    await served('alphas'); // betas is now the least recently used
    await served('gammas');
    await ended(w, 'betas', start.betas.ended + 1, 3_000);
    assert.deepEqual((await seen()).alphas, start.alphas, 'used more recently: kept, with its watch');

    // Ten gammas grow to ~45 KiB on the cluster: alphas and gammas no longer fit together.
    const [N] = w.namespaces;
    for (let i = 0; i < 10; i++) {
      const name = `o-${String(i).padStart(2, '0')}`;
      const res = await kubeRequest(
        w.cp,
        'PATCH',
        `/apis/${group}/v1/namespaces/${N}/gammas/${name}`,
        { spec: { pad: 'y'.repeat(45 * KIB) } },
        { contentType: 'application/merge-patch+json' },
      );
      assert.equal(res.status, 200, JSON.stringify(res.body).slice(0, 300));
    }
    await ended(w, 'alphas', start.alphas.ended + 1, 5_000);
    const gammas = await page(w, of('gammas'), { page: 1, size: 50, sortBy: 'spec.pad', sortOrder: 'desc' });
    assert.equal(gammas.status, 200, gammas.text.slice(0, 300));
    assert.equal(gammas.body.items.filter((o: any) => o.spec.pad.startsWith('y')).length, 10);
    // alphas lists again when asked, and makes room by dropping gammas.
    await served('alphas');
    await ended(w, 'gammas', start.gammas.ended + 1, 3_000);
  });
});

describe('who makes the service list Secrets', () => {
  let w: World;
  before(async () => {
    w = await startWorld({ tag: 'secrets', namespaces: 2 });
  });
  after(() => stopWorld(w));

  test('a caller whose rules cover no Secrets gets a 403 and the cluster sees no list of Secrets; a rule naming them in one namespace pages that one', async () => {
    const [N, M] = w.namespaces;
    for (const [namespace, name] of [
      [N, 'in-n'],
      [M, 'in-m'],
    ]) {
      const res = await kubeRequest(w.cp, 'POST', `/api/v1/namespaces/${namespace}/secrets`, {
        metadata: { name },
        stringData: { pin: '1234' },
      });
      assert.equal(res.status, 201, JSON.stringify(res.body));
    }
    const viewer = (await signedIn(w.t, 'viewer')).token;
    const refused = await page(w, 'secrets/_all', { page: 1 }, viewer);
    assert.equal(refused.status, 403, refused.text);
    const searched = await request(w.t.app, 'GET', '/api/v1/search', {
      token: viewer,
      query: { q: 'in-', clusters: 'c', resources: 'secrets' },
    });
    assert.deepEqual([searched.status, searched.body.total], [200, 0], searched.text);
    assert.deepEqual(await upstream(w, 'secrets'), { ended: 0, lists: 0 }, 'the service listed no Secret for them');

    const role = {
      name: `lbs-${pid}`,
      rules: [{ clusters: ['c'], namespaces: [M], resources: ['secrets'], verbs: ['list'] }],
    };
    assert.equal((await request(w.t.app, 'POST', '/api/v1/admin/roles', { token: w.admin, body: role })).status, 201);
    const named = (await signedIn(w.t, role.name as never)).token;
    const mine = await page(w, 'secrets/_all', { page: 1, search: 'in-' }, named);
    assert.equal(mine.status, 200, mine.text);
    assert.deepEqual(names(mine.body), [`${M}/in-m`]);
    assert.equal(mine.body.items[0].data.pin, Buffer.from('1234').toString('base64'));
    assert.equal((await upstream(w, 'secrets')).lists, 1, 'the cache of Secrets: one list, of every namespace');
  });
});
