// Debian's kubectl 1.20 through the Kubernetes path, where what kubectl is told must be what the path
// enforces: `auth can-i --list` for a role of `*` rules, and the field managers a caller may claim (a
// minted kubeconfig is an API key of its user: it writes as `cas:key:<its name>` or as `cas:<user>`).
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readFile, writeFile } from 'node:fs/promises';
import https from 'node:https';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { parse } from 'yaml';
import { kubeBinDir } from '../harness/binaries.js';
import { kubeRequest } from '../harness/control-plane.js';
import { createUser, login } from '../support/factories.js';
import { request } from '../support/http.js';
import { startKubeApiApp, type KubeApiApp } from '../support/kube-api.js';

const KUBECTL = process.env.KUBECTL_BIN || join(kubeBinDir(), 'kubectl');

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

/** One row of `kubectl auth can-i --list`: `Resources  Non-Resource URLs  Resource Names  Verbs`. */
interface Row {
  resource: string;
  verbs: string[];
}

function rowsOf(table: string): Row[] {
  return table
    .trim()
    .split('\n')
    .slice(1)
    .map((line) => {
      const verbs = /\[([^\]]*)\]\s*$/.exec(line)?.[1] ?? '';
      return { resource: line.trim().split(/\s+/)[0], verbs: verbs.split(' ').filter(Boolean) };
    })
    .filter((row) => !row.resource.startsWith('['));
}

describe('kubectl through the path: what it is told is what the path enforces', () => {
  const ns = `kubectl-rules-${process.pid}`;
  let app: KubeApiApp;
  let config: string;
  let username: string;
  let token: string;

  const kubectl = (args: string[], input?: string) =>
    new Promise<Run>((resolve) => {
      const child = execFile(
        KUBECTL,
        ['--kubeconfig', config, ...args],
        { env: { ...process.env, HOME: join(app.dir, 'home'), KUBECONFIG: '' }, timeout: 30_000 },
        (error, stdout, stderr) =>
          resolve({
            code: error ? (typeof error.code === 'number' ? error.code : -1) : 0,
            stdout: String(stdout),
            stderr: String(stderr),
          }),
      );
      if (input !== undefined) child.stdin!.end(input);
    });

  /** The path's SelfSubjectAccessReview, as `kubectl auth can-i` sends it. */
  const canI = async (attributes: Record<string, string>): Promise<boolean> => {
    const { clusters, users } = parse(await readFile(config, 'utf8'));
    const server = new URL(`${clusters[0].cluster.server}/apis/authorization.k8s.io/v1/selfsubjectaccessreviews`);
    const body = JSON.stringify({
      apiVersion: 'authorization.k8s.io/v1',
      kind: 'SelfSubjectAccessReview',
      spec: { resourceAttributes: attributes },
    });
    return new Promise((resolve, reject) => {
      const req = https.request(
        server,
        {
          method: 'POST',
          ca: Buffer.from(clusters[0].cluster['certificate-authority-data'], 'base64'),
          headers: { authorization: `Bearer ${users[0].user.token}`, 'content-type': 'application/json' },
        },
        (res) => {
          let text = '';
          res.on('data', (c: Buffer) => (text += c.toString()));
          res.on('end', () => resolve(JSON.parse(text).status.allowed === true));
        },
      );
      req.on('error', reject);
      req.end(body);
    });
  };

  before(async () => {
    app = await startKubeApiApp({ cluster: 'alpha', namespace: ns });
    const role = await request(app.t.app, 'POST', '/api/v1/admin/roles', {
      token: app.adminToken,
      body: {
        name: 'kube-wildcard',
        rules: [{ clusters: ['alpha'], namespaces: [ns], resources: ['*'], verbs: ['*'] }],
      },
    });
    assert.equal(role.status, 201, role.text);
    const user = await createUser(app.t, { role: 'kube-wildcard' as never });
    username = user.username;
    token = await login(app.t, user);
    config = join(app.dir, 'wildcard.yaml');
    await writeFile(config, await app.mint(token));
  });
  after(() => app?.close());

  test("auth can-i --list for a '*' role: the served types but Secrets, no terminal verb, no status write, no cluster-scoped type", async () => {
    const list = await kubectl(['auth', 'can-i', '--list', '-n', ns]);
    assert.equal(list.code, 0, list.stderr);
    const rows = rowsOf(list.stdout);
    const row = (resource: string) => rows.find((r) => r.resource === resource);
    const requestVerbs = ['get', 'list', 'watch', 'create', 'update', 'patch', 'delete', 'deletecollection'];
    assert.equal(row('*.*'), undefined, list.stdout);
    assert.deepEqual(row('configmaps')?.verbs, requestVerbs, list.stdout);
    assert.deepEqual(row('deployments.apps')?.verbs, requestVerbs);
    assert.deepEqual(row('deployments.apps/scale')?.verbs, ['get', 'update', 'patch']);
    assert.deepEqual(row('deployments.apps/status')?.verbs, ['get']);
    assert.deepEqual(row('pods/log')?.verbs, ['get']);
    for (const absent of ['secrets', 'pods/exec', 'pods/attach', 'pods/portforward', 'namespaces', 'nodes']) {
      assert.equal(row(absent), undefined, `${absent} listed: ${list.stdout}`);
    }
    // Every verb of every row is one the path's own access review allows (the mapping requests get).
    const refused: string[] = [];
    for (const { resource, verbs } of rows) {
      const [type, subresource = ''] = resource.split('/');
      const dot = type.indexOf('.');
      const [plural, group] = dot < 0 ? [type, ''] : [type.slice(0, dot), type.slice(dot + 1)];
      for (const verb of verbs) {
        if (!(await canI({ verb, group, resource: plural, subresource, namespace: ns }))) {
          refused.push(`${verb} ${resource}`);
        }
      }
    }
    assert.deepEqual(refused, []);
    assert.ok(rows.length > 20, `${rows.length} rows`);
    // And kubectl's own questions agree.
    const ask = async (...args: string[]) =>
      (await kubectl(['auth', 'can-i', ...args, '-n', ns])).stdout.trim().split(' ')[0];
    assert.equal(await ask('get', 'secrets'), 'no');
    assert.equal(await ask('create', 'pods', '--subresource=exec'), 'no');
    assert.equal(await ask('patch', 'deployments.apps', '--subresource=status'), 'no');
    assert.equal(await ask('delete', 'configmaps'), 'yes');
  });

  test('a field manager of another user is refused on the path (apply, create, patch, replace); its own is accepted', async () => {
    const cm = (name: string) =>
      `apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ${name}\n  namespace: ${ns}\ndata:\n  a: "1"\n`;
    const forged = 'cas:admin';
    const attempts: Array<[string, string[], string?]> = [
      ['apply', ['apply', '--server-side', `--field-manager=${forged}`, '-f', '-'], cm('fm-apply')],
      ['create', ['create', `--field-manager=${forged}`, '-f', '-'], cm('fm-create')],
    ];
    for (const [what, args, input] of attempts) {
      const run = await kubectl(args, input);
      assert.notEqual(run.code, 0, `${what}: ${run.stdout}`);
      assert.match(run.stderr, /Error from server \(Forbidden\).*fieldManager 'cas:admin' is not yours/, what);
      assert.equal((await kubeRequest(app.cp, 'GET', `/api/v1/namespaces/${ns}/configmaps/fm-${what}`)).status, 404);
    }
    const own = await kubectl(['apply', '--server-side', `--field-manager=cas:${username}`, '-f', '-'], cm('fm-own'));
    assert.equal(own.code, 0, own.stderr);
    for (const args of [
      ['patch', 'configmap', 'fm-own', '-n', ns, '--type=merge', '-p', '{"data":{"b":"2"}}'],
      ['label', 'configmap', 'fm-own', '-n', ns, 'x=y'],
    ]) {
      const run = await kubectl([...args, `--field-manager=cas:key:someone`]);
      assert.match(run.stderr, /Forbidden.*fieldManager 'cas:key:someone' is not yours/, args[0]);
    }
    const chosen = await kubectl(['label', 'configmap', 'fm-own', '-n', ns, 'x=y', '--field-manager=ci']);
    assert.equal(chosen.code, 0, chosen.stderr);
    const managers = (await kubeRequest(app.cp, 'GET', `/api/v1/namespaces/${ns}/configmaps/fm-own`)).body.metadata
      .managedFields as Array<{ manager: string }>;
    assert.deepEqual(managers.map((m) => m.manager).sort(), [`cas:${username}`, 'ci'].sort());
  });
});
