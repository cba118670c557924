import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { after, before, describe, test } from 'node:test';
import { kubeBinDir } from '../harness/binaries.js';
import { kubeRequest, sharedControlPlane, waitFor, type ControlPlane } from '../harness/control-plane.js';
import { startTestApp, type TestApp } from '../support/app.js';
import { signedIn } from '../support/factories.js';
import { request } from '../support/http.js';

const run = promisify(execFile);
const kubectl = process.env.KUBECTL_BIN || join(kubeBinDir(), 'kubectl');
const NS = 'cluster-admin-service';

describe('deploy/ manifests on a real control plane', () => {
  let cp: ControlPlane;
  let t: TestApp | undefined;
  let saDir: string;

  before(async () => {
    cp = await sharedControlPlane('b');
    saDir = await mkdtemp(join(tmpdir(), 'cas-sa-'));
  });
  after(async () => {
    await t?.close();
    await rm(saDir, { recursive: true, force: true });
  });

  test('kubectl apply --dry-run=server -f deploy/ succeeds', async () => {
    // The namespace must exist for a server-side dry run of what goes into it.
    await run(kubectl, ['--kubeconfig', cp.kubeconfigPath, 'apply', '-f', 'deploy/00-namespace.yaml']);
    const { stdout } = await run(kubectl, [
      '--kubeconfig',
      cp.kubeconfigPath,
      'apply',
      '--dry-run=server',
      '-f',
      'deploy/',
    ]);
    for (const kind of ['serviceaccount', 'clusterrole', 'clusterrolebinding', 'secret', 'deployment', 'service']) {
      assert.match(stdout, new RegExp(`${kind}[^\\n]*cluster-admin-service[^\\n]*\\(server dry run\\)`), stdout);
    }
  });

  test("the service runs in in-cluster mode with the token of the manifests' ServiceAccount, within its ClusterRole", async () => {
    await run(kubectl, [
      '--kubeconfig',
      cp.kubeconfigPath,
      'apply',
      '-f',
      'deploy/00-namespace.yaml',
      '-f',
      'deploy/10-serviceaccount.yaml',
      '-f',
      'deploy/20-rbac.yaml',
    ]);
    const token = await waitFor(
      'the ServiceAccount token',
      async () => {
        const secrets = (await kubeRequest(cp, 'GET', `/api/v1/namespaces/${NS}/secrets`)).body.items as any[];
        const secret = secrets.find(
          (s) =>
            s.type === 'kubernetes.io/service-account-token' &&
            s.metadata.annotations?.['kubernetes.io/service-account.name'] === NS,
        );
        return secret ? Buffer.from(secret.data.token, 'base64').toString('utf8') : undefined;
      },
      20_000,
    );
    await writeFile(join(saDir, 'token'), token);
    await writeFile(join(saDir, 'ca.crt'), cp.caData);
    await writeFile(join(saDir, 'namespace'), NS);

    t = await startTestApp({ env: { CAS_IN_CLUSTER_DIR: saDir, CAS_IN_CLUSTER_SERVER: cp.server } });
    const admin = (await signedIn(t, 'admin')).token;
    const imported = await request(t.app, 'POST', '/api/v1/admin/clusters/import', {
      token: admin,
      body: { inCluster: true },
    });
    assert.equal(imported.status, 201, imported.text);
    const call = (method: string, url: string, body?: unknown) =>
      request(t!.app, method, `/api/v1/${url}`, { token: admin, body, headers: { 'x-cluster-name': 'in-cluster' } });

    const namespaces = await call('GET', 'namespaces/_all');
    assert.equal(namespaces.status, 200, namespaces.text);
    assert.ok(namespaces.body.items.some((n: any) => n.metadata.name === NS));
    const name = `in-cluster-${process.pid}`;
    const created = await call('POST', `configmaps/${NS}`, { metadata: { name }, data: { ok: 'yes' } });
    assert.equal(created.status, 201, created.text);
    assert.equal((await call('DELETE', `configmaps/${NS}/${name}`)).status, 200);
    const refused = await call('POST', 'clusterroles.rbac.authorization.k8s.io/_all', {
      metadata: { name: `escalate-${process.pid}` },
      rules: [],
    });
    assert.equal(refused.status, 403, 'the ClusterRole does not let the service write RBAC');
    assert.equal(refused.body.kind, 'Status');
  });
});
