// Tests of the control plane harness itself, against real control planes:
// `a` started in-process with startControlPlane, `b` through the CLI
// (`cli.js up`, attached via its state dir) -- two in all, shared by the tests.
import assert from 'node:assert/strict';
import { execFile, execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import https from 'node:https';
import { createServer, type AddressInfo } from 'node:net';
import { dirname } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { parse as parseYaml } from 'yaml';
import {
  attachControlPlane,
  isAlive,
  kubeRequest,
  portOpen,
  readAudit,
  readInfo,
  startControlPlane,
  waitFor,
  waitForAudit,
  type ControlPlane,
  type ControlPlaneInfo,
} from './control-plane.js';

const cliPath = fileURLToPath(new URL('./cli.js', import.meta.url));

function cli(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [cliPath, ...args], { timeout: 15 * 60_000 }, (err, stdout, stderr) => {
      resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr });
    });
  });
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

async function createNamespace(cp: ControlPlane, name: string): Promise<void> {
  const r = await kubeRequest(cp, 'POST', '/api/v1/namespaces', {
    apiVersion: 'v1',
    kind: 'Namespace',
    metadata: { name },
  });
  assert.equal(r.status, 201, JSON.stringify(r.body));
}

/** What is running for a control plane, for the "nothing left" checks. */
function footprint(info: ControlPlaneInfo) {
  return { pids: Object.values(info.pids), ports: Object.values(info.ports), dir: info.dir };
}

async function assertGone(fp: ReturnType<typeof footprint>): Promise<void> {
  for (const pid of fp.pids) assert.equal(isAlive(pid), false, `pid ${pid} still running`);
  for (const port of fp.ports) assert.equal(await portOpen(port), false, `port ${port} still open`);
  assert.equal(existsSync(fp.dir), false, `${fp.dir} still exists`);
}

describe('kubernetes control plane harness', () => {
  let a: ControlPlane;
  let b: ControlPlane;
  let aStopped = false;
  let bDown = false;
  const bName = `harness-test-${process.pid}`;

  // `b` outlives this process by design (CLI): take it down even if the tests crash
  process.once('exit', () => {
    if (!bDown) execFileSync(process.execPath, [cliPath, 'down', bName], { stdio: 'ignore' });
  });

  /** The port `b`'s apiserver is asked to take (`up --port`). */
  let bPort = 0;

  before(async () => {
    bPort = await freePort();
    const [cpA, upB] = await Promise.all([startControlPlane('harness-a'), cli('up', bName, '--port', String(bPort))]);
    a = cpA;
    assert.equal(upB.code, 0, `cli up failed:\n${upB.stderr}`);
    const lines = upB.stdout.trim().split('\n');
    const kubeconfigPath = lines[lines.length - 1]!;
    assert.ok(existsSync(kubeconfigPath), `cli up printed ${kubeconfigPath}`);
    b = attachControlPlane(dirname(kubeconfigPath));
  });

  after(async () => {
    if (a && !aStopped) await a.stop();
    if (!bDown) await cli('down', bName);
    bDown = true;
  });

  test('cli up --port puts the apiserver on that port; a bad or taken port is refused at once', async () => {
    assert.equal(b.server, `https://127.0.0.1:${bPort}`);
    assert.equal(readInfo(b.dir).ports.apiserver, bPort);
    for (const bad of [['--port'], ['--port', '0'], ['--port', '65536'], ['--port', 'http'], ['--prot', '6443']]) {
      const r = await cli('up', `${bName}-bad`, ...bad);
      assert.equal(r.code, 2, `${bad.join(' ')}: ${r.stderr}`);
      assert.match(r.stderr, /usage: .*up <name> \[--port/);
    }
    const taken = await cli('up', `${bName}-taken`, '--port', String(bPort));
    assert.equal(taken.code, 1, taken.stderr);
    assert.match(taken.stderr, new RegExp(`port ${bPort} is already in use`));
    assert.equal((await cli('list')).stdout.includes(`${bName}-taken`), false);
  });

  test('/version reports v1.20.2 on both control planes', async () => {
    for (const cp of [a, b]) {
      const r = await kubeRequest(cp, 'GET', '/version');
      assert.equal(r.status, 200);
      assert.equal(r.body.gitVersion, 'v1.20.2');
      assert.equal(r.body.major, '1');
      assert.equal(r.body.minor, '20');
    }
  });

  test('kubeconfig has inline admin cert, admin token and read-only viewer; audit log records who did what', async () => {
    const kc = parseYaml(await readFile(a.kubeconfigPath, 'utf8'));
    assert.equal(kc['current-context'], 'admin');
    assert.deepEqual(kc.contexts.map((c: any) => c.name).sort(), ['admin', 'admin-token', 'viewer']);
    assert.equal(kc.clusters[0].cluster.server, a.server);
    assert.equal(Buffer.from(kc.clusters[0].cluster['certificate-authority-data'], 'base64').toString(), a.caData);
    const users = Object.fromEntries(kc.users.map((u: any) => [u.name, u.user]));
    assert.equal(Buffer.from(users['cas-admin']['client-certificate-data'], 'base64').toString(), a.adminCertData);
    assert.equal(Buffer.from(users['cas-admin']['client-key-data'], 'base64').toString(), a.adminKeyData);
    assert.equal(users['cas-admin-token'].token, a.adminToken);
    assert.equal(users['cas-viewer'].token, a.viewerToken);
    assert.doesNotMatch(JSON.stringify(kc), /"(certificate-authority|client-certificate|client-key|tokenFile)"/);

    // admin token: full access
    const ns = await kubeRequest(
      a,
      'POST',
      '/api/v1/namespaces',
      { metadata: { name: 'harness-users' } },
      { token: a.adminToken },
    );
    assert.equal(ns.status, 201, JSON.stringify(ns.body));
    const cm = { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'c1' }, data: { k: 'v' } };
    // viewer: reads everything, writes nothing
    const list = await kubeRequest(a, 'GET', '/api/v1/namespaces', undefined, { token: a.viewerToken });
    assert.equal(list.status, 200);
    const denied = await kubeRequest(a, 'POST', '/api/v1/namespaces/harness-users/configmaps', cm, {
      token: a.viewerToken,
    });
    assert.equal(denied.status, 403);
    const created = await kubeRequest(a, 'POST', '/api/v1/namespaces/harness-users/configmaps', cm, {
      token: a.adminToken,
    });
    assert.equal(created.status, 201);
    const bad = await kubeRequest(a, 'GET', '/api/v1/namespaces', undefined, { token: 'not-a-token' });
    assert.equal(bad.status, 401);

    const events = await waitForAudit(
      a,
      (e) => e.objectRef?.namespace === 'harness-users' && e.objectRef.resource === 'configmaps' && e.verb === 'create',
    );
    const byUser = Object.fromEntries(events.map((e) => [e.user.username, e]));
    assert.equal(byUser['cas-viewer']?.responseStatus?.code, 403);
    assert.equal(byUser['cas-admin-token']?.responseStatus?.code, 201);
    assert.deepEqual(byUser['cas-admin-token']?.requestObject?.data, { k: 'v' });
    assert.equal(byUser['cas-admin-token']?.requestURI, '/api/v1/namespaces/harness-users/configmaps');
    assert.ok(byUser['cas-admin-token']?.sourceIPs?.includes('127.0.0.1'));
    assert.equal(byUser['cas-admin-token']?.userAgent, 'cas-test-harness');
  });

  test('a CRD is created and a custom resource round-trips', async () => {
    const crd = {
      apiVersion: 'apiextensions.k8s.io/v1',
      kind: 'CustomResourceDefinition',
      metadata: { name: 'widgets.harness.cas.example.com' },
      spec: {
        group: 'harness.cas.example.com',
        scope: 'Namespaced',
        names: { plural: 'widgets', singular: 'widget', kind: 'Widget', listKind: 'WidgetList' },
        versions: [
          {
            name: 'v1',
            served: true,
            storage: true,
            schema: {
              openAPIV3Schema: {
                type: 'object',
                properties: {
                  spec: {
                    type: 'object',
                    properties: {
                      size: { type: 'integer' },
                      labels: { type: 'object', additionalProperties: { type: 'string' } },
                      parts: { type: 'array', items: { type: 'object', properties: { name: { type: 'string' } } } },
                    },
                  },
                },
              },
            },
          },
        ],
      },
    };
    const r = await kubeRequest(a, 'POST', '/apis/apiextensions.k8s.io/v1/customresourcedefinitions', crd);
    assert.equal(r.status, 201, JSON.stringify(r.body));
    await waitFor('CRD Established', async () => {
      const g = await kubeRequest(
        a,
        'GET',
        '/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.harness.cas.example.com',
      );
      return g.body?.status?.conditions?.some((c: any) => c.type === 'Established' && c.status === 'True');
    });
    await createNamespace(a, 'harness-crd');
    const base = '/apis/harness.cas.example.com/v1/namespaces/harness-crd/widgets';
    // discovery lists the new resource
    await waitFor('discovery of widgets', async () => {
      const d = await kubeRequest(a, 'GET', '/apis/harness.cas.example.com/v1');
      return d.status === 200 && d.body.resources?.some((x: any) => x.name === 'widgets');
    });
    const widget = {
      apiVersion: 'harness.cas.example.com/v1',
      kind: 'Widget',
      metadata: { name: 'w1', labels: { tier: 'gold' } },
      spec: { size: 3, labels: { a: 'b', c: 'd' }, parts: [{ name: 'x' }, { name: 'y' }] },
    };
    const c = await kubeRequest(a, 'POST', base, widget);
    assert.equal(c.status, 201, JSON.stringify(c.body));
    const g = await kubeRequest(a, 'GET', `${base}/w1`);
    assert.equal(g.status, 200);
    assert.deepEqual(g.body.spec, widget.spec);
    assert.equal(g.body.metadata.labels.tier, 'gold');
    // merge patch, then a stale-resourceVersion update is a 409 conflict
    const p = await kubeRequest(
      a,
      'PATCH',
      `${base}/w1`,
      { spec: { size: 5, labels: { c: null } } },
      { contentType: 'application/merge-patch+json' },
    );
    assert.equal(p.status, 200, JSON.stringify(p.body));
    assert.deepEqual(p.body.spec, { size: 5, labels: { a: 'b' }, parts: [{ name: 'x' }, { name: 'y' }] });
    const stale = await kubeRequest(a, 'PUT', `${base}/w1`, { ...g.body, spec: { size: 1 } });
    assert.equal(stale.status, 409);
    const l = await kubeRequest(a, 'GET', `${base}?labelSelector=tier%3Dgold`);
    assert.deepEqual(
      l.body.items.map((i: any) => i.metadata.name),
      ['w1'],
    );
    const d = await kubeRequest(a, 'DELETE', `${base}/w1`);
    assert.equal(d.status, 200);
    assert.equal((await kubeRequest(a, 'GET', `${base}/w1`)).status, 404);
  });

  test('a Foreground delete of a Deployment removes its ReplicaSet', async () => {
    await createNamespace(a, 'harness-fg');
    const deployments = '/apis/apps/v1/namespaces/harness-fg/deployments';
    const dep = {
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: { name: 'web' },
      spec: {
        replicas: 1,
        selector: { matchLabels: { app: 'web' } },
        template: {
          metadata: { labels: { app: 'web' } },
          spec: { containers: [{ name: 'web', image: 'nginx:1.19' }] },
        },
      },
    };
    const c = await kubeRequest(a, 'POST', deployments, dep);
    assert.equal(c.status, 201, JSON.stringify(c.body));
    const uid = c.body.metadata.uid;
    const rs = await waitFor('the ReplicaSet of the Deployment', async () => {
      const l = await kubeRequest(a, 'GET', '/apis/apps/v1/namespaces/harness-fg/replicasets?labelSelector=app%3Dweb');
      return l.body.items?.find((i: any) => i.metadata.ownerReferences?.some((o: any) => o.uid === uid));
    });

    const del = await kubeRequest(a, 'DELETE', `${deployments}/web`, {
      apiVersion: 'v1',
      kind: 'DeleteOptions',
      propagationPolicy: 'Foreground',
    });
    assert.ok([200, 202].includes(del.status), JSON.stringify(del.body));
    // Foreground: the owner stays (with the finalizer) until its dependents are gone
    const during = await kubeRequest(a, 'GET', `${deployments}/web`);
    if (during.status === 200) {
      assert.ok(during.body.metadata.deletionTimestamp);
      assert.ok(during.body.metadata.finalizers.includes('foregroundDeletion'));
    }
    await waitFor(
      'the Deployment and its ReplicaSet to be gone',
      async () => {
        const d = await kubeRequest(a, 'GET', `${deployments}/web`);
        const r = await kubeRequest(a, 'GET', `/apis/apps/v1/namespaces/harness-fg/replicasets/${rs.metadata.name}`);
        return d.status === 404 && r.status === 404;
      },
      60_000,
    );
    // the garbage collector deleted the ReplicaSet
    const gc = await waitForAudit(
      a,
      (e) => e.verb === 'delete' && e.objectRef?.resource === 'replicasets' && e.objectRef.name === rs.metadata.name,
    );
    assert.ok(
      gc.some((e) => e.user.username === 'system:serviceaccount:kube-system:generic-garbage-collector'),
      JSON.stringify(gc.map((e) => e.user.username)),
    );
    const mine = await waitForAudit(
      a,
      (e) => e.verb === 'delete' && e.objectRef?.resource === 'deployments' && e.objectRef.name === 'web',
    );
    assert.equal(mine[0]?.user.username, 'cas-admin');
    assert.equal(mine[0]?.requestObject?.propagationPolicy, 'Foreground');
  });

  test('two control planes are isolated from each other', async () => {
    assert.notEqual(a.server, b.server);
    assert.notEqual(a.dir, b.dir);
    assert.notEqual(a.caData, b.caData);
    await createNamespace(a, 'only-in-a');
    await createNamespace(b, 'only-in-b');
    assert.equal((await kubeRequest(a, 'GET', '/api/v1/namespaces/only-in-a')).status, 200);
    assert.equal((await kubeRequest(b, 'GET', '/api/v1/namespaces/only-in-a')).status, 404);
    assert.equal((await kubeRequest(a, 'GET', '/api/v1/namespaces/only-in-b')).status, 404);
    // the CRD made on a is unknown to b
    assert.equal((await kubeRequest(b, 'GET', '/apis/harness.cas.example.com/v1')).status, 404);
    // credentials of one are worthless on the other
    assert.equal((await kubeRequest(b, 'GET', '/api/v1/namespaces', undefined, { token: a.adminToken })).status, 401);
    const crossCert = await kubeRequest(
      { ...b, adminCertData: a.adminCertData, adminKeyData: a.adminKeyData },
      'GET',
      '/api/v1/namespaces',
    ).then(
      (r) => r.status,
      () => 0, // TLS handshake refused
    );
    assert.ok(crossCert === 401 || crossCert === 0, `b answered ${crossCert} to a's client certificate`);
    // b's serving certificate is not trusted with a's CA
    await assert.rejects(
      new Promise((resolve, reject) => {
        https.get(`${b.server}/version`, { ca: a.caData, agent: false }, resolve).on('error', reject);
      }),
      /self[- ]signed|unable to verify|certificate/i,
    );
    // each audit log has only its own requests
    const creates = async (cp: ControlPlane) =>
      (await readAudit(cp))
        .filter((e) => e.verb === 'create' && e.objectRef?.resource === 'namespaces' && e.responseStatus?.code === 201)
        .map((e) => e.requestObject?.metadata?.name);
    const [inA, inB] = [await creates(a), await creates(b)];
    assert.ok(inA.includes('only-in-a') && !inA.includes('only-in-b'), JSON.stringify(inA));
    assert.ok(inB.includes('only-in-b') && !inB.includes('only-in-a'), JSON.stringify(inB));
  });

  test('nothing is left running after down (CLI) or stop()', async () => {
    const infoB = readInfo(b.dir);
    const fpB = footprint(infoB);
    for (const pid of fpB.pids) assert.ok(isAlive(pid));
    assert.ok(await portOpen(infoB.ports.apiserver));
    const r = await cli('down', bName);
    bDown = true;
    assert.equal(r.code, 0, r.stderr);
    await assertGone(fpB);
    assert.equal((await cli('list')).stdout.includes(bName), false);

    const fpA = footprint(readInfo(a.dir));
    for (const pid of fpA.pids) assert.ok(isAlive(pid));
    await a.stop();
    aStopped = true;
    await assertGone(fpA);
  });
});
