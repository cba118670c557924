import assert from 'node:assert/strict';
import { stringify } from 'yaml';
import type { ControlPlane } from '../harness/control-plane.js';
import type { TestApp } from './app.js';
import { request } from './http.js';

/** A kubeconfig for a test control plane with inline credentials: the admin client certificate, or a token. */
export function kubeconfigFor(
  cp: Pick<ControlPlane, 'server' | 'caData' | 'adminCertData' | 'adminKeyData' | 'adminToken'>,
  options: { auth?: 'cert' | 'token'; token?: string; server?: string; context?: string } = {},
): string {
  const context = options.context ?? 'test';
  const user =
    options.auth === 'token' || options.token
      ? { token: options.token ?? cp.adminToken }
      : {
          'client-certificate-data': Buffer.from(cp.adminCertData).toString('base64'),
          'client-key-data': Buffer.from(cp.adminKeyData).toString('base64'),
        };
  return stringify({
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [
      {
        name: context,
        cluster: {
          server: options.server ?? cp.server,
          'certificate-authority-data': Buffer.from(cp.caData).toString('base64'),
        },
      },
    ],
    users: [{ name: context, user }],
    contexts: [{ name: context, context: { cluster: context, user: context } }],
    'current-context': context,
  });
}

/** Registers a cluster through the API and returns its id. */
export async function registerCluster(t: TestApp, adminToken: string, name: string, config: string): Promise<number> {
  const res = await request(t.app, 'POST', '/api/v1/admin/clusters', { token: adminToken, body: { name, config } });
  assert.equal(res.status, 201, `registering cluster ${name}: ${res.text}`);
  return res.body.id;
}
