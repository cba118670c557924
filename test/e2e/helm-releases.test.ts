// Issue 42, the read routes: releases installed, upgraded and rolled back by the real helm 3.17 straight against
// the cluster, read through the service from Helm's own storage, and compared field for field with what helm
// itself says (`helm list -A -o json`, `helm history -o json`, `helm get values/manifest/notes`). And who may read
// them: a rule must name `helmreleases`; a namespace-scoped person pages only its namespaces.
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { kubeRequest, waitFor, type ControlPlane } from '../harness/control-plane.js';
import type { TestApp } from '../support/app.js';
import { startClusterApp } from '../support/cluster-app.js';
import { kubeconfigFor } from '../support/clusters.js';
import { createUser, login } from '../support/factories.js';
import { goTimeMs, helmBinary, runHelm, writeChart } from '../support/helm.js';
import { request } from '../support/http.js';

const HELM = helmBinary();
const pid = process.pid;
const NS1 = `helm-a-${pid}`;
const NS2 = `helm-b-${pid}`;
const CLUSTER = 'alpha';

describe(
  'Helm releases read from Helm storage (helm 3.17 as the oracle)',
  { skip: !HELM && 'no helm binary (bash scripts/kube/ensure-layer.sh 30, or HELM_BIN)' },
  () => {
    let cp: ControlPlane;
    let t: TestApp;
    let admin: string;
    let dir: string;
    let chart: string;
    const helm = async (...args: string[]) => {
      const run = await runHelm(HELM!, join(dir, 'home'), cp.kubeconfigPath, args);
      assert.equal(run.code, 0, `helm ${args.join(' ')}: ${run.stderr}`);
      return run.stdout;
    };
    const get = (path: string, token = admin, query?: Record<string, string>) =>
      request(t.app, 'GET', `/api/v1/helm/releases/${path}`, { token, headers: { 'x-cluster-name': CLUSTER }, query });

    /** The service's answer once it shows `revision` of the release (the cache follows the cluster's watch). */
    const detailAt = (ns: string, name: string, revision: number) =>
      waitFor(`revision ${revision} of ${name}`, async () => {
        const res = await get(`${ns}/${name}`);
        return res.status === 200 && res.body.revision === revision && res;
      });

    before(async () => {
      ({ cp, t, admin } = await startClusterApp({ cluster: CLUSTER, namespace: NS1 }));
      await kubeRequest(cp, 'POST', '/api/v1/namespaces', { metadata: { name: NS2 } });
      dir = await mkdtemp(join(tmpdir(), 'cas-helm-'));
      chart = await writeChart(dir);
      await helm('install', 'shop', chart, '-n', NS1, '--set', 'replicas=2', '--set', 'password=first-s3cret-value');
      await helm('install', 'blog', chart, '-n', NS2);
      await helm('install', 'cart', chart, '-n', NS1, '--set', 'greeting=hi');
    });

    after(async () => {
      for (const ns of [NS1, NS2]) await kubeRequest(cp, 'DELETE', `/api/v1/namespaces/${ns}`).catch(() => undefined);
      await t?.close();
      if (dir) await rm(dir, { recursive: true, force: true });
    });

    /** Compares the service's view of `name` with helm's own, field for field. */
    async function sameAsHelm(ns: string, name: string, revision: number) {
      const detail = (await detailAt(ns, name, revision)).body;
      const listed = (JSON.parse(await helm('list', '-A', '-o', 'json')) as any[]).find(
        (r) => r.name === name && r.namespace === ns,
      );
      assert.ok(listed, `helm list shows ${name}`);
      const page = await get(ns, admin, { search: name });
      assert.equal(page.status, 200, page.text);
      const mine = page.body.items.find((r: any) => r.name === name);
      assert.deepEqual(
        {
          name: mine.name,
          namespace: mine.namespace,
          revision: String(mine.revision),
          status: mine.status,
          chart: `${mine.chart.name}-${mine.chart.version}`,
          app_version: mine.chart.appVersion,
          updated: Date.parse(mine.updated),
        },
        { ...listed, updated: goTimeMs(listed.updated) },
      );
      const history = JSON.parse(await helm('history', name, '-n', ns, '-o', 'json')) as any[];
      const ours = await get(`${ns}/${name}/history`);
      assert.equal(ours.status, 200, ours.text);
      assert.deepEqual(
        ours.body.items.map((r: any) => ({
          revision: r.revision,
          updated: Date.parse(r.updated),
          status: r.status,
          chart: `${r.chart.name}-${r.chart.version}`,
          app_version: r.chart.appVersion,
          description: r.description,
        })),
        history.reverse().map((r) => ({ ...r, updated: Date.parse(r.updated) })),
        'history, newest first',
      );
      const values = JSON.parse(await helm('get', 'values', name, '-n', ns, '-o', 'json'));
      assert.deepEqual(detail.values, values ?? {});
      assert.deepEqual(
        detail.computedValues,
        JSON.parse(await helm('get', 'values', name, '-n', ns, '--all', '-o', 'json')),
      );
      assert.equal(detail.manifest.trim(), (await helm('get', 'manifest', name, '-n', ns)).trim());
      assert.equal(`NOTES:\n${detail.notes}`.trim(), (await helm('get', 'notes', name, '-n', ns)).trim());
      assert.deepEqual(detail.objects.map((o: any) => `${o.kind}/${o.name}`).sort(), [
        `ConfigMap/${name}-config`,
        `Deployment/${name}-web`,
        `Secret/${name}-secret`,
        `Service/${name}-web`,
      ]);
      assert.deepEqual(
        detail.hooks.map((h: any) => [h.kind, h.name, h.events]),
        [['ConfigMap', `${name}-hook`, ['post-install', 'post-upgrade']]],
      );
      assert.ok(detail.hooks[0].lastRun.phase, 'the hook ran');
      assert.equal(detail.chart.metadata.description, 'A test chart');
      assert.equal(detail.info.status, listed.status);
      return detail;
    }

    test('list, detail, history, values, manifest and notes equal helm’s own', async () => {
      const detail = await sameAsHelm(NS1, 'shop', 1);
      assert.equal(detail.values.replicas, 2);
      assert.equal(detail.computedValues.greeting, 'hello');
      assert.equal(detail.description, 'Install complete');
      assert.equal(detail.info.deleted, '');
      const byRevision = await get(`${NS1}/shop/revisions/1`);
      assert.deepEqual(byRevision.body, detail);
    });

    test('after helm upgrade and helm rollback, the same again; the diff shows the change with Secret values hidden', async () => {
      await helm(
        'upgrade',
        'shop',
        chart,
        '-n',
        NS1,
        '--reuse-values',
        '--set',
        'replicas=3',
        '--set',
        'password=second-s3cret-value',
      );
      const upgraded = await sameAsHelm(NS1, 'shop', 2);
      assert.equal(upgraded.description, 'Upgrade complete');
      const diff = await get(`${NS1}/shop/diff`, admin, { from: '1', to: '2' });
      assert.equal(diff.status, 200, diff.text);
      const changed = Object.fromEntries(diff.body.objects.map((o: any) => [`${o.kind}/${o.name}`, o]));
      assert.deepEqual(Object.keys(changed).sort(), ['Deployment/shop-web', 'Secret/shop-secret']);
      assert.match(changed['Deployment/shop-web'].diff, /-\s+replicas: 2\n\+\s+replicas: 3/);
      assert.match(changed['Secret/shop-secret'].diff, /\*\*\* \(changed\)/);
      assert.equal(diff.body.unchanged, 2);
      assert.match(diff.body.values, /^-replicas: 2$/m);
      assert.match(diff.body.values, /^\+replicas: 3$/m);
      assert.doesNotMatch(JSON.stringify(diff.body.objects), /s3cret-value/, 'no Secret value in the object diffs');

      await helm('rollback', 'shop', '1', '-n', NS1);
      const rolled = await sameAsHelm(NS1, 'shop', 3);
      assert.equal(rolled.description, 'Rollback to 1');
      assert.equal(rolled.values.replicas, 2);
      const history = await get(`${NS1}/shop/history`);
      assert.deepEqual(
        history.body.items.map((r: any) => [r.revision, r.status]),
        [
          [3, 'deployed'],
          [2, 'superseded'],
          [1, 'superseded'],
        ],
      );
    });

    test('pages sort, search and filter by status', async () => {
      await waitFor(
        'three releases',
        async () => (await get('_all')).body.items?.filter((r: any) => [NS1, NS2].includes(r.namespace)).length === 3,
      );
      const mineOnly = (items: any[]) => items.filter((r) => [NS1, NS2].includes(r.namespace)).map((r) => r.name);
      const byName = await get('_all', admin, { sortBy: 'name', size: '500' });
      assert.deepEqual(mineOnly(byName.body.items), ['blog', 'cart', 'shop']);
      const byNameDesc = await get('_all', admin, { sortBy: 'name', sortOrder: 'desc', size: '500' });
      assert.deepEqual(mineOnly(byNameDesc.body.items), ['shop', 'cart', 'blog']);
      const byUpdated = await get('_all', admin, { sortBy: 'updated', sortOrder: 'desc', size: '500' });
      assert.deepEqual(mineOnly(byUpdated.body.items), ['shop', 'cart', 'blog'], 'shop was rolled back last');
      const ns1 = await get(NS1, admin, { sortBy: 'namespace', size: '1', page: '2' });
      assert.deepEqual(
        [ns1.body.total, ns1.body.page, ns1.body.size, ns1.body.items.map((r: any) => r.name)],
        [2, 2, 1, ['shop']],
      );
      const search = await get(NS1, admin, { search: 'CAR' });
      assert.deepEqual(
        search.body.items.map((r: any) => r.name),
        ['cart'],
      );
      const byChart = await get(NS1, admin, { search: 'shop', sortBy: 'chart' });
      assert.deepEqual(
        byChart.body.items.map((r: any) => r.name),
        ['cart', 'shop'],
        'search covers the chart name',
      );
      const failed = await get(NS1, admin, { status: 'failed' });
      assert.deepEqual(failed.body.items, []);
      for (const [query, word] of [
        [{ sortBy: 'age' }, 'sortBy'],
        [{ status: 'happy' }, 'status'],
        [{ size: '501' }, 'size'],
      ] as const) {
        const bad = await get(NS1, admin, query);
        assert.equal(bad.status, 400, bad.text);
        assert.match(bad.text, new RegExp(word));
      }
    });

    test('a release or revision that does not exist, bad names: 4xx naming them', async () => {
      const missing = await get(`${NS1}/nothing-here`);
      assert.equal(missing.status, 404);
      assert.match(missing.body.message, /nothing-here/);
      const revision = await get(`${NS1}/shop/revisions/99`);
      assert.equal(revision.status, 404);
      assert.match(revision.body.message, /no revision 99/);
      const notNumber = await get(`${NS1}/shop/revisions/x1`);
      assert.equal(notNumber.status, 400);
      const badName = await get(`${NS1}/Bad_Name`);
      assert.equal(badName.status, 400);
      assert.match(badName.text, /release name/);
      const badDiff = await get(`${NS1}/shop/diff`, admin, { from: '1', to: '42' });
      assert.equal(badDiff.status, 404);
      assert.match(badDiff.body.message, /no revision 42/);
    });

    test('without a rule naming helmreleases: 403 and no release name; a namespace-scoped person pages only its namespaces', async () => {
      const role = (name: string, rules: object[]) =>
        request(t.app, 'POST', '/api/v1/admin/roles', { token: admin, body: { name, rules } });
      assert.equal(
        (await role('helm-star', [{ clusters: ['*'], namespaces: ['*'], resources: ['*'], verbs: ['*'] }])).status,
        201,
      );
      assert.equal(
        (
          await role('helm-ns1', [
            { clusters: [CLUSTER], namespaces: [NS1], resources: ['helmreleases'], verbs: ['list', 'get'] },
          ])
        ).status,
        201,
      );
      const star = await login(t, await createUser(t, { role: 'helm-star' as never }));
      const ns1 = await login(t, await createUser(t, { role: 'helm-ns1' as never }));
      for (const path of [
        '_all',
        NS1,
        `${NS1}/shop`,
        `${NS1}/shop/history`,
        `${NS1}/shop/revisions/1`,
        `${NS1}/shop/diff`,
      ]) {
        const res = await get(path, star);
        assert.equal(res.status, 403, `${path}: ${res.text}`);
        assert.match(res.body.message, /helmreleases/);
        assert.doesNotMatch(res.text, /shop|cart|blog/);
      }
      const page = await get('_all', ns1, { size: '500' });
      assert.equal(page.status, 200, page.text);
      assert.deepEqual(
        page.body.items.map((r: any) => r.namespace),
        [NS1, NS1],
      );
      assert.equal(page.body.total, 2);
      const other = await get(NS2, ns1);
      assert.equal(other.status, 403);
      const otherRelease = await get(`${NS2}/blog`, ns1);
      assert.equal(otherRelease.status, 403);
      assert.equal((await get(`${NS1}/shop`, ns1)).status, 200);
    });

    test('on an impersonating cluster the person without get secrets is refused by the cluster', async () => {
      const cluster = await request(t.app, 'POST', '/api/v1/admin/clusters', {
        token: admin,
        body: { name: 'imp', config: kubeconfigFor(cp), impersonate: true },
      });
      assert.equal(cluster.status, 201, cluster.text);
      const role = await request(t.app, 'POST', '/api/v1/admin/roles', {
        token: admin,
        body: {
          name: 'helm-imp',
          rules: [{ clusters: ['imp'], namespaces: [NS1], resources: ['helmreleases'], verbs: ['list', 'get'] }],
        },
      });
      assert.equal(role.status, 201, role.text);
      const person = await login(t, await createUser(t, { role: 'helm-imp' as never }));
      const onImp = (path: string) =>
        request(t.app, 'GET', `/api/v1/helm/releases/${path}`, { token: person, headers: { 'x-cluster-name': 'imp' } });
      for (const path of [NS1, `${NS1}/shop`, '_all']) {
        const refused = await onImp(path);
        if (path === '_all') {
          assert.equal(refused.status, 200, refused.text);
          assert.deepEqual(refused.body.items, [], 'no namespace the cluster lets the person read');
        } else {
          assert.equal(refused.status, 403, `${path}: ${refused.text}`);
          assert.match(refused.body.message, /secrets/);
          assert.doesNotMatch(refused.text, /"shop"|cart/);
        }
      }
      const rbac = '/apis/rbac.authorization.k8s.io/v1/namespaces/' + NS1;
      assert.equal(
        (
          await kubeRequest(cp, 'POST', `${rbac}/roles`, {
            metadata: { name: 'secret-reader' },
            rules: [{ apiGroups: [''], resources: ['secrets'], verbs: ['get'] }],
          })
        ).status,
        201,
      );
      const binding = await kubeRequest(cp, 'POST', `${rbac}/rolebindings`, {
        metadata: { name: 'helm-imp-secrets' },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'secret-reader' },
        subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'Group', name: 'cas:role:helm-imp' }],
      });
      assert.equal(binding.status, 201, JSON.stringify(binding.body));
      const allowed = await waitFor('the binding to count', async () => {
        const res = await onImp(NS1);
        return res.status === 200 && res;
      });
      assert.deepEqual(
        allowed.body.items.map((r: any) => r.name),
        ['cart', 'shop'],
      );
      const all = await waitFor('the _all page to show NS1', async () => {
        const res = await onImp('_all');
        return res.body.total === 2 && res;
      });
      assert.deepEqual([...new Set(all.body.items.map((r: any) => r.namespace))], [NS1]);
    });
  },
);
