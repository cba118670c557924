// Issue 30: Debian's kubectl 1.20 with a kubeconfig from POST /api/v1/auth/kubeconfig, against the service
// over TLS (a test CA), as an admin and as a scoped user. Outputs are compared with the same command run
// against the cluster directly; refusals are the service's, as kubectl prints the apiserver's own.
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { readFile, writeFile } from 'node:fs/promises';
import https from 'node:https';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { parse } from 'yaml';
import { kubeBinDir } from '../harness/binaries.js';
import { kubeRequest, waitFor, type ControlPlane } from '../harness/control-plane.js';
import type { TestApp } from '../support/app.js';
import { createUser, login } from '../support/factories.js';
import { request } from '../support/http.js';
import { startKubeApiApp, type KubeApiApp } from '../support/kube-api.js';

const KUBECTL = process.env.KUBECTL_BIN || join(kubeBinDir(), 'kubectl');

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs kubectl with a kubeconfig and a HOME of its own (no discovery cache shared with other runs). */
function kubectl(
  kubeconfig: string,
  home: string,
  args: string[],
  options: { input?: string; timeoutMs?: number } = {},
) {
  return new Promise<Run>((resolve) => {
    const child = execFile(
      KUBECTL,
      ['--kubeconfig', kubeconfig, ...args],
      { env: { ...process.env, HOME: home, KUBECONFIG: '' }, timeout: options.timeoutMs ?? 30_000 },
      (error, stdout, stderr) => {
        const code = error ? (typeof error.code === 'number' ? error.code : -1) : 0;
        resolve({ code, stdout: String(stdout), stderr: String(stderr) });
      },
    );
    if (options.input !== undefined) child.stdin!.end(options.input);
  });
}

/** The table without its AGE column (two runs a moment apart may differ there). */
const withoutAge = (table: string) =>
  table
    .trim()
    .split('\n')
    .map((line) => line.replace(/\s+\S+$/, '').trimEnd())
    .join('\n');

describe('kubectl through the service (over TLS, with a generated kubeconfig)', () => {
  const ns = `kubectl-${process.pid}`;
  let cp: ControlPlane;
  let t: TestApp;
  let app: KubeApiApp;
  let dir: string;
  let home: string;
  let direct: string;
  let asAdmin: string;
  let asDev: string;
  let adminToken: string;
  let devToken: string;

  const svc = (args: string[], options?: Parameters<typeof kubectl>[3]) => kubectl(asAdmin, home, args, options);
  const dev = (args: string[], options?: Parameters<typeof kubectl>[3]) => kubectl(asDev, home, args, options);
  const cluster = (args: string[], options?: Parameters<typeof kubectl>[3]) => kubectl(direct, home, args, options);
  /** A request to the service with the scoped user's kubeconfig credentials (what client-go sends for calls kubectl has no command for). */
  const devRaw = async (method: string, path: string): Promise<{ status: number; body: string }> => {
    const config = parse(await readFile(asDev, 'utf8'));
    const server = new URL(`${config.clusters[0].cluster.server}${path}`);
    return new Promise((resolve, reject) => {
      const req = https.request(
        server,
        {
          method,
          ca: Buffer.from(config.clusters[0].cluster['certificate-authority-data'], 'base64'),
          headers: { authorization: `Bearer ${config.users[0].user.token}`, accept: 'application/json' },
        },
        (res) => {
          let body = '';
          res.on('data', (c: Buffer) => (body += c.toString()));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
        },
      );
      req.on('error', reject);
      req.end();
    });
  };
  const ok = (run: Run, what: string) => assert.equal(run.code, 0, `${what}: ${run.stderr}`);

  before(async () => {
    app = await startKubeApiApp({ cluster: 'alpha', namespace: ns });
    ({ cp, t, dir, adminToken } = app);
    home = join(dir, 'home');
    const role = await request(t.app, 'POST', '/api/v1/admin/roles', {
      token: adminToken,
      body: {
        name: 'kube-dev',
        rules: [
          {
            clusters: ['alpha'],
            namespaces: [ns],
            resources: ['configmaps', 'deployments.apps', 'pods', 'events'],
            verbs: ['get', 'list', 'watch', 'create', 'update', 'patch', 'delete', 'log'],
          },
        ],
      },
    });
    assert.equal(role.status, 201, role.text);
    devToken = await login(t, await createUser(t, { role: 'kube-dev' as never }));
    asAdmin = join(dir, 'admin.yaml');
    asDev = join(dir, 'dev.yaml');
    direct = cp.kubeconfigPath;
    await writeFile(asAdmin, await app.mint(adminToken));
    await writeFile(asDev, await app.mint(devToken));
  });
  after(() => app?.close());

  test('version and api-resources print what they print against the cluster', async () => {
    const [through, straight] = await Promise.all([svc(['version', '-o', 'json']), cluster(['version', '-o', 'json'])]);
    ok(through, 'version');
    assert.deepEqual(JSON.parse(through.stdout).serverVersion, JSON.parse(straight.stdout).serverVersion);
    const [resources, direct] = await Promise.all([svc(['api-resources']), cluster(['api-resources'])]);
    ok(resources, 'api-resources');
    assert.equal(resources.stdout, direct.stdout);
    assert.match(resources.stdout, /deployments\s+deploy\s+apps\/v1\s+true\s+Deployment/);
  });

  test('create, get (-o yaml, -o wide, -l, -A), describe: as against the cluster', async () => {
    const manifest = `apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: ${ns}\n  labels: {app: shop}\ndata:\n  mode: fast\n`;
    ok(await svc(['create', '-f', '-'], { input: manifest }), 'create');
    const yaml = await svc(['get', 'cm', 'settings', '-n', ns, '-o', 'yaml']);
    ok(yaml, 'get -o yaml');
    assert.equal(yaml.stdout, (await cluster(['get', 'cm', 'settings', '-n', ns, '-o', 'yaml'])).stdout);
    assert.equal(parse(yaml.stdout).data.mode, 'fast');
    const wide = await svc(['get', 'cm', '-n', ns, '-o', 'wide']);
    assert.equal(withoutAge(wide.stdout), withoutAge((await cluster(['get', 'cm', '-n', ns, '-o', 'wide'])).stdout));
    const labelled = await svc(['get', 'cm', '-n', ns, '-l', 'app=shop', '-o', 'name']);
    assert.equal(labelled.stdout.trim(), 'configmap/settings');
    const none = await svc(['get', 'cm', '-n', ns, '-l', 'app=other', '-o', 'name']);
    assert.equal(none.stdout.trim(), '');
    // Every namespace, of a cluster other tests write to at the same time: narrowed by this test's label,
    // and tried a few times, so that the two listings see the same objects.
    let all: Run | undefined;
    let direct: Run | undefined;
    for (let attempt = 0; attempt < 5 && (!all || all.stdout !== direct!.stdout); attempt++) {
      all = await svc(['get', 'cm', '-A', '-l', 'app=shop', '-o', 'name']);
      ok(all, 'get -A');
      direct = await cluster(['get', 'cm', '-A', '-l', 'app=shop', '-o', 'name']);
    }
    assert.equal(all!.stdout, direct!.stdout);
    assert.match(all!.stdout, /^configmap\/settings$/m);
    const described = await svc(['describe', 'cm', 'settings', '-n', ns]);
    ok(described, 'describe');
    assert.equal(described.stdout, (await cluster(['describe', 'cm', 'settings', '-n', ns])).stdout);
  });

  test('apply (client-side and --server-side), diff, patch (three kinds), label, annotate', async () => {
    const manifest = (value: string) =>
      `apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: applied\n  namespace: ${ns}\ndata:\n  key: ${value}\n`;
    ok(await svc(['apply', '-f', '-'], { input: manifest('one') }), 'apply');
    const diff = await svc(['diff', '-f', '-'], { input: manifest('two') });
    assert.equal(diff.code, 1, `diff finds a difference: ${diff.stderr}`);
    assert.match(diff.stdout, /-\s+key: one\n\+\s+key: two/);
    assert.equal((await svc(['diff', '-f', '-'], { input: manifest('one') })).code, 0, 'no difference');
    ok(await svc(['apply', '-f', '-'], { input: manifest('two') }), 'apply again');
    ok(
      await svc(['apply', '--server-side', '--force-conflicts', '-f', '-'], { input: manifest('three') }),
      'server-side',
    );
    const get = async () => (await kubeRequest(cp, 'GET', `/api/v1/namespaces/${ns}/configmaps/applied`)).body;
    assert.equal((await get()).data.key, 'three');
    ok(await svc(['patch', 'cm', 'applied', '-n', ns, '-p', '{"data":{"s":"1"}}']), 'strategic patch');
    ok(await svc(['patch', 'cm', 'applied', '-n', ns, '--type=merge', '-p', '{"data":{"m":"2"}}']), 'merge patch');
    ok(
      await svc([
        'patch',
        'cm',
        'applied',
        '-n',
        ns,
        '--type=json',
        '-p',
        '[{"op":"add","path":"/data/j","value":"3"}]',
      ]),
      'json patch',
    );
    ok(await svc(['label', 'cm', 'applied', '-n', ns, 'tier=web']), 'label');
    ok(await svc(['annotate', 'cm', 'applied', '-n', ns, 'note=hello']), 'annotate');
    const object = await get();
    assert.deepEqual({ s: object.data.s, m: object.data.m, j: object.data.j }, { s: '1', m: '2', j: '3' });
    assert.equal(object.metadata.labels.tier, 'web');
    assert.equal(object.metadata.annotations.note, 'hello');
    const managers = (object.metadata.managedFields as Array<{ manager: string }>).map((f) => f.manager);
    assert.ok(managers.includes('kubectl'), `server-side apply recorded kubectl as a field manager: ${managers}`);
  });

  test('apply --server-side passes through unchanged: output, managedFields and conflicts as against the cluster', async () => {
    const manifest = (name: string, value: string) =>
      `apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ${name}\n  namespace: ${ns}\ndata:\n  key: ${value}\n  other: x\n`;
    const both = async (args: string[], value: string) => {
      const through = await svc([...args, '-f', '-'], { input: manifest('ssa-svc', value) });
      const straight = await cluster([...args, '-f', '-'], { input: manifest('ssa-direct', value) });
      return { through, straight, same: (text: string) => text.replaceAll('ssa-svc', 'ssa-direct') };
    };
    const managed = async (name: string) =>
      (
        (await kubeRequest(cp, 'GET', `/api/v1/namespaces/${ns}/configmaps/${name}`)).body.metadata
          .managedFields as Array<Record<string, unknown>>
      ).map(({ time: _time, ...entry }) => entry);

    for (const [args, value] of [
      [['apply', '--server-side'], 'one'],
      [['apply', '--server-side', '--field-manager=tool'], 'one'],
    ] as const) {
      const { through, straight, same } = await both([...args], value);
      ok(through, args.join(' '));
      assert.equal(same(through.stdout), straight.stdout);
    }
    assert.deepEqual(await managed('ssa-svc'), await managed('ssa-direct'));

    // A second manager setting a field the first owns: the same conflict report, the same exit code.
    const conflict = await both(['apply', '--server-side', '--field-manager=tool'], 'two');
    assert.notEqual(conflict.through.code, 0);
    assert.equal(conflict.through.code, conflict.straight.code);
    assert.equal(conflict.same(conflict.through.stderr), conflict.straight.stderr);
    assert.match(conflict.through.stderr, /Apply failed with 1 conflict: conflict with "kubectl": \.data\.key/);
    const forced = await both(['apply', '--server-side', '--field-manager=tool', '--force-conflicts'], 'two');
    ok(forced.through, 'forced');
    assert.deepEqual(await managed('ssa-svc'), await managed('ssa-direct'));

    // The scoped user applies in its namespace, and is refused elsewhere with the service's reason.
    ok(await dev(['apply', '--server-side', '-f', '-'], { input: manifest('ssa-dev', 'one') }), 'dev applies');
    const refused = await dev(['apply', '--server-side', '-f', '-'], {
      input: manifest('ssa-dev', 'one').replace(`namespace: ${ns}`, 'namespace: kube-system'),
    });
    assert.notEqual(refused.code, 0);
    assert.match(refused.stderr, /forbidden/i);
  });

  test('scale uses the scale subresource; delete --all and a deletecollection; writes and refusals are audited', async () => {
    const deployment = {
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: { name: 'web', namespace: ns },
      spec: {
        replicas: 1,
        selector: { matchLabels: { app: 'web' } },
        template: {
          metadata: { labels: { app: 'web' } },
          spec: { containers: [{ name: 'web', image: 'example.invalid/web' }] },
        },
      },
    };
    ok(await svc(['apply', '-f', '-'], { input: JSON.stringify(deployment) }), 'apply deployment');
    ok(await dev(['scale', 'deployment/web', '-n', ns, '--replicas=3']), 'scale as the scoped user');
    const scaled = await kubeRequest(cp, 'GET', `/apis/apps/v1/namespaces/${ns}/deployments/web`);
    assert.equal(scaled.body.spec.replicas, 3);
    for (const name of ['x1', 'x2']) {
      ok(await svc(['create', 'configmap', name, '-n', ns, '--from-literal=a=b']), `create ${name}`);
      ok(await svc(['label', 'cm', name, '-n', ns, 'batch=yes']), `label ${name}`);
    }
    // kubectl deletes what --all lists one by one; a deletecollection is what client-go's DeleteCollection sends.
    const deleted = await dev(['delete', 'cm', '--all', '-n', ns]);
    ok(deleted, 'delete --all');
    assert.match(deleted.stdout, /configmap "x1" deleted\nconfigmap "x2" deleted/);
    for (const name of ['y1', 'y2']) {
      ok(await svc(['create', 'configmap', name, '-n', ns, '--from-literal=a=b']), `create ${name}`);
    }
    const collection = await devRaw(
      'DELETE',
      `/api/v1/namespaces/${ns}/configmaps?fieldSelector=metadata.name%21%3Dkube-root-ca.crt`,
    );
    assert.equal(collection.status, 200, collection.body);
    assert.match(collection.body, /"kind":"ConfigMapList"/);
    const left = (await kubeRequest(cp, 'GET', `/api/v1/namespaces/${ns}/configmaps`)).body.items.map(
      (c: any) => c.metadata.name as string,
    );
    assert.ok(!left.some((name: string) => /^[xy]\d$/.test(name)), `all deleted: ${left}`);
    const refused = await devRaw('DELETE', '/api/v1/namespaces/kube-system/configmaps');
    assert.equal(refused.status, 403);
    assert.equal(JSON.parse(refused.body).reason, 'Forbidden');
    await sleep(1500); // the audit rows are written after the responses
    const rows: Array<{ operation: string; resource: string; namespace: string; status_code: number }> =
      await t.dataSource.query(
        `SELECT operation, resource, namespace, status_code FROM audit_events WHERE cluster = 'alpha' AND operation IN ('kubernetesDeletecollection', 'kubernetesDelete', 'kubernetesPatch') ORDER BY id`,
      );
    const has = (operation: string, resource: string, namespace: string, status: number) =>
      rows.some(
        (r) =>
          r.operation === operation && r.resource === resource && r.namespace === namespace && r.status_code === status,
      );
    assert.ok(has('kubernetesDeletecollection', 'configmaps', ns, 200), JSON.stringify(rows));
    assert.ok(has('kubernetesDeletecollection', 'configmaps', 'kube-system', 403), 'the refusal is audited');
    assert.ok(has('kubernetesDelete', 'configmaps', ns, 200));
    assert.ok(has('kubernetesPatch', 'deployments.apps/scale', ns, 200));
  });

  test('get -w streams changes as they happen', async () => {
    const child = spawn(KUBECTL, ['--kubeconfig', asDev, 'get', 'cm', '-n', ns, '-w', '-o', 'name'], {
      env: { ...process.env, HOME: home, KUBECONFIG: '' },
    });
    let out = '';
    child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
    try {
      await sleep(1500);
      await kubeRequest(cp, 'POST', `/api/v1/namespaces/${ns}/configmaps`, { metadata: { name: 'watched' } });
      await waitFor('the watch to print the new config map', async () => out.includes('configmap/watched'), 15_000);
    } finally {
      child.kill();
    }
  });

  test('a scoped user is refused outside its namespaces with the service’s reason, and cannot impersonate', async () => {
    ok(await dev(['get', 'cm', '-n', ns]), 'inside its namespace');
    const outside = await dev(['get', 'cm', '-n', 'kube-system']);
    assert.equal(outside.code, 1);
    assert.match(
      outside.stderr,
      /Error from server \(Forbidden\): configmaps is forbidden: your roles do not allow list on configmaps in namespace 'kube-system' on cluster 'alpha'; they allow it in namespaces: kubectl-/,
    );
    const everywhere = await dev(['get', 'cm', '-A']);
    assert.match(
      everywhere.stderr,
      /Error from server \(Forbidden\): configmaps is forbidden: .*needs a role covering every namespace/,
    );
    const secrets = await dev(['get', 'secrets', '-n', ns]);
    assert.match(
      secrets.stderr,
      /Error from server \(Forbidden\): secrets is forbidden: your roles do not allow list on secrets/,
    );
    const as = await svc(['get', 'cm', '-n', ns, '--as', 'system:admin']);
    assert.match(as.stderr, /Error from server \(Forbidden\): .*impersonate-user header is not accepted/);
    const created = await dev(['create', 'deployment', 'nope', '-n', 'kube-system', '--image=x']);
    assert.match(
      created.stderr,
      /failed to create deployment: deployments.apps is forbidden: your roles do not allow create/,
    );
  });

  test('kubectl auth can-i agrees with POST /api/v1/auth/can-i (56 questions), and --list lists the rules', async () => {
    const verbs = ['get', 'list', 'watch', 'create', 'update', 'patch', 'delete'];
    const resources = ['configmaps', 'deployments.apps', 'secrets', 'pods'];
    const namespaces = [ns, 'kube-system'];
    const questions = verbs.flatMap((verb) =>
      resources.flatMap((resource) => namespaces.map((namespace) => ({ verb, resource, namespace }))),
    );
    assert.ok(questions.length >= 30);
    const disagreements: string[] = [];
    let yes = 0;
    for (const q of questions) {
      const [kube, service] = await Promise.all([
        dev(['auth', 'can-i', q.verb, q.resource, '-n', q.namespace]),
        request(t.app, 'POST', '/api/v1/auth/can-i', { token: devToken, body: { cluster: 'alpha', ...q } }),
      ]);
      const said = kube.stdout.trim().split('\n')[0];
      if (said === 'yes') yes++;
      if ((said === 'yes') !== service.body.allowed) {
        disagreements.push(
          `${q.verb} ${q.resource} -n ${q.namespace}: kubectl ${said}, service ${service.body.allowed}`,
        );
      }
    }
    assert.deepEqual(disagreements, []);
    assert.equal(yes, 7 * 3, 'every verb on the three granted resources in the granted namespace');
    const log = await dev(['auth', 'can-i', 'get', 'pods', '--subresource=log', '-n', ns]);
    assert.equal(log.stdout.trim(), 'yes');
    const list = await dev(['auth', 'can-i', '--list', '-n', ns]);
    ok(list, 'can-i --list');
    assert.match(
      list.stdout,
      /configmaps\s+\[\]\s+\[\]\s+\[get list watch create update patch delete deletecollection\]/,
    );
    assert.match(list.stdout, /deployments.apps\/scale/);
    const elsewhere = await dev(['auth', 'can-i', '--list', '-n', 'kube-system']);
    assert.doesNotMatch(elsewhere.stdout, /configmaps/);
  });

  test('an expired or revoked key: kubectl prints the service’s reason from a 401 Status', async () => {
    const expiring = join(dir, 'expiring.yaml');
    await writeFile(expiring, await app.mint(devToken, { expiresInSeconds: 1 }));
    const revoked = join(dir, 'revoked.yaml');
    await writeFile(revoked, await app.mint(devToken));
    const key = parse(await readFile(revoked, 'utf8')).users[0].user.token as string;
    const keys = await request(t.app, 'GET', '/api/v1/auth/apikeys', { token: devToken });
    const id = (keys.body as Array<{ id: number; prefix: string }>).find((k) => key.startsWith(k.prefix))!.id;
    assert.equal((await request(t.app, 'DELETE', `/api/v1/auth/apikeys/${id}`, { token: devToken })).status, 200);
    await sleep(1100);

    const late = await kubectl(expiring, home, ['get', 'cm', '-n', ns]);
    assert.equal(late.code, 1);
    assert.match(late.stderr, /error: You must be logged in to the server \(API key expired\)/);
    const gone = await kubectl(revoked, home, ['get', 'cm', '-n', ns]);
    assert.equal(gone.code, 1);
    assert.match(gone.stderr, /error: You must be logged in to the server \(invalid or expired credentials\)/);
  });
});
