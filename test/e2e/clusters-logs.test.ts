// Database: runs on PostgreSQL too: clusters imported into the database at start.
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, test } from 'node:test';
import { sharedControlPlane, waitFor, type ControlPlane } from '../harness/control-plane.js';
import { createPostgresDatabase, onPostgres } from '../support/app.js';
import { b64, closedPort, contextFor, kubeconfigYaml } from '../support/kubeconfigs.js';
import { assertContract, exchangeOf, parseJson } from '../support/openapi-validator.js';

const MAIN = fileURLToPath(new URL('../../../dist/main.js', import.meta.url));
const PASSWORD = 'root-password-for-logs';

/** The real service (dist/main.js) as a process, at the most verbose log level: what it prints is checked for credentials. */
describe(
  'the running service never logs a credential',
  { skip: existsSync(MAIN) ? false : 'dist/main.js not built' },
  () => {
    let a: ControlPlane;
    let dir: string;
    let service: ChildProcess;
    let output = '';
    let base: string;
    let dropDatabase: (() => Promise<void>) | undefined;

    const call = async (method: string, path: string, token?: string, body?: unknown) => {
      const res = await fetch(base + path, {
        method,
        headers: {
          ...(token ? { authorization: `Bearer ${token}` } : {}),
          ...(body ? { 'content-type': 'application/json' } : {}),
        },
        body: body ? JSON.stringify(body) : undefined,
      });
      const text = await res.text();
      assertContract(exchangeOf(method, base + path, res, text));
      return { status: res.status, body: parseJson(text) };
    };

    before(async () => {
      a = await sharedControlPlane('a');
      dir = await mkdtemp(join(tmpdir(), 'cas-logs-'));
      const kubeconfig = join(dir, 'kubeconfig');
      await writeFile(
        kubeconfig,
        kubeconfigYaml([
          contextFor(a, { name: 'boot-token', auth: 'token' }),
          contextFor(a, { name: 'boot-cert', auth: 'cert' }),
        ]),
      );
      let databaseUrl = `sqlite:${join(dir, 'cas.sqlite')}`;
      if (onPostgres) {
        const db = await createPostgresDatabase();
        databaseUrl = db.url;
        dropDatabase = db.drop;
      }
      const port = await closedPort();
      base = `http://127.0.0.1:${port}`;
      service = spawn(process.execPath, [MAIN], {
        env: {
          PATH: process.env.PATH,
          PORT: String(port),
          HOST: '127.0.0.1',
          CAS_DATA_DIR: dir,
          DATABASE_URL: databaseUrl,
          LOG_LEVEL: 'trace',
          CAS_BOOTSTRAP_USERNAME: 'root',
          CAS_BOOTSTRAP_PASSWORD: PASSWORD,
          CAS_BOOTSTRAP_KUBECONFIG_FILE: kubeconfig,
          CAS_CLUSTER_HEALTH_INTERVAL_SECONDS: '1',
        },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      service.stdout!.on('data', (c: Buffer) => (output += c.toString('utf8')));
      service.stderr!.on('data', (c: Buffer) => (output += c.toString('utf8')));
      await waitFor('the service to answer /healthz', async () => {
        if (service.exitCode !== null) throw new Error(`the service exited: ${output.slice(-2000)}`);
        return (await fetch(`${base}/healthz`).catch(() => undefined))?.ok;
      });
    });
    after(async () => {
      if (service && service.exitCode === null) {
        const exited = new Promise((resolve) => service.once('exit', resolve));
        service.kill('SIGTERM');
        await exited;
      }
      await dropDatabase?.();
      await rm(dir, { recursive: true, force: true });
    });

    test('bootstrap, create, update, refused input and background probes: the output has log lines but no token, key or password', async () => {
      const login = await call('POST', '/api/v1/auth/login', undefined, { username: 'root', password: PASSWORD });
      assert.equal(login.status, 200);
      const token = login.body.token as string;

      const listed = await call('GET', '/api/v1/admin/clusters', token);
      assert.deepEqual(
        listed.body.map((c: any) => [c.name, c.status, c.isDefault]),
        [
          ['boot-token', 'ok', true],
          ['boot-cert', 'ok', false],
        ],
      );
      const created = await call('POST', '/api/v1/admin/clusters', token, {
        name: 'viewer',
        config: kubeconfigYaml([contextFor(a, { token: a.viewerToken })]),
      });
      assert.equal(created.status, 201);
      const updated = await call('PUT', `/api/v1/admin/clusters/${created.body.id}`, token, {
        config: kubeconfigYaml([contextFor(a, { auth: 'cert' })]),
      });
      assert.equal(updated.status, 200);
      const refused = await call('POST', '/api/v1/admin/clusters', token, {
        name: 'refused',
        config: kubeconfigYaml([{ ...contextFor(a), user: { token: a.adminToken, exec: { command: 'x' } } }]),
      });
      assert.equal(refused.status, 400);
      await new Promise((r) => setTimeout(r, 1500)); // a background round

      assert.match(output, /cluster 'viewer' \(\d+\) created by root/);
      assert.match(output, /CAS_BOOTSTRAP_KUBECONFIG_FILE: imported 2 clusters/);
      const secrets = {
        'admin token': a.adminToken,
        'viewer token': a.viewerToken,
        'client key': b64(a.adminKeyData),
        'client key PEM': a.adminKeyData.split('\n')[1],
        'client certificate': b64(a.adminCertData),
        password: PASSWORD,
        'session token': token,
      };
      for (const [what, secret] of Object.entries(secrets))
        assert.ok(!output.includes(secret), `the ${what} is in the log`);
    });
  },
);
