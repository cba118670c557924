import type { AddressInfo } from 'node:net';
import { kubeRequest, sharedControlPlane, type ControlPlane } from '../harness/control-plane.js';
import { startTestApp, type TestApp } from './app.js';
import { kubeconfigFor, registerCluster } from './clusters.js';
import { signedIn } from './factories.js';

/** What a test of the cluster routes starts from: see startClusterApp. */
export interface ClusterApp {
  cp: ControlPlane;
  t: TestApp;
  /** A signed-in admin's bearer token. */
  admin: string;
  /** A signed-in viewer's bearer token (`viewer: true`), or ''. */
  viewer: string;
  /** The app's URL (`listen: true`), or ''. */
  base: string;
}

/**
 * The set-up most tests of the cluster routes share: the shared control plane `a`, a fresh app
 * (with `env`), a signed-in admin (and viewer), the control plane registered under `cluster` with its
 * admin certificate, and `namespace` created in it. The test removes the namespace and closes the app
 * in its own `after`; if the set-up fails half-way, the app is closed here.
 */
export async function startClusterApp(options: {
  cluster: string;
  namespace?: string;
  viewer?: boolean;
  listen?: boolean;
  env?: Record<string, string>;
}): Promise<ClusterApp> {
  const cp = await sharedControlPlane('a');
  const t = await startTestApp({ env: options.env });
  try {
    let base = '';
    if (options.listen) {
      await t.app.listen({ port: 0, host: '127.0.0.1' });
      base = `http://127.0.0.1:${(t.app.getHttpServer().address() as AddressInfo).port}`;
    }
    const admin = (await signedIn(t, 'admin')).token;
    const viewer = options.viewer ? (await signedIn(t, 'viewer')).token : '';
    await registerCluster(t, admin, options.cluster, kubeconfigFor(cp));
    if (options.namespace) {
      await kubeRequest(cp, 'POST', '/api/v1/namespaces', { metadata: { name: options.namespace } });
    }
    return { cp, t, admin, viewer, base };
  } catch (error) {
    await t.close(); // the test's `after` never got the app to close
    throw error;
  }
}
