import https from 'node:https';
import type { ControlPlane } from '../harness/control-plane.js';
import { kubeRequest, waitFor } from '../harness/control-plane.js';

/** The raw body bytes of a GET to the control plane (admin client certificate), for byte-for-byte comparisons. */
export function kubeGetRaw(cp: ControlPlane, path: string): Promise<{ status: number; body: Buffer }> {
  return new Promise((resolve, reject) => {
    const req = https.get(
      new URL(path, cp.server),
      {
        ca: cp.caData,
        cert: cp.adminCertData,
        key: cp.adminKeyData,
        agent: false,
        headers: { accept: 'application/json' },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks) }));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
  });
}

/**
 * A ServiceAccount bound to a ClusterRole (cluster-admin unless `clusterRole` names another) and its
 * token: a cluster identity of its own, so a test can pick exactly its requests out of a shared
 * control plane's audit log, or run the service with exactly that role's permissions. The binding is
 * named `<namespace>-<name>`.
 */
export async function serviceAccountToken(
  cp: ControlPlane,
  namespace: string,
  name: string,
  options: { clusterRole?: string } = {},
): Promise<{ token: string; username: string }> {
  await kubeRequest(cp, 'POST', `/api/v1/namespaces/${namespace}/serviceaccounts`, { metadata: { name } });
  await kubeRequest(cp, 'POST', '/apis/rbac.authorization.k8s.io/v1/clusterrolebindings', {
    metadata: { name: `${namespace}-${name}` },
    roleRef: {
      apiGroup: 'rbac.authorization.k8s.io',
      kind: 'ClusterRole',
      name: options.clusterRole ?? 'cluster-admin',
    },
    subjects: [{ kind: 'ServiceAccount', name, namespace }],
  });
  const token = await waitFor(
    `the token of ServiceAccount ${name}`,
    async () => {
      const secrets = (await kubeRequest(cp, 'GET', `/api/v1/namespaces/${namespace}/secrets`)).body.items as any[];
      const secret = secrets.find(
        (s) =>
          s.type === 'kubernetes.io/service-account-token' &&
          s.metadata.annotations?.['kubernetes.io/service-account.name'] === name,
      );
      return secret?.data?.token ? Buffer.from(secret.data.token, 'base64').toString('utf8') : undefined;
    },
    20_000,
  );
  return { token, username: `system:serviceaccount:${namespace}:${name}` };
}

/**
 * Creates a namespaced custom resource definition with one served version `v1` whose `spec` (and,
 * with `status: true`, a status subresource) takes any fields, and waits until the apiserver serves
 * it at `/apis/<group>/v1/namespaces/<namespace>/<plural>`.
 */
export async function createCrd(
  cp: ControlPlane,
  crd: { group: string; plural: string; kind: string; namespace: string; status?: boolean },
): Promise<void> {
  const anything = { type: 'object', 'x-kubernetes-preserve-unknown-fields': true };
  const created = await kubeRequest(cp, 'POST', '/apis/apiextensions.k8s.io/v1/customresourcedefinitions', {
    metadata: { name: `${crd.plural}.${crd.group}` },
    spec: {
      group: crd.group,
      scope: 'Namespaced',
      names: { plural: crd.plural, singular: crd.kind.toLowerCase(), kind: crd.kind },
      versions: [
        {
          name: 'v1',
          served: true,
          storage: true,
          ...(crd.status ? { subresources: { status: {} } } : {}),
          schema: {
            openAPIV3Schema: {
              type: 'object',
              properties: { spec: anything, ...(crd.status ? { status: anything } : {}) },
            },
          },
        },
      ],
    },
  });
  if (created.status !== 201)
    throw new Error(`creating CRD ${crd.plural}.${crd.group}: ${JSON.stringify(created.body)}`);
  await waitFor(
    `CRD ${crd.plural}.${crd.group} to be served`,
    async () =>
      (await kubeRequest(cp, 'GET', `/apis/${crd.group}/v1/namespaces/${crd.namespace}/${crd.plural}`)).status === 200,
  );
}

/** A pod bound to the test kubelet's node (it never runs: the kubelet only serves its logs and streams). */
export async function podOnNode(cp: ControlPlane, namespace: string, name: string, nodeName: string): Promise<void> {
  const created = await kubeRequest(cp, 'POST', `/api/v1/namespaces/${namespace}/pods`, {
    metadata: { name },
    spec: {
      nodeName,
      automountServiceAccountToken: false, // no wait for the new namespace's ServiceAccount token
      containers: [{ name: 'app', image: 'example.invalid/never-pulled' }],
    },
  });
  if (created.status !== 201) throw new Error(`pod ${namespace}/${name}: ${JSON.stringify(created.body)}`);
}
