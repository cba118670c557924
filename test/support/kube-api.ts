import assert from 'node:assert/strict';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { makeCertificates } from '../harness/certs.js';
import { kubeRequest, sharedControlPlane, type ControlPlane } from '../harness/control-plane.js';
import { startTestApp, type TestApp } from './app.js';
import { kubeconfigFor, registerCluster } from './clusters.js';
import { signedIn } from './factories.js';
import { freePort } from './prometheus.js';

/** The service over TLS (a test CA) with control plane `a` registered, for the Kubernetes API path's tests. */
export interface KubeApiApp {
  cp: ControlPlane;
  t: TestApp;
  /** A temp dir for kubeconfigs and a HOME of kubectl's own; removed by close(). */
  dir: string;
  adminToken: string;
  /** The service's base URL, `https://127.0.0.1:<port>`. */
  base: string;
  /** The CA that signed the service's certificate. */
  caPem: string;
  /** A kubeconfig from POST /api/v1/auth/kubeconfig for this caller. */
  mint(token: string, body?: unknown): Promise<string>;
  close(): Promise<void>;
}

export async function startKubeApiApp(options: {
  cluster: string;
  namespace: string;
  impersonate?: boolean;
  /** More of the service's settings (e.g. CAS_EXEC_RECORDING). */
  env?: Record<string, string>;
}): Promise<KubeApiApp> {
  const cp = await sharedControlPlane('a');
  const dir = await mkdtemp(join(tmpdir(), 'cas-kube-api-'));
  await mkdir(join(dir, 'pki'));
  await mkdir(join(dir, 'home'));
  const pki = await makeCertificates(join(dir, 'pki'), 'kube-api');
  const port = await freePort();
  const base = `https://127.0.0.1:${port}`;
  const t = await startTestApp({
    env: {
      CAS_TLS_CERT_FILE: pki.serverCert,
      CAS_TLS_KEY_FILE: pki.serverKey,
      CAS_PUBLIC_URL: base,
      CAS_PUBLIC_CA_FILE: pki.caCert,
      ...options.env,
    },
  });
  const close = async () => {
    await kubeRequest(cp, 'DELETE', `/api/v1/namespaces/${options.namespace}`).catch(() => undefined);
    await t.close();
    await rm(dir, { recursive: true, force: true });
  };
  try {
    await t.app.listen({ port, host: '127.0.0.1' });
    const adminToken = (await signedIn(t, 'admin')).token;
    await registerCluster(t, adminToken, options.cluster, kubeconfigFor(cp));
    if (options.impersonate) {
      const clusters = await t.app.inject({
        method: 'GET',
        url: '/api/v1/admin/clusters',
        headers: { authorization: `Bearer ${adminToken}` },
      });
      const id = (JSON.parse(clusters.body) as Array<{ id: number; name: string }>).find(
        (c) => c.name === options.cluster,
      )!.id;
      const res = await t.app.inject({
        method: 'PUT',
        url: `/api/v1/admin/clusters/${id}`,
        headers: { authorization: `Bearer ${adminToken}`, 'content-type': 'application/json' },
        payload: JSON.stringify({ impersonate: true }),
      });
      assert.equal(res.statusCode, 200, res.body);
    }
    await kubeRequest(cp, 'POST', '/api/v1/namespaces', { metadata: { name: options.namespace } });
    const { readFile } = await import('node:fs/promises');
    const caPem = await readFile(pki.caCert, 'utf8');
    const mint = async (token: string, body: unknown = {}) => {
      const res = await t.app.inject({
        method: 'POST',
        url: '/api/v1/auth/kubeconfig',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        payload: JSON.stringify(body),
      });
      assert.equal(res.statusCode, 201, res.body);
      return res.body;
    };
    return { cp, t, dir, adminToken, base, caPem, mint, close };
  } catch (error) {
    await close();
    throw error;
  }
}
