import assert from 'node:assert/strict';
import http from 'node:http';
import net from 'node:net';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { kubeRequest, waitFor, type ControlPlane } from '../harness/control-plane.js';
import type { TestApp } from '../support/app.js';
import { startClusterApp } from '../support/cluster-app.js';
import { kubeconfigFor, registerCluster } from '../support/clusters.js';
import { signedIn } from '../support/factories.js';
import { request } from '../support/http.js';
import { LabelSelectorError, parseLabelSelector } from '../../src/k8s/label-selector.js';

const pid = process.pid;
const NS1 = `lists-a-${pid}`;
const NS2 = `lists-b-${pid}`;
/** Every object of this file carries it, so that `_all` comparisons ignore what other test files do meanwhile. */
const MINE = `lists-test=p${pid}`;
const APPS = ['web', 'api', 'db'];

type Obj = {
  metadata: { name: string; namespace?: string; labels?: Record<string, string>; creationTimestamp?: string };
};

/** A relay to the real apiserver that can be cut (every connection dropped, new ones refused) and restored. */
async function cuttableRelay(target: URL) {
  const sockets = new Set<net.Socket>();
  let cut = false;
  const server = net.createServer((client) => {
    if (cut) return client.destroy();
    const upstream = net.connect(Number(target.port), target.hostname);
    sockets.add(client).add(upstream);
    client.pipe(upstream).pipe(client);
    for (const s of [client, upstream]) {
      s.on('error', () => {
        client.destroy();
        upstream.destroy();
      });
      s.on('close', () => sockets.delete(s));
    }
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    port: (server.address() as net.AddressInfo).port,
    cut() {
      cut = true;
      for (const s of sockets) s.destroy();
    },
    restore() {
      cut = false;
    },
    close() {
      cut = true;
      for (const s of sockets) s.destroy();
      server.close();
    },
  };
}

/** The test's own sort of the cluster's list: the value at the path, then namespace, then name. */
function valueAt(o: unknown, path: string): string | number | boolean | null {
  let v: any = o;
  for (const part of path.split('.')) v = v === null || typeof v !== 'object' ? undefined : v[part];
  return v === undefined || v === null ? null : typeof v === 'object' ? JSON.stringify(v) : v;
}
function compare(a: Obj, b: Obj, path: string, desc: boolean): number {
  const rank = (v: unknown) => (v === null ? 0 : typeof v === 'boolean' ? 1 : typeof v === 'number' ? 2 : 3);
  const va = valueAt(a, path);
  const vb = valueAt(b, path);
  let c = rank(va) - rank(vb);
  if (c === 0 && va !== vb) c = (va as string) < (vb as string) ? -1 : 1;
  if (c !== 0) return desc ? -c : c;
  const na = a.metadata.namespace ?? '';
  const nb = b.metadata.namespace ?? '';
  if (na !== nb) return na < nb ? -1 : 1;
  return a.metadata.name < b.metadata.name ? -1 : a.metadata.name > b.metadata.name ? 1 : 0;
}
function searchMatches(o: Obj, search: string): boolean {
  const s = search.toLowerCase();
  const m = o.metadata;
  return [m.name, m.namespace ?? '', ...Object.values(m.labels ?? {})].some((v) => v.toLowerCase().includes(s));
}
const id = (o: Obj) => `${o.metadata.namespace ?? ''}/${o.metadata.name}`;

describe('lists for consoles: pages from the list cache against the real control plane', () => {
  let cp: ControlPlane;
  let t: TestApp;
  let admin: string;
  let base: string;
  let relay: Awaited<ReturnType<typeof cuttableRelay>>;

  /** The cluster's own list (its selectors applied by the apiserver), in the test's order, searched and paged. */
  async function expected(
    path: string,
    q: {
      labelSelector?: string;
      fieldSelector?: string;
      sortBy?: string;
      sortOrder?: string;
      search?: string;
      page?: number;
      size?: number;
    },
  ) {
    const params = new URLSearchParams();
    if (q.labelSelector) params.set('labelSelector', q.labelSelector);
    if (q.fieldSelector) params.set('fieldSelector', q.fieldSelector);
    const res = await kubeRequest(cp, 'GET', `${path}?${params}`);
    assert.equal(res.status, 200, JSON.stringify(res.body));
    let items = res.body.items as Obj[];
    if (q.search) items = items.filter((o) => searchMatches(o, q.search!));
    items.sort((a, b) => compare(a, b, q.sortBy ?? 'metadata.name', q.sortOrder === 'desc'));
    const size = q.size ?? 50;
    const start = ((q.page ?? 1) - 1) * size;
    return { total: items.length, names: items.slice(start, start + size).map(id) };
  }

  async function page(cluster: string, route: string, q: Record<string, string | number | undefined>, token = admin) {
    const query: Record<string, string> = {};
    for (const [k, v] of Object.entries(q)) if (v !== undefined) query[k] = String(v);
    return request(t.app, 'GET', `/api/v1/${route}`, { token, headers: { 'x-cluster-name': cluster }, query });
  }

  async function same(route: string, clusterPath: string, q: Parameters<typeof expected>[1], cluster = 'lists') {
    const res = await page(cluster, route, { ...q });
    assert.equal(res.status, 200, res.text);
    const want = await expected(clusterPath, q);
    const got = { total: res.body.total, names: (res.body.items as Obj[]).map(id) };
    assert.deepEqual(got, want, `${route} ${JSON.stringify(q)}`);
    return res.body;
  }

  const configmap = (name: string, i: number) => ({
    metadata: {
      name,
      labels: {
        'lists-test': `p${pid}`,
        app: APPS[i % 3],
        tier: String(i % 5),
        ...(i % 4 === 0 ? { canary: 'yes' } : {}),
      },
    },
    data: { i: String(i) },
  });

  before(async () => {
    ({ cp, t, admin, base } = await startClusterApp({ cluster: 'lists', namespace: NS1, listen: true }));
    await kubeRequest(cp, 'POST', '/api/v1/namespaces', { metadata: { name: NS2 } });
    relay = await cuttableRelay(new URL(cp.server));
    await registerCluster(t, admin, 'relayed', kubeconfigFor(cp, { server: `https://127.0.0.1:${relay.port}` }));
    const creates: Promise<unknown>[] = [];
    for (let i = 0; i < 40; i++) {
      const ns = i % 2 === 0 ? NS1 : NS2;
      const name = `${APPS[i % 3]}-${String(i).padStart(2, '0')}${i % 7 === 0 ? '-WEBHOOK' : ''}`.toLowerCase();
      creates.push(kubeRequest(cp, 'POST', `/api/v1/namespaces/${ns}/configmaps`, configmap(name, i)));
      if (i % 10 === 9) await Promise.all(creates.splice(0)); // a few creation seconds apart
      if (i % 10 === 9) await sleep(1000);
    }
    for (const [name, type] of [
      ['s-custom-1', 'example.com/custom'],
      ['s-custom-2', 'example.com/custom'],
      ['s-opaque', 'Opaque'],
    ]) {
      await kubeRequest(cp, 'POST', `/api/v1/namespaces/${NS1}/secrets`, { metadata: { name }, type, data: {} });
    }
  });
  after(async () => {
    relay?.close();
    await kubeRequest(cp, 'DELETE', `/api/v1/namespaces/${NS1}`);
    await kubeRequest(cp, 'DELETE', `/api/v1/namespaces/${NS2}`);
    await t?.close();
  });

  test('pages equal the cluster list sorted, searched and paged in the test: keys, orders, first/middle/last/beyond', async () => {
    for (const sortBy of [
      'metadata.name',
      'metadata.namespace',
      'metadata.creationTimestamp',
      'metadata.labels.tier',
    ]) {
      for (const sortOrder of ['asc', 'desc']) {
        for (const [p, size] of [
          [1, 7],
          [3, 7],
          [6, 7],
          [7, 7],
          [1, 500],
        ]) {
          await same('configmaps/_all', '/api/v1/configmaps', {
            labelSelector: MINE,
            sortBy,
            sortOrder,
            page: p,
            size,
          });
        }
      }
    }
    const body = await same(`configmaps/${NS1}`, `/api/v1/namespaces/${NS1}/configmaps`, { page: 1 });
    assert.equal(body.kind, 'ConfigMapList');
    assert.equal(body.apiVersion, 'v1');
    assert.equal(body.page, 1);
    assert.equal(body.size, 50);
    assert.match(body.metadata.resourceVersion, /^\d+$/);
    assert.equal(body.items[0].kind, 'ConfigMap');
    const beyond = await same('configmaps/_all', '/api/v1/configmaps', { labelSelector: MINE, page: 99, size: 10 });
    assert.deepEqual(beyond.items, []);
    assert.equal(beyond.total, 40);
  });

  test('search: case-insensitive substring of name, namespace or a label value', async () => {
    for (const search of ['web', 'WEB', 'hook', `lists-b-${pid}`, 'api-1', 'yes', 'nothing-matches-this']) {
      await same('configmaps/_all', '/api/v1/configmaps', {
        labelSelector: MINE,
        search,
        sortBy: 'metadata.creationTimestamp',
        sortOrder: 'desc',
        size: 10,
      });
    }
  });

  test('label selectors: every operator, as the apiserver evaluates it; refused ones are a 400 the apiserver also gives', async () => {
    const selectors = [
      'app=web',
      'app==web',
      'app!=web',
      'app in (web,db)',
      'app notin (web)',
      'canary',
      '!canary',
      'tier>2',
      'tier<2',
      'app=web,tier in (0,1,2),!canary',
      ' app = api , tier != 3 ',
      'app in ()',
      'missing notin (x)',
      // refused by the apiserver
      'app=web,',
      'app in web',
      'tier>x',
      '-bad=1',
      'a b',
      'app=(x)',
    ];
    for (const selector of selectors) {
      const cluster = await kubeRequest(
        cp,
        'GET',
        `/api/v1/namespaces/${NS1}/configmaps?${new URLSearchParams({ labelSelector: selector })}`,
      );
      let ours: 'ok' | 'refused';
      try {
        parseLabelSelector(selector);
        ours = 'ok';
      } catch (error) {
        assert.ok(error instanceof LabelSelectorError);
        ours = 'refused';
      }
      assert.equal(
        ours,
        cluster.status === 200 ? 'ok' : 'refused',
        `${selector}: the apiserver answered ${cluster.status}`,
      );
      if (cluster.status === 200) {
        await same('configmaps/_all', '/api/v1/configmaps', { labelSelector: `${MINE},${selector}`, size: 500 });
      } else {
        const res = await page('lists', `configmaps/${NS1}`, { labelSelector: selector, page: 1 });
        assert.equal(res.status, 400, res.text);
        assert.match(JSON.stringify(res.body), /labelSelector/);
      }
    }
  });

  test('field selectors: metadata.name, metadata.namespace and the type’s own fields, as the apiserver', async () => {
    for (const fieldSelector of [
      `metadata.namespace=${NS2}`,
      `metadata.namespace!=${NS2}`,
      'metadata.name=web-00-webhook',
    ]) {
      await same('configmaps/_all', '/api/v1/configmaps', { labelSelector: MINE, fieldSelector, size: 500 });
    }
    for (const fieldSelector of [
      'type=example.com/custom',
      'type!=example.com/custom',
      'type==Opaque,metadata.name!=x',
    ]) {
      await same(`secrets/${NS1}`, `/api/v1/namespaces/${NS1}/secrets`, { fieldSelector, size: 500 });
    }
    await same('namespaces/_all', '/api/v1/namespaces', { fieldSelector: 'status.phase=Active', search: `${pid}` });
    // A field the type cannot be selected by: the apiserver's 400, and ours.
    const cluster = await kubeRequest(cp, 'GET', `/api/v1/namespaces/${NS1}/configmaps?fieldSelector=data.i%3D1`);
    assert.equal(cluster.status, 400);
    const res = await page('lists', `configmaps/${NS1}`, { fieldSelector: 'data.i=1', page: 1 });
    assert.equal(res.status, 400, res.text);
    assert.match(res.body.message.join(' '), /field label not supported: data\.i/);
  });

  test('bad paging input is a 400 naming it: size 0 and 501, page 0, sortOrder, pass-through parameters mixed in', async () => {
    for (const [q, what] of [
      [{ size: 0 }, /size/],
      [{ size: 501 }, /size/],
      [{ page: 0 }, /page/],
      [{ page: 1, sortOrder: 'up' }, /sortOrder/],
      [{ page: 1, sortBy: 'a..b' }, /sortBy/],
      [{ page: 1, limit: 5 }, /limit cannot be used with a paged query/],
    ] as const) {
      const res = await page('lists', 'configmaps/_all', q);
      assert.equal(res.status, 400, `${JSON.stringify(q)}: ${res.text}`);
      assert.match(JSON.stringify(res.body.message), what);
    }
  });

  test('changes made on the cluster are in the next page after 1 s; writes through the service at once', async () => {
    const q = { labelSelector: MINE, sortBy: 'metadata.creationTimestamp', sortOrder: 'desc', size: 100 };
    await same('configmaps/_all', '/api/v1/configmaps', q);
    // Straight on the cluster: a create, a relabel, a delete.
    await kubeRequest(cp, 'POST', `/api/v1/namespaces/${NS2}/configmaps`, configmap('fresh-one', 1));
    await kubeRequest(
      cp,
      'PATCH',
      `/api/v1/namespaces/${NS1}/configmaps/web-00-webhook`,
      { metadata: { labels: { app: 'moved' } } },
      {
        contentType: 'application/merge-patch+json',
      },
    );
    await kubeRequest(cp, 'DELETE', `/api/v1/namespaces/${NS1}/configmaps/db-02`);
    await sleep(1000);
    await same('configmaps/_all', '/api/v1/configmaps', q);
    await same('configmaps/_all', '/api/v1/configmaps', { ...q, labelSelector: `${MINE},app=moved` });
    // Through the service: the next page has it, without waiting.
    for (let i = 0; i < 5; i++) {
      const name = `ryw-${i}`;
      const created = await request(t.app, 'POST', `/api/v1/configmaps/${NS1}`, {
        token: admin,
        headers: { 'x-cluster-name': 'lists' },
        body: configmap(name, i),
      });
      assert.equal(created.status, 201, created.text);
      const res = await page('lists', 'configmaps/_all', { ...q, search: name });
      assert.deepEqual(res.body.items.map(id), [`${NS1}/${name}`]);
      const patched = await request(t.app, 'PATCH', `/api/v1/configmaps/${NS1}/${name}`, {
        token: admin,
        headers: { 'x-cluster-name': 'lists', 'content-type': 'application/merge-patch+json' },
        body: { metadata: { labels: { app: 'patched' } } },
      });
      assert.equal(patched.status, 200, patched.text);
      const after = await page('lists', 'configmaps/_all', {
        ...q,
        search: name,
        labelSelector: `${MINE},app=patched`,
      });
      assert.equal(after.body.total, 1);
      const deleted = await request(t.app, 'DELETE', `/api/v1/configmaps/${NS1}/${name}`, {
        token: admin,
        headers: { 'x-cluster-name': 'lists' },
      });
      assert.equal(deleted.status, 200, deleted.text);
      const gone = await page('lists', 'configmaps/_all', { ...q, search: name });
      assert.equal(gone.body.total, 0, `${name} still listed after its delete`);
    }
    await same('configmaps/_all', '/api/v1/configmaps', q);
  });

  test('a namespace-scoped caller: `_all` pages only its namespaces, `total` counts only those', async () => {
    const role = {
      name: `lists-ns-${pid}`,
      rules: [{ clusters: ['lists'], namespaces: [NS1], resources: ['configmaps'], verbs: ['list'] }],
    };
    const made = await request(t.app, 'POST', '/api/v1/admin/roles', { token: admin, body: role });
    assert.equal(made.status, 201, made.text);
    const scoped = (await signedIn(t, role.name as never)).token;
    const res = await page('lists', 'configmaps/_all', { labelSelector: MINE, size: 500 }, scoped);
    assert.equal(res.status, 200, res.text);
    const want = await expected(`/api/v1/namespaces/${NS1}/configmaps`, { labelSelector: MINE, size: 500 });
    assert.deepEqual({ total: res.body.total, names: res.body.items.map(id) }, want);
    assert.ok(want.total > 0);
    const other = await page('lists', `configmaps/${NS2}`, { page: 1 }, scoped);
    assert.equal(other.status, 403, other.text);
    const secrets = await page('lists', `secrets/_all`, { page: 1 }, scoped);
    assert.equal(secrets.status, 403, secrets.text);
  });

  test('watch=true on a paged query: CHANGED with the total within 1.5 s of a change, at most one a second', async () => {
    const url = `${base}/api/v1/configmaps/_all?${new URLSearchParams({ labelSelector: MINE, search: 'notice', watch: 'true', page: '1' })}`;
    const lines: Array<{ at: number; event: any }> = [];
    const req = http.get(url, { headers: { authorization: `Bearer ${admin}`, 'x-cluster-name': 'lists' } });
    const res = await new Promise<http.IncomingMessage>((resolve, reject) =>
      req.once('response', resolve).once('error', reject),
    );
    assert.equal(res.statusCode, 200);
    let pending = '';
    res.setEncoding('utf8').on('data', (chunk: string) => {
      pending += chunk;
      for (let nl = pending.indexOf('\n'); nl >= 0; nl = pending.indexOf('\n')) {
        lines.push({ at: Date.now(), event: JSON.parse(pending.slice(0, nl)) });
        pending = pending.slice(nl + 1);
      }
    });
    try {
      const made = Date.now();
      for (let i = 0; i < 3; i++) {
        await kubeRequest(cp, 'POST', `/api/v1/namespaces/${NS2}/configmaps`, configmap(`notice-${i}`, i));
      }
      await waitFor('a CHANGED notice with total 3', async () => lines.find((l) => l.event.total === 3), 5000, 20);
      const first = lines[0];
      assert.equal(first.event.type, 'CHANGED');
      assert.match(first.event.resourceVersion, /^\d+$/);
      assert.ok(first.at - made < 1500, `first notice ${first.at - made} ms after the change`);
      await sleep(1500);
      for (let i = 1; i < lines.length; i++)
        assert.ok(lines[i].at - lines[i - 1].at >= 950, 'two notices within a second');
      // A change outside the query's result sends nothing.
      const before = lines.length;
      await kubeRequest(cp, 'POST', `/api/v1/namespaces/${NS2}/configmaps`, configmap('unrelated', 2));
      await sleep(1500);
      assert.equal(lines.length, before);
    } finally {
      req.destroy();
    }
  });

  test('search: names across clusters and types, only what the caller may list', async () => {
    const name = `findme-${pid}`;
    await kubeRequest(cp, 'POST', `/api/v1/namespaces/${NS1}/configmaps`, configmap(name, 0));
    await kubeRequest(cp, 'POST', `/api/v1/namespaces/${NS2}/secrets`, { metadata: { name: `${name}-s` }, data: {} });
    await sleep(1000);
    const search = (token: string, query: Record<string, string>) =>
      request(t.app, 'GET', '/api/v1/search', { token, query });
    const res = await search(admin, {
      q: name.toUpperCase(),
      clusters: 'lists,relayed',
      resources: 'configmaps,secrets,pods',
    });
    assert.equal(res.status, 200, res.text);
    assert.deepEqual(
      res.body.items.map((i: any) => `${i.cluster} ${i.resource} ${i.namespace}/${i.name} ${i.kind} ${i.apiVersion}`),
      [
        `lists configmaps ${NS1}/${name} ConfigMap v1`,
        `relayed configmaps ${NS1}/${name} ConfigMap v1`,
        `lists secrets ${NS2}/${name}-s Secret v1`,
        `relayed secrets ${NS2}/${name}-s Secret v1`,
      ],
    );
    assert.equal(res.body.total, 4);
    const one = await search(admin, { q: name, clusters: 'lists', size: '1' });
    assert.deepEqual([one.body.total, one.body.items.length], [1, 1]); // secrets are not a default type
    // A caller who may list configmaps in NS1 only on `lists`: the rest is left out, never a 403.
    const role = {
      name: `lists-search-${pid}`,
      rules: [{ clusters: ['lists'], namespaces: [NS1, NS2], resources: ['configmaps'], verbs: ['list'] }],
    };
    assert.equal((await request(t.app, 'POST', '/api/v1/admin/roles', { token: admin, body: role })).status, 201);
    const scoped = (await signedIn(t, role.name as never)).token;
    const mine = await search(scoped, { q: name, resources: 'configmaps,secrets' });
    assert.equal(mine.status, 200, mine.text);
    assert.deepEqual(
      mine.body.items.map((i: any) => `${i.cluster} ${i.resource} ${i.namespace}/${i.name}`),
      [`lists configmaps ${NS1}/${name}`],
    );
    for (const query of [
      {},
      { q: '' },
      { q: 'x', size: '0' },
      { q: 'x', size: '501' },
      { q: 'x', resources: 'a,,b' },
    ]) {
      const bad = await search(admin, query as Record<string, string>);
      assert.equal(bad.status, 400, `${JSON.stringify(query)}: ${bad.text}`);
    }
  });

  test('after the cluster’s watch is broken: no page from a cache behind by more than 1 s; relisted after a 410', async () => {
    const path = '/api/v1/configmaps';
    const q = { labelSelector: MINE, sortBy: 'metadata.name', size: 500 };
    await same('configmaps/_all', path, q, 'relayed');
    relay.cut();
    // While the watch is down: more changes than the apiserver's watch cache keeps (→ 410 on resume).
    for (let i = 0; i < 160; i += 16) {
      await Promise.all(
        Array.from({ length: 16 }, (_, j) =>
          kubeRequest(
            cp,
            'PATCH',
            `/api/v1/namespaces/${NS1}/configmaps/web-00-webhook`,
            { data: { n: String(i + j) } },
            {
              contentType: 'application/merge-patch+json',
            },
          ),
        ),
      );
    }
    await kubeRequest(cp, 'POST', `/api/v1/namespaces/${NS1}/configmaps`, configmap('while-cut', 0));
    await kubeRequest(cp, 'DELETE', `/api/v1/namespaces/${NS2}/configmaps/api-01`);
    await sleep(1100);
    const during = await page('relayed', 'configmaps/_all', q);
    assert.notEqual(during.status, 200, 'a page was served while the cluster could not be reached');
    assert.ok([502, 503, 504].includes(during.status), during.text);
    relay.restore();
    await waitFor(
      'the relayed cache to recover',
      async () => (await page('relayed', 'configmaps/_all', q)).status === 200,
      30_000,
      200,
    );
    const body = await same('configmaps/_all', path, q, 'relayed');
    const names = body.items.map(id);
    assert.ok(names.includes(`${NS1}/while-cut`));
    assert.ok(!names.includes(`${NS2}/api-01`));
    const webhook = body.items.find((o: any) => o.metadata.name === 'web-00-webhook');
    // The patches went 16 at a time: the cluster's last one, whichever it was, is what the page shows.
    const stored = await kubeRequest(cp, 'GET', `/api/v1/namespaces/${NS1}/configmaps/web-00-webhook`);
    assert.equal(webhook.data.n, stored.body.data.n);
    assert.equal(webhook.metadata.resourceVersion, stored.body.metadata.resourceVersion);
  });
});
