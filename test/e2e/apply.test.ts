// Issue 33: server-side apply (POST /api/v1/apply, PATCH patchType=apply) on the real control plane, with
// Debian's kubectl 1.20 (`apply --server-side` against the cluster directly) as the oracle for results,
// managedFields and conflict lists.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { stringify } from 'yaml';
import { AuditService } from '../../src/audit/audit.service.js';
import { ClusterGateway } from '../../src/clusters/gateway/cluster-gateway.js';
import { kubeBinDir } from '../harness/binaries.js';
import { kubeRequest, readAudit, waitFor, type ControlPlane } from '../harness/control-plane.js';
import type { TestApp } from '../support/app.js';
import { startClusterApp } from '../support/cluster-app.js';
import { kubeconfigFor } from '../support/clusters.js';
import { createUser, login } from '../support/factories.js';
import { request, type Response } from '../support/http.js';

const KUBECTL = process.env.KUBECTL_BIN || join(kubeBinDir(), 'kubectl');

type Obj = Record<string, any>;

/** kubectl against the control plane directly (its admin kubeconfig). */
function kubectl(cp: ControlPlane, args: string[], input: string) {
  return new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
    const child = execFile(
      KUBECTL,
      ['--kubeconfig', cp.kubeconfigPath, ...args],
      { env: { ...process.env, KUBECONFIG: '' }, timeout: 60_000 },
      (error, stdout, stderr) =>
        resolve({ code: error ? (typeof error.code === 'number' ? error.code : -1) : 0, stdout, stderr }),
    );
    child.stdin!.end(input);
  });
}

/** The conflicts kubectl reports: `conflict with "m": .f`, or `conflicts with "m":` followed by `- .f` lines. */
function kubectlConflicts(stderr: string): Array<{ manager: string; field: string }> {
  const found: Array<{ manager: string; field: string }> = [];
  let manager = '';
  for (const line of stderr.split('\n')) {
    const head = /conflicts? with "([^"]+)"(?: using [^:]+)?:(?: (\S+))?\s*$/.exec(line);
    if (head) {
      manager = head[1];
      if (head[2]) found.push({ manager, field: head[2] });
      continue;
    }
    const item = /^- (\S+)$/.exec(line);
    if (item && manager) found.push({ manager, field: item[1] });
  }
  return found.sort((a, b) => a.field.localeCompare(b.field));
}

const yamlStream = (docs: Obj[]) => docs.map((d) => stringify(d)).join('---\n');

/** managedFields without the time of each write (two applies a moment apart differ there). */
const managers = (object: Obj) =>
  (object.metadata.managedFields as Obj[])
    .map(({ time: _time, ...entry }) => entry)
    .sort((a, b) => `${a.manager}${a.operation}`.localeCompare(`${b.manager}${b.operation}`));

describe('apply: server-side apply of one or many documents', () => {
  let t: TestApp;
  let cp: ControlPlane;
  let admin: string;
  const pid = process.pid;
  const nsSvc = `apply-svc-${pid}`;
  const nsKc = `apply-kc-${pid}`;
  const nsOther = `apply-other-${pid}`;
  const group = `apply${pid}.example.com`;
  /** Every response of the test, searched for Secret values at the end. */
  const responses: string[] = [];

  const applyAs = async (
    token: string,
    body: string | unknown,
    query: Record<string, string> = {},
  ): Promise<Response> => {
    const yaml = typeof body === 'string';
    const res = await request(t.app, 'POST', '/api/v1/apply', {
      token,
      headers: { 'x-cluster-name': 'alpha', 'content-type': yaml ? 'application/yaml' : 'application/json' },
      ...(yaml ? { rawBody: body } : { body }),
      query,
    });
    responses.push(res.text);
    return res;
  };
  const apply = (body: string | unknown, query: Record<string, string> = {}) => applyAs(admin, body, query);
  const live = async (path: string) => (await kubeRequest(cp, 'GET', path)).body as Obj;

  before(async () => {
    ({ cp, t, admin } = await startClusterApp({ cluster: 'alpha' }));
    for (const ns of [nsSvc, nsKc, nsOther]) {
      await kubeRequest(cp, 'POST', '/api/v1/namespaces', { metadata: { name: ns } });
    }
  });
  after(async () => {
    for (const ns of [nsSvc, nsKc, nsOther]) await kubeRequest(cp, 'DELETE', `/api/v1/namespaces/${ns}`);
    await kubeRequest(cp, 'DELETE', `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.${group}`);
    await t?.close();
  });

  test('oracle: results, managedFields and conflict lists match kubectl apply --server-side', async () => {
    const docs = (value: string) => [
      {
        apiVersion: 'v1',
        kind: 'ConfigMap',
        metadata: { name: 'settings', labels: { app: 'shop' } },
        data: { mode: value, size: 'l' },
      },
      {
        apiVersion: 'apps/v1',
        kind: 'Deployment',
        metadata: { name: 'web' },
        spec: {
          replicas: 1,
          selector: { matchLabels: { app: 'web' } },
          template: {
            metadata: { labels: { app: 'web' } },
            spec: { containers: [{ name: 'app', image: 'example.invalid/web:1' }] },
          },
        },
      },
      {
        apiVersion: 'v1',
        kind: 'Service',
        metadata: { name: 'web' },
        spec: { selector: { app: 'web' }, ports: [{ port: 80, protocol: 'TCP' }] },
      },
    ];
    const paths = (ns: string) => [
      `/api/v1/namespaces/${ns}/configmaps/settings`,
      `/apis/apps/v1/namespaces/${ns}/deployments/web`,
      `/api/v1/namespaces/${ns}/services/web`,
    ];
    const byKubectl = (stream: string, manager: string, extra: string[] = []) =>
      kubectl(cp, ['apply', '--server-side', `--field-manager=${manager}`, '-n', nsKc, ...extra, '-f', '-'], stream);
    const versions = async (ns: string) =>
      Promise.all(paths(ns).map(async (p) => (await live(p)).metadata.resourceVersion));
    const sameManagedFields = async () => {
      for (const [i, path] of paths(nsSvc).entries()) {
        assert.deepEqual(managers(await live(path)), managers(await live(paths(nsKc)[i])), path);
      }
    };

    // 1. Created.
    let res = await apply(yamlStream(docs('fast')), { namespace: nsSvc, fieldManager: 'oracle' });
    let kc = await byKubectl(yamlStream(docs('fast')), 'oracle');
    assert.equal(res.status, 200, res.text);
    assert.equal(kc.code, 0, kc.stderr);
    assert.deepEqual(
      res.body.results.map((r: Obj) => r.action),
      ['created', 'created', 'created'],
    );
    assert.deepEqual(kc.stdout.trim().split('\n'), [
      'configmap/settings serverside-applied',
      'deployment.apps/web serverside-applied',
      'service/web serverside-applied',
    ]);
    assert.deepEqual(
      res.body.results.map((r: Obj) => [r.apiVersion, r.kind, r.namespace, r.name]),
      [
        ['v1', 'ConfigMap', nsSvc, 'settings'],
        ['apps/v1', 'Deployment', nsSvc, 'web'],
        ['v1', 'Service', nsSvc, 'web'],
      ],
    );
    assert.match(res.body.results[0].diff, /^--- \/dev\/null\n\+\+\+ b\//);
    assert.match(res.body.results[0].diff, /^\+ {2}mode: fast$/m);
    await sameManagedFields();

    // 2. The same again: kubectl writes nothing (its resourceVersions stay), the service says unchanged.
    const svcBefore = await versions(nsSvc);
    const kcBefore = await versions(nsKc);
    res = await apply(yamlStream(docs('fast')), { namespace: nsSvc, fieldManager: 'oracle' });
    kc = await byKubectl(yamlStream(docs('fast')), 'oracle');
    assert.equal(kc.code, 0, kc.stderr);
    assert.deepEqual(await versions(nsKc), kcBefore, 'kubectl changed nothing');
    assert.deepEqual(
      res.body.results.map((r: Obj) => r.action),
      ['unchanged', 'unchanged', 'unchanged'],
    );
    assert.deepEqual(
      res.body.results.map((r: Obj) => r.diff),
      ['', '', ''],
    );
    assert.deepEqual(await versions(nsSvc), svcBefore);

    // 3. One value changed: configured (kubectl wrote that object only).
    res = await apply(yamlStream(docs('slow')), { namespace: nsSvc, fieldManager: 'oracle' });
    kc = await byKubectl(yamlStream(docs('slow')), 'oracle');
    assert.equal(kc.code, 0, kc.stderr);
    const kcAfter = await versions(nsKc);
    assert.deepEqual(
      res.body.results.map((r: Obj) => r.action),
      ['configured', 'unchanged', 'unchanged'],
    );
    assert.deepEqual(
      kcAfter.map((v, i) => v !== kcBefore[i]),
      [true, false, false],
    );
    assert.match(res.body.results[0].diff, /^- {2}mode: fast\n\+ {2}mode: slow$/m);
    await sameManagedFields();

    // 4. Another manager takes two fields over (forced, with kubectl, in both namespaces); applying again is a
    // conflict listing the same manager and fields kubectl lists.
    const intruder = (ns: string) =>
      kubectl(
        cp,
        ['apply', '--server-side', '--force-conflicts', '--field-manager=intruder', '-n', ns, '-f', '-'],
        stringify({
          apiVersion: 'v1',
          kind: 'ConfigMap',
          metadata: { name: 'settings' },
          data: { mode: 'x', size: 's' },
        }),
      );
    for (const ns of [nsSvc, nsKc]) assert.equal((await intruder(ns)).code, 0);
    res = await apply(yamlStream(docs('slow')), { namespace: nsSvc, fieldManager: 'oracle' });
    kc = await byKubectl(yamlStream(docs('slow')), 'oracle');
    assert.notEqual(kc.code, 0);
    const conflict = res.body.results[0];
    assert.equal(conflict.action, 'conflict', JSON.stringify(conflict));
    assert.equal(conflict.status.reason, 'Conflict');
    assert.deepEqual(
      conflict.conflicts
        .map((c: Obj) => ({ manager: c.manager, field: c.field }))
        .sort((a: Obj, b: Obj) => a.field.localeCompare(b.field)),
      kubectlConflicts(kc.stderr),
    );
    assert.equal(kubectlConflicts(kc.stderr).length, 2, kc.stderr);
    assert.deepEqual(
      res.body.results.slice(1).map((r: Obj) => r.action),
      ['unchanged', 'unchanged'],
      'the others go on',
    );
    await sameManagedFields();

    // 5. force=true takes the fields back, as --force-conflicts does.
    res = await apply(yamlStream(docs('slow')), { namespace: nsSvc, fieldManager: 'oracle', force: 'true' });
    kc = await byKubectl(yamlStream(docs('slow')), 'oracle', ['--force-conflicts']);
    assert.equal(kc.code, 0, kc.stderr);
    assert.equal(res.body.results[0].action, 'configured');
    assert.deepEqual((await live(paths(nsSvc)[0])).data, { mode: 'slow', size: 'l' });
    await sameManagedFields();
  });

  test('the default field manager is cas:<username>; an API key applies as cas:key:<name>', async () => {
    const doc = {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: 'owned', namespace: nsSvc },
      data: { a: '1' },
    };
    const res = await apply(doc);
    assert.equal(res.body.results[0].action, 'created', res.text);
    const me = await request(t.app, 'GET', '/api/v1/auth/me', { token: admin });
    const object = await live(`/api/v1/namespaces/${nsSvc}/configmaps/owned`);
    assert.deepEqual(
      object.metadata.managedFields.map((m: Obj) => [m.manager, m.operation]),
      [[`cas:${me.body.user.username}`, 'Apply']],
    );

    const key = await request(t.app, 'POST', '/api/v1/admin/apikeys', {
      token: admin,
      body: { name: `deployer-${pid}`, role: 'admin' },
    });
    assert.equal(key.status, 201, key.text);
    const byKey = await applyAs(key.body.key, { ...doc, data: { a: '1', b: '2' } });
    assert.equal(byKey.body.results[0].action, 'configured', byKey.text);
    const managersNow = (await live(`/api/v1/namespaces/${nsSvc}/configmaps/owned`)).metadata.managedFields.map(
      (m: Obj) => m.manager,
    );
    assert.ok(managersNow.includes(`cas:key:deployer-${pid}`), managersNow.join());
  });

  test('dry run: nothing changes, and the diff is the one the real apply then makes', async () => {
    const cm = (mode: string) => ({
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: 'dry', namespace: nsSvc },
      data: { mode, keep: 'yes' },
    });
    const fresh = {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: 'dry-new', namespace: nsSvc },
      data: { a: 'b' },
    };
    await apply(cm('one'));
    const path = `/api/v1/namespaces/${nsSvc}/configmaps/dry`;
    const before = await live(path);

    const dry = await apply([cm('two'), fresh], { dryRun: 'All' });
    assert.deepEqual(
      dry.body.results.map((r: Obj) => r.action),
      ['configured', 'created'],
      dry.text,
    );
    const still = await live(path);
    assert.equal(still.metadata.resourceVersion, before.metadata.resourceVersion);
    assert.equal(still.data.mode, 'one');
    assert.equal((await kubeRequest(cp, 'GET', `/api/v1/namespaces/${nsSvc}/configmaps/dry-new`)).status, 404);

    const real = await apply([cm('two'), fresh]);
    assert.deepEqual(
      real.body.results.map((r: Obj) => r.action),
      ['configured', 'created'],
    );
    assert.deepEqual(
      real.body.results.map((r: Obj) => r.diff),
      dry.body.results.map((r: Obj) => r.diff),
    );
    assert.match(real.body.results[0].diff, /^- {2}mode: one\n\+ {2}mode: two$/m);
    assert.notEqual((await live(path)).metadata.resourceVersion, before.metadata.resourceVersion);
    // The audit rows say which documents were only checked.
    await t.app.get(AuditService).flush();
    const rows = (await t.dataSource.query('SELECT request_id, detail FROM audit_events')) as Obj[];
    const of = (id: unknown) => rows.filter((r) => r.request_id === id).map((r) => r.detail);
    assert.deepEqual(of(dry.headers['x-request-id']), ['{"dryRun":true}', '{"dryRun":true}']);
    assert.deepEqual(of(real.headers['x-request-id']), [null, null]);
  });

  test('a CRD and its custom resource in one request (the resource listed first); a JSON List works too', async () => {
    const widget = {
      apiVersion: `${group}/v1`,
      kind: 'Widget',
      metadata: { name: 'w1', namespace: nsSvc },
      spec: { size: 3 },
    };
    const crd = {
      apiVersion: 'apiextensions.k8s.io/v1',
      kind: 'CustomResourceDefinition',
      metadata: { name: `widgets.${group}` },
      spec: {
        group,
        scope: 'Namespaced',
        names: { plural: 'widgets', singular: 'widget', kind: 'Widget' },
        versions: [
          {
            name: 'v1',
            served: true,
            storage: true,
            schema: {
              openAPIV3Schema: {
                type: 'object',
                properties: { spec: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true } },
              },
            },
          },
        ],
      },
    };
    const ns = { apiVersion: 'v1', kind: 'Namespace', metadata: { name: `apply-ns-${pid}` } };
    const res = await apply(yamlStream([widget, crd, ns]));
    assert.equal(res.status, 200, res.text);
    assert.deepEqual(
      res.body.results.map((r: Obj) => [r.kind, r.action, r.namespace]),
      [
        ['Widget', 'created', nsSvc],
        ['CustomResourceDefinition', 'created', null],
        ['Namespace', 'created', null],
      ],
      res.text,
    );
    assert.equal((await live(`/apis/${group}/v1/namespaces/${nsSvc}/widgets/w1`)).spec.size, 3);

    const list = await apply({ apiVersion: 'v1', kind: 'List', items: [{ ...widget, spec: { size: 4 } }] });
    assert.deepEqual(
      list.body.results.map((r: Obj) => r.action),
      ['configured'],
      list.text,
    );
    await kubeRequest(cp, 'DELETE', `/api/v1/namespaces/apply-ns-${pid}`);
  });

  test('a user whose rules allow one namespace gets error 403 for documents outside it; the others apply', async () => {
    const role = await request(t.app, 'POST', '/api/v1/admin/roles', {
      token: admin,
      body: {
        name: `apply-dev-${pid}`,
        rules: [
          { clusters: ['alpha'], namespaces: [nsSvc], resources: ['configmaps'], verbs: ['get', 'create', 'patch'] },
        ],
      },
    });
    assert.equal(role.status, 201, role.text);
    const dev = await login(t, await createUser(t, { role: `apply-dev-${pid}` as never }));
    const cm = (name: string, namespace: string) => ({
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name, namespace },
      data: { a: '1' },
    });
    const res = await applyAs(dev, yamlStream([cm('mine', nsSvc), cm('theirs', nsOther), cm('mine-too', nsSvc)]));
    assert.equal(res.status, 200, res.text);
    assert.deepEqual(
      res.body.results.map((r: Obj) => r.action),
      ['created', 'error', 'created'],
    );
    assert.equal(res.body.results[1].status.code, 403);
    assert.equal(res.body.results[1].status.reason, 'Forbidden');
    assert.match(res.body.results[1].status.message, new RegExp(`namespace '${nsOther}'`));
    assert.equal((await kubeRequest(cp, 'GET', `/api/v1/namespaces/${nsOther}/configmaps/theirs`)).status, 404);

    // A viewer may not apply at all.
    const viewer = await login(t, await createUser(t, { role: 'viewer' }));
    assert.equal((await applyAs(viewer, cm('x', nsSvc))).status, 403);
  });

  test('on an impersonating cluster each document is read and applied as the person, and its RBAC decides too', async () => {
    const username = `apply-imp-${pid}`;
    const registered = await request(t.app, 'POST', '/api/v1/admin/clusters', {
      token: admin,
      body: { name: 'imp', config: kubeconfigFor(cp), impersonate: true },
    });
    assert.equal(registered.status, 201, registered.text);
    const role = await request(t.app, 'POST', '/api/v1/admin/roles', {
      token: admin,
      body: {
        name: `apply-imp-${pid}`,
        rules: [
          { clusters: ['imp'], namespaces: [nsSvc], resources: ['configmaps'], verbs: ['get', 'create', 'patch'] },
        ],
      },
    });
    assert.equal(role.status, 201, role.text);
    const person = await login(t, await createUser(t, { username, role: `apply-imp-${pid}` as never }));
    const applyImp = (name: string) =>
      request(t.app, 'POST', '/api/v1/apply', {
        token: person,
        headers: { 'x-cluster-name': 'imp', 'content-type': 'application/yaml' },
        rawBody: stringify({
          apiVersion: 'v1',
          kind: 'ConfigMap',
          metadata: { name, namespace: nsSvc },
          data: { a: '1' },
        }),
      });

    // The service's rules allow it; the cluster's RBAC does not yet: the cluster's own 403, as the person.
    const refused = await applyImp('as-person');
    assert.equal(refused.status, 200, refused.text);
    assert.equal(refused.body.results[0].action, 'error');
    assert.equal(refused.body.results[0].status.code, 403);
    assert.match(refused.body.results[0].status.message, new RegExp(`User "cas:${username}" cannot`));

    await kubeRequest(cp, 'POST', `/apis/rbac.authorization.k8s.io/v1/namespaces/${nsSvc}/roles`, {
      metadata: { name: 'cm-writer' },
      rules: [{ apiGroups: [''], resources: ['configmaps'], verbs: ['get', 'create', 'patch'] }],
    });
    await kubeRequest(cp, 'POST', `/apis/rbac.authorization.k8s.io/v1/namespaces/${nsSvc}/rolebindings`, {
      metadata: { name: 'cm-writer' },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'cm-writer' },
      subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: `cas:${username}` }],
    });
    const from = Date.now();
    const applied = await waitFor('RBAC to take effect', async () => {
      const res = await applyImp('as-person');
      return res.body.results[0].action === 'created' ? res : undefined;
    });
    assert.equal(applied.body.results[0].action, 'created');
    const asPerson = await waitFor('the apply in the apiserver audit log', async () => {
      const events = (await readAudit(cp)).filter(
        (e) =>
          e.verb === 'patch' &&
          e.objectRef?.namespace === nsSvc &&
          e.objectRef?.name === 'as-person' &&
          Date.parse(e.requestReceivedTimestamp) >= from - 1000,
      );
      return events.length ? events : undefined;
    });
    assert.ok(asPerson.every((e) => e.impersonatedUser?.username === `cas:${username}`));
    const object = await live(`/api/v1/namespaces/${nsSvc}/configmaps/as-person`);
    assert.equal(object.metadata.managedFields[0].manager, `cas:${username}`);
  });

  test('bad input: each a clear error for its document, or a 400/413 for the request; the others unaffected', async () => {
    const good = { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'good' }, data: { a: '1' } };
    const res = await apply(
      yamlStream([
        { apiVersion: 'example.com/v1', kind: 'Gizmo', metadata: { name: 'g' } },
        { apiVersion: 'v1', kind: 'ConfigMap', metadata: { labels: { a: 'b' } } },
        { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'elsewhere', namespace: nsOther } },
        { kind: 'ConfigMap', metadata: { name: 'no-version' } },
        good,
      ]),
      { namespace: nsSvc },
    );
    assert.equal(res.status, 200, res.text);
    const [gizmo, unnamed, mismatch, noVersion, ok] = res.body.results;
    assert.deepEqual([gizmo.action, gizmo.status.code], ['error', 404]);
    assert.match(gizmo.status.message, /does not serve kind 'Gizmo' in 'example.com\/v1'/);
    assert.deepEqual([unnamed.action, unnamed.status.code], ['error', 400]);
    assert.match(unnamed.status.message, /document 2 \(line \d+\): metadata.name is required/);
    assert.deepEqual([mismatch.action, mismatch.status.code], ['error', 400]);
    assert.match(
      mismatch.status.message,
      new RegExp(`metadata.namespace '${nsOther}' differs from the request's namespace '${nsSvc}'`),
    );
    assert.deepEqual([noVersion.action, noVersion.status.code], ['error', 400]);
    assert.match(noVersion.status.message, /apiVersion and kind are required/);
    assert.equal(ok.action, 'created');
    assert.equal((await kubeRequest(cp, 'GET', `/api/v1/namespaces/${nsOther}/configmaps/elsewhere`)).status, 404);

    const invalid = await apply(
      'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n---\ndata: [unclosed\n  a: b\n',
    );
    assert.equal(invalid.status, 400);
    assert.match(invalid.body.message.join(), /body is not valid YAML: .* at line [67]/);

    const tooMany = yamlStream(Array.from({ length: 501 }, (_, i) => ({ ...good, metadata: { name: `c${i}` } })));
    const many = await apply(tooMany, { namespace: nsSvc });
    assert.equal(many.status, 400);
    assert.match(many.body.message.join(), /501 documents: at most 500 per request/);
    assert.equal(
      (await kubeRequest(cp, 'GET', `/api/v1/namespaces/${nsSvc}/configmaps/c0`)).status,
      404,
      'nothing applied',
    );

    const huge = await apply(`# ${'x'.repeat(10 * 1024 * 1024)}\n${stringify(good)}`);
    assert.equal(huge.status, 413);

    // Hostile YAML is refused fast, naming the line: deep nesting, compact sequences, an alias bomb.
    const laughs = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]'];
    for (let i = 0; i < 8; i++)
      laughs.push(`${'bcdefghi'[i]}: &${'bcdefghi'[i]} [${Array(9).fill(`*${'abcdefgh'[i]}`).join(',')}]`);
    for (const [hostile, message] of [
      [
        `apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata: ${'['.repeat(100)}`,
        /nests \[ or \{ deeper than 64 levels at line 4/,
      ],
      [`a:\n${'- '.repeat(200)}x\n`, /indented deeper than 256 columns at line 2/],
      [laughs.join('\n'), /too many aliases/],
      // A value that contains itself (it was a 500: it cannot become JSON).
      ['apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata: &d\n  a: [*d]\n', /contain itself\) at line 5/],
    ] as const) {
      const refused = await apply(hostile);
      assert.equal(refused.status, 400, refused.text);
      assert.match(refused.body.message.join(), message);
    }
  });

  test('request-level refusals: no credentials, no or unknown cluster, a bad query, an unknown media type', async () => {
    const doc = `apiVersion: v1\nkind: ConfigMap\nmetadata: {name: refused-${pid}, namespace: ${nsSvc}}\n`;
    const send = (headers: Record<string, string>, query: Record<string, string> = {}, token: string | null = admin) =>
      request(t.app, 'POST', '/api/v1/apply', {
        token: token ?? undefined,
        headers: { 'content-type': 'application/yaml', ...headers },
        rawBody: doc,
        query,
      });
    assert.equal((await send({ 'x-cluster-name': 'alpha' }, {}, null)).status, 401);
    const noCluster = await send({});
    assert.equal(noCluster.status, 400);
    assert.match(noCluster.body.message.join(), /x-cluster-name header is required/);
    const nowhere = await send({ 'x-cluster-name': 'nowhere' });
    assert.equal(nowhere.status, 404, nowhere.text);
    const badQuery = await send({ 'x-cluster-name': 'alpha' }, { dryRun: 'yes', colour: 'red' });
    assert.equal(badQuery.status, 400);
    assert.match(badQuery.body.message.join(), /dryRun/);
    assert.match(badQuery.body.message.join(), /colour/);
    assert.equal((await send({ 'x-cluster-name': 'alpha', 'content-type': 'text/plain' })).status, 415);
    assert.equal((await kubeRequest(cp, 'GET', `/api/v1/namespaces/${nsSvc}/configmaps/refused-${pid}`)).status, 404);
  });

  test('PATCH with patchType=apply: server-side apply as cas:<username>, the 409 conflict passes through, force', async () => {
    const path = `/api/v1/configmaps/${nsSvc}/patched`;
    const headers = { 'x-cluster-name': 'alpha', 'content-type': 'application/apply-patch+yaml' };
    const yaml = (mode: string) =>
      `apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: patched\ndata:\n  mode: ${mode}\n`;
    const created = await request(t.app, 'PATCH', path, { token: admin, headers, rawBody: yaml('a') });
    assert.equal(created.status, 201, created.text);
    const me = await request(t.app, 'GET', '/api/v1/auth/me', { token: admin });
    assert.equal(created.body.metadata.managedFields[0].manager, `cas:${me.body.user.username}`);

    const other = await request(t.app, 'PATCH', path, {
      token: admin,
      headers: { 'x-cluster-name': 'alpha', 'content-type': 'application/json' },
      query: { patchType: 'apply', fieldManager: 'other' },
      body: { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'patched' }, data: { mode: 'b' } },
    });
    assert.equal(other.status, 409, other.text);
    assert.equal(other.body.kind, 'Status');
    assert.equal(other.body.reason, 'Conflict');
    assert.match(other.body.message, /conflict with "cas:/);

    const forced = await request(t.app, 'PATCH', path, {
      token: admin,
      headers,
      query: { fieldManager: 'other', force: 'true' },
      rawBody: yaml('b'),
    });
    assert.equal(forced.status, 200, forced.text);
    assert.equal(forced.body.data.mode, 'b');

    const notApply = await request(t.app, 'PATCH', path, {
      token: admin,
      headers: { 'x-cluster-name': 'alpha' },
      query: { force: 'true' },
      body: { data: { mode: 'c' } },
    });
    assert.equal(notApply.status, 400);
    assert.match(notApply.body.message.join(), /force needs patchType=apply/);
  });

  test('Secrets: values never appear in a response or an audit row (raw or base64); one audit row per document', async () => {
    const raw = `s3cr3t-${pid}-value`;
    const raw2 = `t0ken-${pid}-other`;
    const b64 = (s: string) => Buffer.from(s).toString('base64');
    const secret = (value: string, token: string) => ({
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: 'creds', namespace: nsSvc },
      stringData: { password: value },
      data: { token: b64(token) },
    });
    const cm = {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: 'beside', namespace: nsSvc },
      data: { a: '1' },
    };
    const created = await apply(yamlStream([secret(raw, raw2), cm]));
    assert.deepEqual(
      created.body.results.map((r: Obj) => r.action),
      ['created', 'created'],
      created.text,
    );
    assert.match(created.body.results[0].diff, /password: "\*\*\*"|password: \*\*\*/);
    const changed = await apply(yamlStream([secret(`${raw}-2`, raw2), cm]), { dryRun: 'All' });
    assert.equal(changed.body.results[0].action, 'configured');
    assert.match(changed.body.results[0].diff, /\*\*\* \(changed\)/);
    await apply(yamlStream([secret(`${raw}-2`, raw2)]));
    // A conflict on a Secret, and an invalid one.
    await apply(yamlStream([secret(raw, raw2)]), { fieldManager: 'someone-else' });
    await apply(yamlStream([{ ...secret(raw, raw2), data: { token: `not base64 ${raw2}!` } }]));

    await t.app.get(AuditService).flush();
    const rows = (await t.dataSource.query('SELECT * FROM audit_events')) as Obj[];
    const dump = JSON.stringify(rows);
    const searched = [...responses, dump].join('\n');
    for (const value of [raw, `${raw}-2`, raw2, b64(raw), b64(`${raw}-2`), b64(raw2)]) {
      assert.ok(!searched.includes(value), `found ${value}`);
    }
    // One row per document of the first request: the Secret and the ConfigMap, each with its status.
    const first = rows.filter(
      (r) => r.operation === 'applyResources' && r.request_id === created.headers['x-request-id'],
    );
    assert.deepEqual(first.map((r) => [r.resource, r.namespace, r.name, r.status_code, r.cluster]).sort(), [
      ['configmaps', nsSvc, 'beside', 201, 'alpha'],
      ['secrets', nsSvc, 'creds', 201, 'alpha'],
    ]);
  });

  test('Secrets are known by their type: values that are not strings never reach the cluster, however apiVersion is written', async () => {
    const pin = 98765432123;
    const nested = `nested-${pid}-value`;
    const plain = `slash-${pid}-secret`;
    const secret = (name: string, apiVersion: string, stringData: unknown) => ({
      apiVersion,
      kind: 'Secret',
      metadata: { name },
      stringData,
    });
    const res = await apply(
      yamlStream([
        secret('pin', 'v1', { pin }),
        secret('nested', 'v1', { pin: { a: nested } }),
        secret('slash-pin', '/v1', { pin }),
        { ...secret('whole', 'v1', undefined), data: `whole-${pid}-value` },
        secret('slash-ok', '/v1', { password: plain }),
      ]),
      { namespace: nsSvc, dryRun: 'All' },
    );
    assert.equal(res.status, 200, res.text);
    assert.deepEqual(
      res.body.results.map((r: Obj) => [r.action, r.status?.code ?? null]),
      [
        ['error', 400],
        ['error', 400],
        ['error', 400],
        ['error', 400],
        ['created', null],
      ],
      res.text,
    );
    assert.match(res.body.results[0].status.message, /^document 1 \(line 1\): stringData.pin must be a string/);
    assert.match(res.body.results[2].status.message, /stringData.pin must be a string/);
    assert.match(res.body.results[3].status.message, /data must be a mapping of keys to strings/);
    // The cluster takes `/v1` as a core Secret (the dry run creates it), and its value is hidden as any Secret's.
    assert.match(res.body.results[4].diff, /password: "?\*\*\*"?/);
    for (const value of [String(pin), nested, plain, `whole-${pid}-value`]) {
      assert.ok(!res.text.includes(value), `found ${value}`);
    }
  });

  test('a document over 3 MiB as JSON is an error 413 and is not sent; a large one within it gets its diff', async () => {
    const cm = (name: string, data: Record<string, string>) => ({
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name, namespace: nsSvc },
      data,
    });
    const keys = (n: number, value: string) =>
      Object.fromEntries(Array.from({ length: n }, (_, i) => [`k${i}`, `${value}-${i}`]));
    const res = await apply([cm('huge', { big: 'x'.repeat(3.5 * 1024 * 1024) }), cm('large', keys(4000, 'a'))], {
      dryRun: 'All',
    });
    assert.equal(res.status, 200, res.text.slice(0, 500));
    const [huge, large] = res.body.results;
    assert.deepEqual([huge.action, huge.status.code, huge.status.reason], ['error', 413, 'RequestEntityTooLarge']);
    assert.match(
      huge.status.message,
      /^document 1 is larger than 3 MiB as JSON, the most an API server takes in one write$/,
    );
    // Over 64 KiB: diffed on a thread, the same diff as inline.
    assert.equal(large.action, 'created');
    assert.match(large.diff, /^\+ {2}k3999: a-3999$/m);
  });

  test("fieldManager: a caller writes as its own cas: manager or one of its choosing, never as another user's (403)", async () => {
    await request(t.app, 'POST', '/api/v1/admin/roles', {
      token: admin,
      body: {
        name: `apply-fm-${pid}`,
        rules: [{ clusters: ['alpha'], namespaces: [nsSvc], resources: ['configmaps'], verbs: ['*'] }],
      },
    });
    const user = await createUser(t, { role: `apply-fm-${pid}` as never });
    const dev = await login(t, user);
    const headers = { 'x-cluster-name': 'alpha' };
    const cm = (name: string) => ({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name }, data: { a: '1' } });
    const attempts = (manager: string) => [
      applyAs(dev, [cm('fm-apply')], { namespace: nsSvc, fieldManager: manager }),
      request(t.app, 'PATCH', `/api/v1/configmaps/${nsSvc}/fm-patch`, {
        token: dev,
        headers,
        query: { patchType: 'apply', fieldManager: manager },
        body: cm('fm-patch'),
      }),
      request(t.app, 'POST', `/api/v1/configmaps/${nsSvc}`, {
        token: dev,
        headers,
        query: { fieldManager: manager },
        body: cm('fm-create'),
      }),
      request(t.app, 'PUT', `/api/v1/configmaps/${nsSvc}/fm-create`, {
        token: dev,
        headers,
        query: { fieldManager: manager },
        body: { ...cm('fm-create'), metadata: { name: 'fm-create', resourceVersion: '1' } },
      }),
      request(t.app, 'PATCH', `/api/v1/configmaps/${nsSvc}/fm-create`, {
        token: dev,
        headers,
        query: { patchType: 'merge', fieldManager: manager },
        body: { data: { b: '2' } },
      }),
    ];
    for (const manager of ['cas:admin', `cas:key:deployer-${pid}`, 'CAS:someone']) {
      for (const res of await Promise.all(attempts(manager))) {
        assert.equal(res.status, 403, res.text);
        assert.match(res.body.message, new RegExp(`fieldManager '${manager}' is not yours.*'cas:${user.username}'`));
      }
    }
    for (const name of ['fm-apply', 'fm-patch', 'fm-create']) {
      assert.equal((await kubeRequest(cp, 'GET', `/api/v1/namespaces/${nsSvc}/configmaps/${name}`)).status, 404);
    }
    // Its own, and a manager without the prefix, are accepted.
    const own = await applyAs(dev, [cm('fm-apply')], { namespace: nsSvc, fieldManager: `cas:${user.username}` });
    assert.equal(own.body.results[0].action, 'created', own.text);
    const chosen = await applyAs(dev, [{ ...cm('fm-apply'), data: { a: '1', c: '3' } }], {
      namespace: nsSvc,
      fieldManager: 'ci-pipeline',
    });
    assert.equal(chosen.body.results[0].action, 'configured', chosen.text);
    const managed = (await live(`/api/v1/namespaces/${nsSvc}/configmaps/fm-apply`)).metadata.managedFields;
    assert.deepEqual(managed.map((m: Obj) => m.manager).sort(), ['ci-pipeline', `cas:${user.username}`].sort());
  });

  test('a caller who may only create (or only patch) gets the cluster’s answer on the object as it is when written', async () => {
    await request(t.app, 'POST', '/api/v1/admin/roles', {
      token: admin,
      body: {
        name: `apply-create-only-${pid}`,
        rules: [{ clusters: ['alpha'], namespaces: [nsSvc], resources: ['configmaps'], verbs: ['get', 'create'] }],
      },
    });
    await request(t.app, 'POST', '/api/v1/admin/roles', {
      token: admin,
      body: {
        name: `apply-patch-only-${pid}`,
        rules: [{ clusters: ['alpha'], namespaces: [nsSvc], resources: ['configmaps'], verbs: ['get', 'patch'] }],
      },
    });
    const creator = await login(t, await createUser(t, { role: `apply-create-only-${pid}` as never }));
    const patcher = await login(t, await createUser(t, { role: `apply-patch-only-${pid}` as never }));
    const cm = (name: string, value: string) => ({
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name, namespace: nsSvc },
      data: { owner: value },
    });
    const path = (name: string) => `/api/v1/namespaces/${nsSvc}/configmaps/${name}`;
    // Another actor changes the object right after the service has read it (the read answers first).
    const gateway = t.app.get(ClusterGateway);
    const clientFor = gateway.clientFor.bind(gateway);
    let afterRead: Record<string, () => Promise<unknown>> = {};
    gateway.clientFor = async (caller, name) => {
      const client = await clientFor(caller, name);
      const send = client.send.bind(client);
      client.send = async (call) => {
        const answer = await send(call);
        const act = call.method === 'GET' ? afterRead[call.path] : undefined;
        delete afterRead[call.path];
        if (act) await act();
        return answer;
      };
      return client;
    };
    try {
      // Created by someone else between the read (absent) and the write: a create-only caller may not patch it.
      for (const [name, query] of [
        ['raced-dry', { dryRun: 'All' }],
        ['raced-forced', { force: 'true' }],
        ['raced', {}],
      ] as Array<[string, Record<string, string>]>) {
        // The other actor's fields do not overlap the document's: nothing but the rules stands in the way.
        const theirs = { ...cm(name, ''), data: { other: 'x' } };
        afterRead = { [path(name)]: () => kubeRequest(cp, 'POST', path(name).replace(/\/[^/]+$/, ''), theirs) };
        const raced = await applyAs(creator, [cm(name, 'creator')], query);
        const [result] = raced.body.results;
        assert.equal(result.action, 'error', raced.text);
        assert.equal(result.status.code, 409);
        assert.match(
          result.status.message,
          new RegExp(
            `configmaps '${name}' exists: it was created after it was read, and your roles allow create but not patch`,
          ),
        );
      }
      const kept = await live(path('raced'));
      assert.deepEqual(kept.data, { other: 'x' });
      assert.ok(
        !kept.metadata.managedFields.some((m: Obj) => m.manager.startsWith('cas:')),
        'the creator owns nothing',
      );

      // Deleted between the read (present) and the write: a patch-only caller may not create it again.
      await kubeRequest(cp, 'POST', path('gone').replace(/\/[^/]+$/, ''), cm('gone', 'other'));
      afterRead = { [path('gone')]: () => kubeRequest(cp, 'DELETE', path('gone')) };
      const gone = await applyAs(patcher, [cm('gone', 'patcher')]);
      assert.equal(gone.body.results[0].action, 'error', gone.text);
      assert.equal(gone.body.results[0].status.code, 409);
      assert.match(gone.body.results[0].status.message, /configmaps 'gone' no longer exists as it was read/);
      assert.equal((await kubeRequest(cp, 'GET', path('gone'))).status, 404, 'not created again');

      // Without a race each does what its rules allow.
      afterRead = {};
      assert.equal((await applyAs(creator, [cm('fresh', 'creator')])).body.results[0].action, 'created');
      const again = await applyAs(creator, [cm('fresh', 'changed')]);
      assert.deepEqual([again.body.results[0].action, again.body.results[0].status.code], ['error', 403]);
      const patched = await applyAs(patcher, [
        { ...cm('fresh', 'creator'), data: { owner: 'creator', by: 'patcher' } },
      ]);
      assert.equal(patched.body.results[0].action, 'configured', patched.text);
      assert.deepEqual((await live(path('fresh'))).data, { owner: 'creator', by: 'patcher' });
    } finally {
      gateway.clientFor = clientFor;
    }
  });

  test('re-applying an unchanged Namespace is unchanged, though the apiserver records its earlier fields', async () => {
    const name = `apply-plain-${pid}`;
    const ns = { apiVersion: 'v1', kind: 'Namespace', metadata: { name } };
    try {
      const actions: string[] = [];
      const diffs: string[] = [];
      for (const query of [{}, { dryRun: 'All' }, {}, {}] as Array<Record<string, string>>) {
        const res = await apply([ns], query);
        actions.push(res.body.results[0].action);
        diffs.push(res.body.results[0].diff);
      }
      // The second real apply is a write of the apiserver's own (managedFields gets `before-first-apply`,
      // as with kubectl): nothing the document sets changed.
      assert.deepEqual(actions, ['created', 'unchanged', 'unchanged', 'unchanged']);
      assert.deepEqual(diffs.slice(1), ['', '', '']);
      const managers = (await live(`/api/v1/namespaces/${name}`)).metadata.managedFields.map((m: Obj) => m.manager);
      assert.deepEqual(managers, ['before-first-apply']);
      const labelled = await apply([{ ...ns, metadata: { name, labels: { team: 'shop' } } }]);
      assert.equal(labelled.body.results[0].action, 'configured');
      assert.match(labelled.body.results[0].diff, /^\+ {4}team: shop$/m);
    } finally {
      await kubeRequest(cp, 'DELETE', `/api/v1/namespaces/${name}`);
    }
  });
});
