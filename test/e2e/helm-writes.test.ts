// Issue 42, the write routes: install (from an uploaded archive and from an https chart repository on loopback),
// upgrade, roll back and uninstall through the service, done by the real helm 3.17 as a child process with a
// credential of the caller; each then seen by `helm status/history` exactly as if helm had been run directly.
// Dry runs change nothing; bad input is a 4xx naming it, with no Helm process left behind.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, readdir, rm } from 'node:fs/promises';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { promisify } from 'node:util';
import { kubeRequest, waitFor, type ControlPlane } from '../harness/control-plane.js';
import type { TestApp } from '../support/app.js';
import { startClusterApp } from '../support/cluster-app.js';
import { createUser, login } from '../support/factories.js';
import { helmBinary, runHelm, writeChart } from '../support/helm.js';
import { request } from '../support/http.js';
import { HelmRunner } from '../../src/helm/helm-runner.js';

const HELM = helmBinary();
const pid = process.pid;
const NS = `helm-w-${pid}`;
const CLUSTER = 'alpha';
const run = promisify(execFile);

describe(
  'Helm writes through the service (helm 3.17 as the oracle)',
  { skip: !HELM && 'no helm binary (bash scripts/kube/ensure-layer.sh 30, or HELM_BIN)' },
  () => {
    let cp: ControlPlane;
    let t: TestApp;
    let admin: string;
    let dir: string;
    let archive: Buffer;
    let archive2: Buffer;
    let repo: https.Server;
    let repoUrl: string;
    const helm = (...args: string[]) => runHelm(HELM!, join(dir, 'home'), cp.kubeconfigPath, args);
    const helmOk = async (...args: string[]) => {
      const r = await helm(...args);
      assert.equal(r.code, 0, `helm ${args.join(' ')}: ${r.stderr}`);
      return r.stdout;
    };
    const history = async (name: string) =>
      (JSON.parse(await helmOk('history', name, '-n', NS, '-o', 'json')) as any[]).map((r) => [
        r.revision,
        r.status,
        r.description,
      ]);
    const call = (
      method: string,
      path: string,
      options: { token?: string; body?: unknown; query?: Record<string, string> } = {},
    ) =>
      request(t.app, method, `/api/v1/helm/releases/${path}`, {
        token: options.token ?? admin,
        headers: { 'x-cluster-name': CLUSTER },
        body: options.body,
        query: options.query,
      });
    /** An archive upload (app.inject: `request` sends JSON or text only). */
    const upload = async (method: string, path: string, body: Buffer, query: Record<string, string>, token = admin) => {
      const res = await t.app.inject({
        method: method as 'POST',
        url: `/api/v1/helm/releases/${path}?${new URLSearchParams(query)}`,
        headers: { authorization: `Bearer ${token}`, 'x-cluster-name': CLUSTER, 'content-type': 'application/gzip' },
        payload: body,
      });
      return { status: res.statusCode, body: res.json(), text: res.body };
    };
    const rv = async (path: string) => (await kubeRequest(cp, 'GET', path)).body.metadata.resourceVersion as string;
    const runner = () => t.app.get(HelmRunner);

    before(async () => {
      dir = await mkdtemp(join(tmpdir(), 'cas-helm-w-'));
      const chart = await writeChart(dir, 'shop', '0.1.0');
      const chart2 = await writeChart(dir, 'shop', '0.2.0', '1.3.0');
      const out = join(dir, 'repo');
      await run(HELM!, ['package', chart, '-d', out], { env: { HOME: dir, PATH: process.env.PATH } });
      await run(HELM!, ['package', chart2, '-d', out], { env: { HOME: dir, PATH: process.env.PATH } });
      archive = await readFile(join(out, 'shop-0.1.0.tgz'));
      archive2 = await readFile(join(out, 'shop-0.2.0.tgz'));
      // A chart repository over https on loopback, with a certificate of its own (the service's CA file).
      await run('openssl', [
        'req',
        '-x509',
        '-newkey',
        'ec',
        '-pkeyopt',
        'ec_paramgen_curve:prime256v1',
        '-nodes',
        '-keyout',
        join(dir, 'repo.key'),
        '-out',
        join(dir, 'repo.crt'),
        '-days',
        '2',
        '-subj',
        '/CN=127.0.0.1',
        '-addext',
        'subjectAltName=IP:127.0.0.1',
      ]);
      const [cert, key] = await Promise.all([readFile(join(dir, 'repo.crt')), readFile(join(dir, 'repo.key'))]);
      repo = https.createServer({ cert, key }, (req, res) => {
        const file = join(out, (req.url ?? '/').replace(/^\/+/, '').replace(/\.\./g, ''));
        readFile(file).then(
          (data) => res.end(data),
          () => res.writeHead(404).end(),
        );
      });
      await new Promise<void>((resolve) => repo.listen(0, '127.0.0.1', resolve));
      repoUrl = `https://127.0.0.1:${(repo.address() as AddressInfo).port}`;
      await run(HELM!, ['repo', 'index', out, '--url', repoUrl], { env: { HOME: dir, PATH: process.env.PATH } });
      ({ cp, t, admin } = await startClusterApp({
        cluster: CLUSTER,
        namespace: NS,
        listen: true,
        env: {
          CAS_HELM_BINARY: HELM!,
          CAS_HELM_REPO_ALLOW_LOOPBACK: 'true',
          CAS_HELM_REPO_CA_FILE: join(dir, 'repo.crt'),
          CAS_HELM_MAX_PROCESSES_PER_USER: '1',
        },
      }));
    });

    after(async () => {
      await kubeRequest(cp, 'DELETE', `/api/v1/namespaces/${NS}`).catch(() => undefined);
      await t?.close();
      repo?.close();
      if (dir) await rm(dir, { recursive: true, force: true });
    });

    test('install from an uploaded archive and from a chart repository: helm sees what it would have done', async () => {
      const up = await upload('POST', NS, archive, { name: 'up', values: JSON.stringify({ replicas: 2 }) });
      assert.equal(up.status, 200, up.text);
      assert.equal(up.body.release.revision, 1);
      assert.equal(up.body.release.status, 'deployed');
      assert.match(up.body.notes, /Release up of shop/);
      const status = JSON.parse(await helmOk('status', 'up', '-n', NS, '-o', 'json'));
      assert.deepEqual(
        [status.info.status, status.version, status.info.description],
        ['deployed', 1, 'Install complete'],
      );
      assert.deepEqual(JSON.parse(await helmOk('get', 'values', 'up', '-n', NS, '-o', 'json')), { replicas: 2 });

      const fromRepo = await call('POST', NS, {
        body: { name: 'fromrepo', chart: 'shop', repo: repoUrl, version: '0.1.0', values: { greeting: 'yo' } },
      });
      assert.equal(fromRepo.status, 200, fromRepo.text);
      assert.deepEqual(fromRepo.body.release.chart, { name: 'shop', version: '0.1.0', appVersion: '1.2.3' });
      assert.deepEqual(JSON.parse(await helmOk('get', 'values', 'fromrepo', '-n', NS, '-o', 'json')), {
        greeting: 'yo',
      });
      const cm = await kubeRequest(cp, 'GET', `/api/v1/namespaces/${NS}/configmaps/fromrepo-config`);
      assert.equal(cm.body.data.greeting, 'yo');
      // The service's read routes see it at once.
      const listed = await call('GET', NS);
      assert.deepEqual(
        listed.body.items.map((r: any) => r.name),
        ['fromrepo', 'up'],
      );
    });

    test('a dry-run upgrade changes nothing and shows the diff the real upgrade then makes', async () => {
      const deployment = `/apis/apps/v1/namespaces/${NS}/deployments/up-web`;
      const secret = `/api/v1/namespaces/${NS}/secrets/up-secret`;
      const before = [await rv(deployment), await rv(secret)];
      const dry = await call('PUT', `${NS}/up`, {
        body: { values: { replicas: 3, password: 'n3w-s3cret-value' }, reuseValues: true, dryRun: true },
      });
      assert.equal(dry.status, 200, dry.text);
      assert.equal(dry.body.dryRun, true);
      assert.equal(dry.body.release.revision, 2);
      assert.match(dry.body.manifest, /replicas: 3/);
      const byName = Object.fromEntries(dry.body.changes.map((c: any) => [`${c.kind}/${c.name}`, c]));
      assert.equal(byName['Deployment/up-web'].action, 'configured');
      assert.match(byName['Deployment/up-web'].diff, /-\s+replicas: 2\n\+\s+replicas: 3/);
      assert.equal(byName['ConfigMap/up-config'].action, 'unchanged');
      assert.doesNotMatch(dry.text, /n3w-s3cret-value/, 'no Secret value in a dry run');
      assert.deepEqual([await rv(deployment), await rv(secret)], before, 'nothing changed');
      assert.deepEqual(await history('up'), [[1, 'deployed', 'Install complete']]);

      const real = await call('PUT', `${NS}/up`, { body: { values: { replicas: 3 }, reuseValues: true } });
      assert.equal(real.status, 200, real.text);
      assert.equal(real.body.release.revision, 2);
      assert.equal((await kubeRequest(cp, 'GET', deployment)).body.spec.replicas, 3);
      assert.deepEqual(await history('up'), [
        [1, 'superseded', 'Install complete'],
        [2, 'deployed', 'Upgrade complete'],
      ]);
      assert.deepEqual(JSON.parse(await helmOk('get', 'values', 'up', '-n', NS, '-o', 'json')), { replicas: 3 });
    });

    test('upgrade with a new chart from the repository and from an archive; roll back; helm upgrades it directly', async () => {
      const byRepo = await call('PUT', `${NS}/fromrepo`, {
        body: { chart: 'shop', repo: repoUrl, values: { greeting: 'hey' } },
      });
      assert.equal(byRepo.status, 200, byRepo.text);
      assert.equal(byRepo.body.release.chart.version, '0.2.0', 'the newest version');
      const byArchive = await upload('PUT', `${NS}/up`, archive2, { values: '{"replicas":4}', reuseValues: 'true' });
      assert.equal(byArchive.status, 200, byArchive.text);
      assert.deepEqual([byArchive.body.release.revision, byArchive.body.release.chart.version], [3, '0.2.0']);

      const back = await call('POST', `${NS}/up/rollback`, { body: { revision: 1 } });
      assert.equal(back.status, 200, back.text);
      assert.deepEqual([back.body.release.revision, back.body.release.description], [4, 'Rollback to 1']);
      assert.deepEqual(await history('up'), [
        [1, 'superseded', 'Install complete'],
        [2, 'superseded', 'Upgrade complete'],
        [3, 'superseded', 'Upgrade complete'],
        [4, 'deployed', 'Rollback to 1'],
      ]);
      assert.equal(
        (await kubeRequest(cp, 'GET', `/apis/apps/v1/namespaces/${NS}/deployments/up-web`)).body.spec.replicas,
        2,
      );

      const chartDir = join(dir, 'shop-0.2.0');
      await helmOk('upgrade', 'up', chartDir, '-n', NS, '--reuse-values', '--set', 'replicas=5');
      assert.deepEqual((await history('up')).at(-1), [5, 'deployed', 'Upgrade complete']);
      // The service upgrades with the release's own stored chart when none is sent.
      const own = await call('PUT', `${NS}/up`, { body: { values: { greeting: 'own' }, reuseValues: true } });
      assert.equal(own.status, 200, own.text);
      assert.deepEqual([own.body.release.revision, own.body.release.chart.version], [6, '0.2.0']);
      assert.equal(
        (await kubeRequest(cp, 'GET', `/api/v1/namespaces/${NS}/configmaps/up-config`)).body.data.greeting,
        'own',
      );
    });

    test('uninstall: dry run lists, keepHistory keeps, plain removes; one audit row per operation, never a value', async () => {
      const dry = await call('DELETE', `${NS}/fromrepo`, { query: { dryRun: 'true' } });
      assert.equal(dry.status, 200, dry.text);
      assert.deepEqual(dry.body.changes.map((c: any) => `${c.kind}/${c.name}`).sort(), [
        'ConfigMap/fromrepo-config',
        'Deployment/fromrepo-web',
        'Secret/fromrepo-secret',
        'Service/fromrepo-web',
      ]);
      assert.equal((await helm('status', 'fromrepo', '-n', NS)).code, 0, 'still there');
      const kept = await call('DELETE', `${NS}/fromrepo`, { query: { keepHistory: 'true' } });
      assert.equal(kept.status, 200, kept.text);
      assert.equal(kept.body.release.status, 'uninstalled');
      assert.deepEqual((await history('fromrepo')).at(-1)?.[1], 'uninstalled');
      const gone = await call('DELETE', `${NS}/up`);
      assert.equal(gone.status, 200, gone.text);
      assert.deepEqual([gone.body.release.status, gone.body.release.revision], ['uninstalled', 6]);
      const status = await helm('status', 'up', '-n', NS);
      assert.notEqual(status.code, 0);
      assert.match(status.stderr, /not found/);

      const rows = await waitFor('audit rows', async () => {
        const found = (await t.dataSource.query(`SELECT * FROM audit_events WHERE resource = 'helmreleases'`)) as any[];
        return found.length >= 9 && found;
      });
      const ops = rows.map((r) => `${r.operation} ${r.name} ${r.status_code ?? r.statusCode}`);
      assert.ok(ops.includes(`installHelmRelease up 200`), ops.join('\n'));
      assert.ok(ops.includes(`rollbackHelmRelease up 200`), ops.join('\n'));
      assert.ok(ops.includes(`uninstallHelmRelease up 200`), ops.join('\n'));
      assert.doesNotMatch(JSON.stringify(rows), /n3w-s3cret-value|"replicas"|greeting/);
      // The objects Helm wrote were audited as the person, on the Kubernetes API path.
      const kubeRows = (await t.dataSource.query(`SELECT * FROM audit_events WHERE name = 'up-web'`)) as any[];
      assert.ok(
        kubeRows.some((r) => String(r.operation).startsWith('kubernetes')),
        'the objects Helm wrote are audited',
      );
    });

    test('bad input is a 4xx naming it, and no Helm process is left behind', async () => {
      const cases: Array<[string, Promise<{ status: number; text: string }>, number, RegExp]> = [
        [
          'unknown chart',
          call('POST', NS, { body: { name: 'x1', chart: 'nope', repo: repoUrl } }),
          404,
          /no chart 'nope'/,
        ],
        [
          'unknown version',
          call('POST', NS, { body: { name: 'x1', chart: 'shop', version: '9.9.9', repo: repoUrl } }),
          404,
          /9\.9\.9/,
        ],
        [
          'http repo',
          call('POST', NS, { body: { name: 'x1', chart: 'shop', repo: 'http://127.0.0.1:1/' } }),
          400,
          /only https/,
        ],
        [
          'link-local repo',
          call('POST', NS, { body: { name: 'x1', chart: 'shop', repo: 'https://169.254.169.254/' } }),
          400,
          /link-local/,
        ],
        ['not a URL', call('POST', NS, { body: { name: 'x1', chart: 'shop', repo: 'https://' } }), 400, /not a URL/],
        [
          'corrupt archive',
          upload('POST', NS, Buffer.from('not a chart at all, just text'), { name: 'x1' }),
          400,
          /not gzip/,
        ],
        [
          'values not an object',
          call('POST', NS, { body: { name: 'x1', chart: 'shop', repo: repoUrl, values: [1, 2] } }),
          400,
          /values must be an object/,
        ],
        [
          'values not JSON',
          upload('POST', NS, archive, { name: 'x1', values: '{oops' }),
          400,
          /values must be a JSON object/,
        ],
        [
          'bad release name',
          call('POST', NS, { body: { name: 'Bad_Name', chart: 'shop', repo: repoUrl } }),
          400,
          /release name/,
        ],
        [
          'missing revision',
          call('POST', `${NS}/fromrepo/rollback`, { body: { revision: 99 } }),
          404,
          /no revision 99/,
        ],
        ['missing release', call('PUT', `${NS}/nothing`, { body: { values: {} } }), 404, /nothing/],
        ['name in use', upload('POST', NS, archive, { name: 'fromrepo' }), 409, /still in use/],
      ];
      for (const [what, pending, status, message] of cases) {
        const res = await pending;
        assert.equal(res.status, status, `${what}: ${res.text}`);
        assert.match(res.text, message, what);
      }
      const big = await upload('POST', NS, Buffer.alloc(10 * 1024 * 1024 + 1, 1), { name: 'x1' });
      assert.equal(big.status, 413);
      assert.equal(runner().size, 0, 'no Helm process left');
      const children = await run('ps', ['-o', 'pid=,args=', '--ppid', String(process.pid)]).then(
        (r) => r.stdout,
        () => '',
      );
      assert.doesNotMatch(children, /helm/);
      assert.deepEqual(
        (await readdir(tmpdir())).filter((f) => f.startsWith('cas-helm-op-')),
        [],
        'no operation folder left',
      );
    });

    test('one user runs one Helm process at a time here (429 beyond); a person who may not write an object of the chart gets the cluster’s Forbidden', async () => {
      const [a, b] = await Promise.all([
        upload('POST', NS, archive, { name: 'para1', dryRun: 'true' }),
        upload('POST', NS, archive, { name: 'para2', dryRun: 'true' }),
      ]);
      assert.deepEqual([a.status, b.status].sort(), [200, 429], `${a.text} ${b.text}`);
      assert.match((a.status === 429 ? a : b).text, /CAS_HELM_MAX_PROCESSES_PER_USER/);

      const role = await request(t.app, 'POST', '/api/v1/admin/roles', {
        token: admin,
        body: {
          name: 'helm-no-cm',
          rules: [
            {
              clusters: [CLUSTER],
              namespaces: [NS],
              resources: ['helmreleases', 'secrets', 'services', 'deployments.apps'],
              verbs: ['*'],
            },
            // ConfigMaps read but not written: Helm gets as far as writing them.
            { clusters: [CLUSTER], namespaces: [NS], resources: ['configmaps'], verbs: ['get', 'list'] },
          ],
        },
      });
      assert.equal(role.status, 201, role.text);
      const person = await login(t, await createUser(t, { role: 'helm-no-cm' as never }));
      const refused = await upload('POST', NS, archive, { name: 'nocm' }, person);
      assert.equal(refused.status, 403, refused.text);
      assert.match(refused.body.message, /forbidden/i);
      assert.match(refused.body.message, /configmaps/);
      const status = JSON.parse(await helmOk('status', 'nocm', '-n', NS, '-o', 'json'));
      assert.equal(status.info.status, 'failed', 'helm recorded the failure; the service did not call it a success');
    });

    test('without a Helm binary the write routes answer 503 naming CAS_HELM_BINARY', async () => {
      const other = await startClusterApp({ cluster: 'nohelm', env: { CAS_HELM_BINARY: join(dir, 'no-such-helm') } });
      try {
        const res = await request(other.t.app, 'POST', `/api/v1/helm/releases/${NS}`, {
          token: other.admin,
          headers: { 'x-cluster-name': 'nohelm' },
          body: { name: 'x', chart: 'shop', repo: repoUrl },
        });
        assert.equal(res.status, 503);
        assert.match(res.body.message, /CAS_HELM_BINARY/);
        const read = await request(other.t.app, 'GET', `/api/v1/helm/releases/${NS}`, {
          token: other.admin,
          headers: { 'x-cluster-name': 'nohelm' },
        });
        assert.equal(read.status, 200, 'the read routes work');
      } finally {
        await other.t.close();
      }
    });
  },
);
