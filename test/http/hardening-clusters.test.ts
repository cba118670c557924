// Issue 9, findings 9 and 14: a server that is not Kubernetes gives 502 naming the cluster (never a
// 500); link-local and metadata addresses are refused; stored errors are short classes.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { makeCertificates, type CertFiles } from '../harness/certs.js';
import { startTestApp, type TestApp } from '../support/app.js';
import { registerCluster } from '../support/clusters.js';
import { signedIn } from '../support/factories.js';
import { request } from '../support/http.js';
import { b64, kubeconfigYaml } from '../support/kubeconfigs.js';

/** An HTTPS server that answers every path from a table, like a web server that is not an API server. */
async function notKubernetes(
  files: CertFiles,
  answers: Record<string, string>,
): Promise<{ server: Server; url: string; hits: string[] }> {
  const hits: string[] = [];
  const server = createServer(
    { cert: await readFile(files.serverCert), key: await readFile(files.serverKey) },
    (req, res) => {
      hits.push(req.url ?? '');
      const body = answers[req.url ?? ''] ?? answers['*'] ?? '{}';
      res.writeHead(200, { 'content-type': 'application/json' }).end(body);
    },
  );
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, url: `https://127.0.0.1:${(server.address() as AddressInfo).port}`, hits };
}

describe('clusters that are not what they claim (findings 9 and 14)', () => {
  let t: TestApp;
  let token: string;
  let dir: string;
  let files: CertFiles;
  let otherCa: string;
  const servers: Server[] = [];
  const kubeconfig = (server: string, ca: string) =>
    kubeconfigYaml([
      { name: 'ctx', cluster: { server, 'certificate-authority-data': b64(ca) }, user: { token: 'a-token' } },
    ]);

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'cas-notkube-'));
    files = await makeCertificates(join(dir), 'notkube');
    const other = await mkdtemp(join(dir, 'other-'));
    otherCa = await readFile((await makeCertificates(other, 'other')).caCert, 'utf8');
    t = await startTestApp({ env: { CAS_CLUSTER_HEALTH_INTERVAL_SECONDS: '0' } });
    token = (await signedIn(t, 'admin')).token;
  });
  after(async () => {
    for (const s of servers) s.close();
    await t.close();
    await rm(dir, { recursive: true, force: true });
  });

  const ca = () => readFile(files.caCert, 'utf8');

  test('finding 9: discovery answered by something else is a 502 naming the cluster', async () => {
    const cases: Array<[string, Record<string, string>]> = [
      ['empty-object', { '*': '{}' }],
      ['not-json', { '*': '<html>hello</html>' }],
      ['versions-not-a-list', { '/api': '{"versions":"v1"}' }],
      [
        'odd-group',
        { '/api': '{"versions":["v1"]}', '/apis': '{"groups":[{"name":"../../x","preferredVersion":{}}]}' },
      ],
      ['null', { '*': 'null' }],
    ];
    for (const [name, answers] of cases) {
      const fake = await notKubernetes(files, answers);
      servers.push(fake.server);
      await registerCluster(t, token, name, kubeconfig(fake.url, await ca()));
      const res = await request(t.app, 'GET', '/api/v1/configmaps/default', {
        token,
        headers: { 'x-cluster-name': name },
      });
      assert.equal(res.status, 502, `${name}: ${res.text}`);
      assert.match(res.body.message, new RegExp(`cluster '${name}'`));
      assert.equal(res.body.requestId, res.headers['x-request-id']);
    }
  });

  test("finding 14: the stored error is a short class, never the socket's or TLS library's message", async () => {
    const fake = await notKubernetes(files, { '/version': '{"gitVersion":"v1.20.2"}' });
    servers.push(fake.server);
    await registerCluster(t, token, 'wrong-ca', kubeconfig(fake.url, otherCa));
    await registerCluster(t, token, 'no-version', kubeconfig(fake.url.replace('127.0.0.1', 'localhost'), await ca()));
    const list = (await request(t.app, 'GET', '/api/v1/admin/clusters', { token })).body as Array<{
      name: string;
      status: string;
      error: string | null;
    }>;
    const byName = (n: string) => list.find((c) => c.name === n)!;
    assert.deepEqual(
      { status: byName('wrong-ca').status, error: byName('wrong-ca').error },
      { status: 'error', error: 'TLS: certificate not trusted' },
    );
    // A host name that resolves to loopback is allowed (local clusters listen there).
    assert.equal(byName('no-version').status, 'ok', JSON.stringify(byName('no-version')));
    for (const c of list) assert.doesNotMatch(String(c.error), /127\.0\.0\.1|:\d{4,5}|self.signed|issuer/i, c.name);
  });

  test('finding 14: link-local and metadata addresses are refused with a 400 naming the setting; nothing stored', async () => {
    const before = (await request(t.app, 'GET', '/api/v1/admin/clusters', { token })).body.length;
    for (const server of [
      'https://169.254.169.254',
      'https://169.254.10.1:6443',
      'https://[fe80::1]:6443',
      'https://[fd00:ec2::254]',
      'https://[::ffff:169.254.169.254]',
    ]) {
      const res = await request(t.app, 'POST', '/api/v1/admin/clusters', {
        token,
        body: { name: `meta-${before}`, config: kubeconfig(server, await ca()) },
      });
      assert.equal(res.status, 400, `${server}: ${res.text}`);
      assert.match(String(res.body.message), /link-local|metadata/);
      assert.match(String(res.body.message), /CAS_CLUSTER_ALLOW_LINK_LOCAL/);
    }
    assert.equal((await request(t.app, 'GET', '/api/v1/admin/clusters', { token })).body.length, before);
  });

  test('finding 14: a cluster stored while link-local was allowed is refused once the setting is off, before connecting', async () => {
    const shared = {
      CAS_ENCRYPTION_KEY: randomBytes(32).toString('base64'),
      CAS_CLUSTER_HEALTH_INTERVAL_SECONDS: '0',
      CAS_CLUSTER_PROBE_TIMEOUT_MS: '300',
    };
    const allowing = await startTestApp({ env: { ...shared, CAS_CLUSTER_ALLOW_LINK_LOCAL: 'true' } });
    let refusing: TestApp | undefined;
    try {
      const admin = (await signedIn(allowing, 'admin')).token;
      await registerCluster(allowing, admin, 'was-allowed', kubeconfig('https://169.254.169.254', await ca()));
      refusing = await startTestApp({ databaseUrl: allowing.databaseUrl, env: shared });
      const res = await request(refusing.app, 'GET', '/api/v1/configmaps/default', {
        token: admin,
        headers: { 'x-cluster-name': 'was-allowed' },
      });
      assert.equal(res.status, 502, res.text);
      assert.match(String(res.body.message), /refused: the server is at a link-local or cloud metadata address/);
    } finally {
      await refusing?.close();
      await allowing.close();
    }
  });
});
