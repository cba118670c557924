import assert from 'node:assert/strict';
import type { TestApp } from './app.js';
import { request } from './http.js';
import { contextFor, kubeconfigYaml, type Credentials } from './kubeconfigs.js';

/** A kubeconfig for a test control plane with inline credentials: the admin client certificate (default), or a token. */
export function kubeconfigFor(
  cp: Credentials,
  options: { auth?: 'cert' | 'token'; token?: string; server?: string; context?: string } = {},
): string {
  const auth = options.auth ?? (options.token ? 'token' : 'cert');
  return kubeconfigYaml([
    contextFor(cp, { name: options.context, auth, token: options.token, server: options.server }),
  ]);
}

/** Registers a cluster through the API and returns its id. */
export async function registerCluster(t: TestApp, adminToken: string, name: string, config: string): Promise<number> {
  const res = await request(t.app, 'POST', '/api/v1/admin/clusters', { token: adminToken, body: { name, config } });
  assert.equal(res.status, 201, `registering cluster ${name}: ${res.text}`);
  return res.body.id;
}
