import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, statSync } from 'node:fs';
import { mkdtemp, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { kubeBinDir } from '../harness/binaries.js';
import { kubeRequest, sharedControlPlane, waitFor, type ControlPlane } from '../harness/control-plane.js';
import { startKubelet, type Kubelet } from '../harness/kubelet.js';
import { createPostgresDatabase, onPostgres } from '../support/app.js';
import { closedPort } from '../support/kubeconfigs.js';
import { allShellSnippets, type Snippet } from '../support/snippets.js';
import { startKubeApiApp } from '../support/kube-api.js';

const ROOT = resolve('.');
const kubectl = process.env.KUBECTL_BIN || join(kubeBinDir(), 'kubectl');
/** The namespace the documentation uses; each run takes one of its own. */
const NAMESPACE = `demo-${process.pid}`;

/** The documentation's text as this run executes it: its own service address and namespace. */
function adapt(code: string, port: number): string {
  return code.replaceAll('localhost:8080', `127.0.0.1:${port}`).replace(/\bdemo\b/g, NAMESPACE);
}

interface Ran {
  code: number | null;
  stdout: string;
  stderr: string;
  /** The shell's process group: what it left running in the background. */
  pid: number;
}

/** Runs a script with bash in a process group of its own; resolves when bash exits. */
function bash(script: string, env: NodeJS.ProcessEnv, cwd: string, timeoutMs = 300_000): Promise<Ran> {
  return new Promise((done, fail) => {
    const child = spawn('bash', ['-c', script], { cwd, env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString('utf8')));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString('utf8')));
    const timer = setTimeout(() => killGroup(child.pid!), timeoutMs);
    child.on('error', fail);
    child.on('exit', (code) => {
      clearTimeout(timer);
      // What bash left running in the background may hold its output open: do not wait for that.
      const finish = () => done({ code, stdout, stderr, pid: child.pid! });
      const grace = setTimeout(finish, 2000);
      child.once('close', () => {
        clearTimeout(grace);
        finish();
      });
    });
  });
}

function killGroup(pid: number, signal: NodeJS.Signals = 'SIGTERM'): void {
  try {
    process.kill(-pid, signal);
  } catch {
    // the group has ended already
  }
}

/** Fails with the script and what it printed, so a broken snippet is named by its file and line. */
function assertRan(ran: Ran, snippets: Snippet[], script: string): void {
  const where = snippets.map((s) => `${s.file}:${s.line}`).join(', ');
  const shown = `${where}\n--- script\n${script}\n--- stdout\n${ran.stdout}\n--- stderr\n${ran.stderr}`;
  assert.equal(ran.code, 0, `the snippet failed (exit ${ran.code}): ${shown}`);
  // curl -s prints an error body and still exits 0: neither the service's error shape nor a cluster's
  // failed Status may appear in what a snippet printed.
  assert.doesNotMatch(ran.stdout, /"statusCode":\s*\d/, `a service error: ${shown}`);
  assert.doesNotMatch(ran.stdout, /"status":\s*"Failure"/, `a cluster error: ${shown}`);
}

describe('the README and docs/ snippets, run as written', () => {
  const snippets = allShellSnippets();
  const of = (kind: string) => snippets.filter((s) => s.kind === kind);
  let cp: ControlPlane;
  let kubelet: Kubelet;
  let service: ChildProcess | undefined;
  let port: number;
  let work: string;
  let env: NodeJS.ProcessEnv;
  let dropDatabase: (() => Promise<void>) | undefined;
  const groups: number[] = [];
  const nodeName = `readme-node-${process.pid}`;
  const base = () => `http://127.0.0.1:${port}`;

  before(async () => {
    // scripts/start.sh runs `npm ci` when package-lock.json is newer than the install: a test must
    // never install packages (the suite's runner has installed them already).
    assert.ok(
      statSync('node_modules/.package-lock.json').mtimeMs >= statSync('package-lock.json').mtimeMs,
      'node_modules is older than package-lock.json: run npm ci before this test',
    );
    cp = await sharedControlPlane('a');
    kubelet = await startKubelet(cp, nodeName);
    work = await mkdtemp(join(tmpdir(), 'cas-readme-'));
    // kubectl on PATH is the control plane's own version, whatever else the machine has.
    await symlink(kubectl, join(work, 'kubectl'));
    // helm too, for the service's Helm routes (docs/HELM.md), when the suite has it (scripts/test.sh: HELM_BIN).
    if (process.env.HELM_BIN) await symlink(process.env.HELM_BIN, join(work, 'helm'));
    env = { ...process.env, PATH: `${work}:${process.env.PATH}`, KUBECONFIG: cp.kubeconfigPath, HOME: work };
    delete env.CAS_METRICS_TOKEN;

    port = await closedPort();
    let databaseUrl = `sqlite:${join(work, 'cas.sqlite')}`;
    if (onPostgres) ({ url: databaseUrl, drop: dropDatabase } = await createPostgresDatabase());
    const [start] = of('start');
    service = spawn('bash', ['-c', start.code], {
      cwd: ROOT,
      env: {
        ...env,
        PORT: String(port),
        HOST: '127.0.0.1',
        CAS_DATA_DIR: join(work, 'data'),
        DATABASE_URL: databaseUrl,
      },
      detached: true,
      stdio: ['ignore', 'ignore', 'inherit'],
    });
    groups.push(service.pid!);
    await waitFor(
      `${start.file}:${start.line} (bash scripts/start.sh) to build and start the service`,
      async () => {
        if (service!.exitCode !== null) throw new Error(`the start command exited with ${service!.exitCode}`);
        return (await fetch(`${base()}/readyz`).catch(() => undefined))?.ok;
      },
      240_000,
      500,
    );
  });
  after(async () => {
    for (const pid of groups) killGroup(pid);
    if (service && service.exitCode === null) await new Promise((r) => service!.once('exit', r));
    await kubeRequest(cp, 'DELETE', `/api/v1/namespaces/${NAMESPACE}/pods/web-0`, { gracePeriodSeconds: 0 });
    await kubeRequest(cp, 'DELETE', `/api/v1/namespaces/${NAMESPACE}`);
    await kubelet?.stop();
    await dropDatabase?.();
    if (work) await rm(work, { recursive: true, force: true });
  });

  async function signIn(): Promise<string> {
    const res = await fetch(`${base()}/api/v1/auth/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ username: 'admin', password: 'a-long-password' }),
    });
    assert.equal(res.status, 200, 'the first steps made the super user admin / a-long-password');
    return ((await res.json()) as { token: string }).token;
  }

  test("the README's first steps: super user, cluster, and a resource created, patched, listed and deleted", async () => {
    const steps = of('first-steps');
    assert.equal(steps.length, 1);
    const script = `set -euo pipefail\n${adapt(steps[0].code, port)}`;
    const ran = await bash(script, env, work);
    assertRan(ran, steps, script);
    assert.match(ran.stdout, /"name":"local"[^\n]*"isDefault":true,"status":"ok"/, ran.stdout);
    assert.ok(ran.stdout.includes('{"name":"greeting","data":{"text":"hello again"}}'), ran.stdout);

    // Each write is an audit row with the status it ended with: the steps did what they say.
    const token = await signIn();
    const expected = [
      'createSuperUser 201',
      'createCluster 201',
      'createResource 201',
      'createResource 201',
      'patchResource 200',
      'deleteResource 200',
      'deleteResource 200',
    ];
    await waitFor('the audit rows of the first steps', async () => {
      const res = await fetch(`${base()}/api/v1/admin/audit?size=100`, {
        headers: { authorization: `Bearer ${token}` },
      });
      const { events } = (await res.json()) as { events: Array<{ operation: string; statusCode: number }> };
      const seen = events
        .filter((e) => e.operation !== 'login')
        .map((e) => `${e.operation} ${e.statusCode}`)
        .reverse();
      return JSON.stringify(seen) === JSON.stringify(expected) || undefined;
    });
    assert.equal(
      (await kubeRequest(cp, 'GET', `/api/v1/namespaces/${NAMESPACE}`)).status,
      404,
      'the namespace is gone',
    );
  });

  test('the pages of docs/ run after the first steps, each in one shell', async () => {
    // What the pages show needs something to look at: a Deployment web and a Pod web-0 with a log.
    await waitFor('the first steps’ namespace to be created again', async () => {
      const res = await kubeRequest(cp, 'POST', '/api/v1/namespaces', { metadata: { name: NAMESPACE } });
      return res.status === 201 || undefined;
    });
    const deployment = await kubeRequest(cp, 'POST', `/apis/apps/v1/namespaces/${NAMESPACE}/deployments`, {
      metadata: { name: 'web' },
      spec: {
        replicas: 1,
        selector: { matchLabels: { app: 'web' } },
        template: { metadata: { labels: { app: 'web' } }, spec: { containers: [{ name: 'web', image: 'web' }] } },
      },
    });
    assert.equal(deployment.status, 201, JSON.stringify(deployment.body));
    const pod = await kubeRequest(cp, 'POST', `/api/v1/namespaces/${NAMESPACE}/pods`, {
      metadata: { name: 'web-0', labels: { app: 'web-0' } },
      spec: { nodeName, automountServiceAccountToken: false, containers: [{ name: 'app', image: 'app' }] },
    });
    assert.equal(pod.status, 201, JSON.stringify(pod.body));
    kubelet.write(NAMESPACE, 'web-0', 'app', 'listening on :8080');

    const token = await signIn();
    // Whatever a page expects to see, besides running without an error.
    const expected: Record<string, string[]> = {
      'docs/LIVE-VIEWS.md': [
        'ADDED web-0',
        'event: ADDED',
        'EventList',
        'listening on :8080',
        'Deployment',
        '"replicas": 3',
      ],
      'docs/ROLES.md': ['"allowed":true', 'web'],
      'docs/SSO.md': ['"id":"password"'],
      ...(process.env.HELM_BIN
        ? {
            'docs/HELM.md': [
              '"name":"hello","revision":1,"status":"deployed"',
              'ConfigMap/hello-settings: configured',
              '"revision":3,"description":"Rollback to 1"',
            ],
          }
        : {}),
      'docs/APPLY.md': ['ConfigMap/shop-settings: created', 'Secret/shop-credentials: created', 'password: "***"'],
    };
    const pages = [...new Set(of('after-first-steps').map((s) => s.file))];
    // ROLES.md turns impersonation on for the cluster: it goes last.
    pages.sort((a, b) => Number(a === 'docs/ROLES.md') - Number(b === 'docs/ROLES.md'));
    for (const page of pages) {
      const blocks = of('after-first-steps').filter((s) => s.file === page);
      const script = `set -euo pipefail\n${blocks.map((s) => adapt(s.code, port)).join('\n')}`;
      const ran = await bash(script, { ...env, TOKEN: token }, work);
      assertRan(ran, blocks, script);
      for (const text of expected[page] ?? [])
        assert.ok(ran.stdout.includes(text), `${page}: "${text}" in\n${ran.stdout}`);
    }
  });

  test('snippets that start a service of their own', async () => {
    for (const snippet of of('own-service')) {
      const ownPort = await closedPort();
      const script = `set -euo pipefail\n${adapt(snippet.code, ownPort)}`;
      const ran = await bash(
        script,
        {
          ...env,
          PORT: String(ownPort),
          HOST: '127.0.0.1',
          CAS_DATA_DIR: join(work, `data-${ownPort}`),
          LOG_LEVEL: 'warn',
          DATABASE_URL: `sqlite:${join(work, `own-${ownPort}.sqlite`)}`,
        },
        ROOT,
        120_000,
      );
      groups.push(ran.pid);
      assertRan(ran, [snippet], script);
      if (snippet.file === 'docs/LIVE-VIEWS.md') assert.match(ran.stdout, /^cas_build_info\{/m);
      // The local TLS recipe: the service serves its certificate, over HTTP/2 to curl.
      if (snippet.file === 'docs/CONFIGURATION.md') assert.match(ran.stdout, /^2$/m);
    }
  });

  test('the kubectl snippet: a kubeconfig minted by the service, kubectl through it over TLS', async () => {
    const app = await startKubeApiApp({ cluster: 'readme-tls', namespace: `readme-tls-${process.pid}` });
    try {
      const ca = join(app.dir, 'public-ca.pem');
      await writeFile(ca, app.caPem);
      const blocks = of('kubectl-through-service');
      assert.equal(blocks.length, 1);
      // No `set -e` here: the snippet must stop by itself, as it does in a reader's interactive shell.
      const script = blocks[0]!.code;
      const run = (extra: NodeJS.ProcessEnv) =>
        bash(script, { ...env, KUBECONFIG: '', CAS_PUBLIC_URL: app.base, TOKEN: app.adminToken, ...extra }, app.dir);
      // Without the private CA: curl says why and stops; no cas.yaml (empty or not) is left for kubectl.
      const untrusted = await run({});
      assert.notEqual(untrusted.code, 0, untrusted.stdout);
      assert.match(untrusted.stderr, /certificate/i);
      assert.doesNotMatch(untrusted.stderr, /localhost:8080|kubectl/);
      assert.equal(existsSync(join(app.dir, 'cas.yaml')), false, 'no cas.yaml after a failed mint');
      // A refused token: the service's 401 is said, not written into cas.yaml.
      const refused = await run({ CAS_PUBLIC_CA_FILE: ca, TOKEN: 'cas_sess_wrong' });
      assert.notEqual(refused.code, 0);
      assert.match(refused.stderr, /401/);
      assert.equal(existsSync(join(app.dir, 'cas.yaml')), false);
      // With the CA the snippet works; the kubeconfig carries the CA for kubectl.
      const ran = await run({ CAS_PUBLIC_CA_FILE: ca });
      assertRan(ran, blocks, script);
      assert.match(ran.stdout, new RegExp(`^readme-tls-${process.pid}\\s+Active`, 'm'));
    } finally {
      await app.close();
    }
  });

  test('the kubectl snippets of the deployment guide, each command as a server-side dry run', async () => {
    // A dry run does not create the namespace it would create, and the monitoring overlay's PodMonitor
    // needs the Prometheus Operator's CRD: both are made here if missing and left (as test/e2e/deploy does).
    for (const [path, body] of [
      ['/api/v1/namespaces', { metadata: { name: 'cluster-admin-service' } }],
      [
        '/apis/apiextensions.k8s.io/v1/customresourcedefinitions',
        {
          metadata: { name: 'podmonitors.monitoring.coreos.com' },
          spec: {
            group: 'monitoring.coreos.com',
            scope: 'Namespaced',
            names: { plural: 'podmonitors', singular: 'podmonitor', kind: 'PodMonitor' },
            versions: [
              {
                name: 'v1',
                served: true,
                storage: true,
                schema: { openAPIV3Schema: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true } },
              },
            ],
          },
        },
      ],
    ] as const) {
      const res = await kubeRequest(cp, 'POST', path, body);
      assert.ok(res.status === 201 || res.status === 409, JSON.stringify(res.body));
    }
    const blocks = of('kubectl-dry-run');
    assert.ok(blocks.length > 0);
    for (const snippet of blocks) {
      const script = `set -euo pipefail\nkubectl() { command kubectl "$@" --dry-run=server; }\n${snippet.code}`;
      const ran = await bash(script, env, ROOT, 120_000);
      assertRan(ran, [snippet], script);
      const lines = ran.stdout.trim().split('\n');
      assert.ok(lines.length > 0 && lines.every((l) => l.endsWith('(server dry run)')), ran.stdout);
    }
  });

  test('the test command is the one CI runs', async () => {
    const ci = await readFile('.ci/run', 'utf8');
    for (const snippet of of('ci')) {
      for (const command of snippet.code.trim().split('\n')) assert.ok(ci.includes(`exec ${command}`), command);
    }
  });
});
