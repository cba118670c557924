/**
 * The examples Swagger UI shows and sends, one per request body (and per content type of a patch), and one
 * per error status. `completeDocument()` puts them into the document; test/e2e/openapi-examples.test.ts sends
 * every request example to the service and expects it accepted, so an example that the service would refuse
 * fails a test instead of misleading a reader.
 */

/** A self-signed certificate standing in for a cluster's CA (nothing trusts it). */
const EXAMPLE_CA_DATA =
  'LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUJnakNDQVNlZ0F3SUJBZ0lVZEM5TzNqYnZWRndraHBxR2FneGRUM0p0dDFFd0NnWUlLb1pJemowRUF3SXcKRlRFVE1CRUdBMVVFQXd3S2EzVmlaWEp1WlhSbGN6QWdGdzB5TmpFeE1qVXhNREk0TWpSYUdBOHlNVEkyTVRFdwpNVEV3TWpneU5Gb3dGVEVUTUJFR0ExVUVBd3dLYTNWaVpYSnVaWFJsY3pCWk1CTUdCeXFHU000OUFnRUdDQ3FHClNNNDlBd0VIQTBJQUJNRXNwR0gwempSdzZiOFdaeUJFMHZRckcyMzNIakFFRUpQdHQxZ2Z6UU1yallVWW9EdEwKU29GdEg5d3JWaVFzNHAwZjBvSEkvb3NrM0c0SEEyOVpWSGlqVXpCUk1CMEdBMVVkRGdRV0JCUmR6b1NIOGFaVAp5R1NwcG5XVkIvMUhkeXNva3pBZkJnTlZIU01FR0RBV2dCUmR6b1NIOGFaVHlHU3BwbldWQi8xSGR5c29rekFQCkJnTlZIUk1CQWY4RUJUQURBUUgvTUFvR0NDcUdTTTQ5QkFNQ0Ewa0FNRVlDSVFDVlV6aVp1c1h2RW1rdmdMbmcKYXE5b1NGTlZMSjliaFI2TkZtKzZyMm1TWHdJaEFJRnNEc2d6Z3RXTlRoNFJMOXRQd2F2elJIOU1SN01MUWZYMAoveUF1RGVZVgotLS0tLUVORCBDRVJUSUZJQ0FURS0tLS0tCg==';

/** A kubeconfig of one context, as `kubectl config view --minify --flatten` prints it, with a token. */
function exampleKubeconfig(context: string): string {
  return [
    'apiVersion: v1',
    'kind: Config',
    `current-context: ${context}`,
    'clusters:',
    `  - name: ${context}`,
    '    cluster:',
    '      server: https://127.0.0.1:6443',
    `      certificate-authority-data: ${EXAMPLE_CA_DATA}`,
    'users:',
    `  - name: ${context}-admin`,
    '    user:',
    '      token: replace-with-a-service-account-token',
    'contexts:',
    `  - name: ${context}`,
    '    context:',
    `      cluster: ${context}`,
    `      user: ${context}-admin`,
    '',
  ].join('\n');
}

/** The cluster the resource examples name in `x-cluster-name` (created by the `createCluster` example). */
export const EXAMPLE_CLUSTER = 'production';
const PASSWORD = 'change-this-password';

/** Kubernetes' patch content types, each with the `patchType` it stands for (absent: strategic merge). */
export const PATCH_CONTENT_TYPES = {
  // First: generators that pick one content type (@hey-api) then type the body as either kind of patch.
  'application/json': undefined,
  'application/strategic-merge-patch+json': undefined,
  'application/merge-patch+json': 'merge',
  'application/json-patch+json': 'json',
  'application/apply-patch+yaml': 'apply',
} as const;
export type PatchContentType = keyof typeof PATCH_CONTENT_TYPES;

/** Examples of a patch body, per content type. */
function patchExamples(merge: object, jsonPatch: object[], applied: object): Record<PatchContentType, unknown> {
  return {
    'application/json': merge,
    'application/strategic-merge-patch+json': merge,
    'application/merge-patch+json': merge,
    'application/json-patch+json': jsonPatch,
    'application/apply-patch+yaml': applied,
  };
}

/** The request body example of each operation that takes a body, by operationId. */
export const REQUEST_EXAMPLES: Record<string, unknown> = {
  createSuperUser: { username: 'admin', password: PASSWORD, name: 'Administrator' },
  login: { username: 'admin', password: PASSWORD },
  createUser: { username: 'alice', password: 'alice-long-password', name: 'Alice Example' },
  updateUser: { name: 'Alice Example', avatar_url: 'https://example.com/alice.png' },
  resetUserPassword: { password: 'alice-new-long-password' },
  setUserEnabled: { enabled: false },
  setUserRoles: { roles: ['viewer', 'shop-dev'] },
  createRole: {
    name: 'shop-dev',
    description: 'Developers of the shop',
    rules: [
      {
        clusters: [EXAMPLE_CLUSTER],
        namespaces: ['shop'],
        resources: ['deployments.apps', 'pods'],
        verbs: ['get', 'list', 'watch', 'patch'],
      },
    ],
  },
  updateRole: {
    description: 'Developers of the shop, read only',
    rules: [{ clusters: [EXAMPLE_CLUSTER], namespaces: ['shop'], resources: ['*'], verbs: ['get', 'list', 'watch'] }],
  },
  createApiKey: { name: 'ci-deployer', roles: ['viewer'] },
  createOwnApiKey: { name: 'my-laptop', roles: ['viewer'] },
  checkPermission: { cluster: EXAMPLE_CLUSTER, resource: 'deployments.apps', namespace: 'shop', verb: 'patch' },
  importClusters: { config: exampleKubeconfig('staging') },
  createCluster: {
    name: EXAMPLE_CLUSTER,
    description: 'The production cluster',
    config: exampleKubeconfig(EXAMPLE_CLUSTER),
  },
  updateCluster: { description: 'The production cluster, EU region', isDefault: true },
  createKubeconfig: { clusters: [EXAMPLE_CLUSTER], expiresInSeconds: 28800 },
  createResource: { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'my-config' }, data: { greeting: 'hello' } },
  replaceResource: {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { name: 'my-config', resourceVersion: '12345' },
    data: { greeting: 'hello again' },
  },
  patchResource: patchExamples({ data: { greeting: 'hi' } }, [{ op: 'replace', path: '/data/greeting', value: 'hi' }], {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { name: 'my-config' },
    data: { greeting: 'hi' },
  }),
  replaceSubresource: {
    apiVersion: 'autoscaling/v1',
    kind: 'Scale',
    // The cluster wants the namespace in a Scale's body (the service fills it in only for whole objects).
    metadata: { name: 'web', namespace: 'default', resourceVersion: '12345' },
    spec: { replicas: 3 },
  },
  applyResources: {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { name: 'shop-settings', namespace: 'default' },
    data: { mode: 'fast' },
  },
  installHelmRelease: {
    name: 'web',
    chart: 'nginx',
    version: '18.2.0',
    repo: 'https://charts.bitnami.com/bitnami',
    values: { replicaCount: 2 },
    dryRun: true,
  },
  upgradeHelmRelease: { values: { replicaCount: 3 }, reuseValues: true, dryRun: true },
  rollbackHelmRelease: { revision: 1, dryRun: true },
  debugPod: { image: 'busybox:1.36', target: 'app' },
  patchSubresource: patchExamples({ spec: { replicas: 2 } }, [{ op: 'replace', path: '/spec/replicas', value: 2 }], {
    apiVersion: 'autoscaling/v1',
    kind: 'Scale',
    metadata: { name: 'web' },
    spec: { replicas: 2 },
  }),
};

/** A chart archive body's example (`application/gzip`): what it stands for, as Swagger UI cannot build one. */
export const REQUEST_ARCHIVE_EXAMPLE = '(the .tgz that `helm package` writes)';

/** A YAML request body's example, by operationId (a YAML stream: what a console's editor or an import sends). */
export const REQUEST_YAML_EXAMPLES: Record<string, string> = {
  applyResources: [
    'apiVersion: v1',
    'kind: ConfigMap',
    'metadata:',
    '  name: shop-settings',
    '  namespace: default',
    'data:',
    '  mode: fast',
    '---',
    'apiVersion: apps/v1',
    'kind: Deployment',
    'metadata:',
    '  name: shop-web',
    '  namespace: default',
    'spec:',
    '  replicas: 2',
    '  selector:',
    '    matchLabels: {app: shop-web}',
    '  template:',
    '    metadata:',
    '      labels: {app: shop-web}',
    '    spec:',
    '      containers:',
    '        - name: web',
    '          image: registry.example.com/shop/web:1.4.2',
    '',
  ].join('\n'),
};

/** A ConfigMap as a cluster answers with it (the resource routes' path examples name it). */
const CONFIG_MAP = {
  apiVersion: 'v1',
  kind: 'ConfigMap',
  metadata: {
    name: 'my-config',
    namespace: 'default',
    uid: '0d5e3c1a-7b2f-4c8e-9a61-3f0b2d4e5a6c',
    resourceVersion: '48213',
    creationTimestamp: '2026-01-15T09:30:00Z',
  },
  data: { greeting: 'hi' },
};
/** A Deployment's Scale, as the subresource examples name it. */
const SCALE = {
  apiVersion: 'autoscaling/v1',
  kind: 'Scale',
  metadata: {
    name: 'web',
    namespace: 'default',
    uid: '5b7c9d1e-2f4a-4b6c-8d0e-1a3c5e7f9b2d',
    resourceVersion: '48350',
    creationTimestamp: '2026-01-15T09:31:00Z',
  },
  spec: { replicas: 2 },
  status: { replicas: 2, selector: 'app=web' },
};

/** The success answer's example of resource operations, by operationId (others show their schema's). */
export const RESPONSE_EXAMPLES: Record<string, unknown> = {
  listResources: {
    apiVersion: 'v1',
    kind: 'ConfigMapList',
    metadata: { resourceVersion: '48213' },
    items: [CONFIG_MAP],
  },
  getResource: CONFIG_MAP,
  createResource: CONFIG_MAP,
  replaceResource: CONFIG_MAP,
  patchResource: CONFIG_MAP,
  getSubresource: SCALE,
  replaceSubresource: SCALE,
  patchSubresource: SCALE,
  debugPod: {
    name: 'debugger-x7k2p',
    image: 'busybox:1.36',
    target: 'app',
    pod: 'web-0',
    namespace: 'default',
    cluster: EXAMPLE_CLUSTER,
    api: 'EphemeralContainers',
    attach: '/api/v1/pods/default/web-0/attach?container=debugger-x7k2p&stdin=true&stdout=true&tty=true',
  },
  applyResources: {
    results: [
      {
        apiVersion: 'v1',
        kind: 'ConfigMap',
        namespace: 'default',
        name: 'shop-settings',
        action: 'configured',
        diff: '--- a/default/configmaps/shop-settings\n+++ b/default/configmaps/shop-settings\n@@ -5,3 +5,3 @@\n   namespace: default\n data:\n-  mode: slow\n+  mode: fast\n',
        conflicts: [],
        status: null,
      },
      {
        apiVersion: 'apps/v1',
        kind: 'Deployment',
        namespace: 'default',
        name: 'shop-web',
        action: 'conflict',
        diff: '',
        conflicts: [{ manager: 'kubectl', field: '.spec.replicas', message: 'conflict with "kubectl"' }],
        status: {
          kind: 'Status',
          apiVersion: 'v1',
          metadata: {},
          status: 'Failure',
          message: 'Apply failed with 1 conflict: conflict with "kubectl": .spec.replicas',
          reason: 'Conflict',
          details: {
            causes: [{ reason: 'FieldManagerConflict', message: 'conflict with "kubectl"', field: '.spec.replicas' }],
          },
          code: 409,
        },
      },
    ],
  },
};

/** Path parameter examples that differ from the ones the resource routes share, by operationId. */
export const PARAMETER_EXAMPLES: Record<string, Record<string, string>> = {
  getSubresource: { resource: 'deployments.apps', name: 'web', subresource: 'scale' },
  replaceSubresource: { resource: 'deployments.apps', name: 'web', subresource: 'scale' },
  patchSubresource: { resource: 'deployments.apps', name: 'web', subresource: 'scale' },
};

/** What the service says for each error status, as an example of its error body. */
const ERROR_EXAMPLE_MESSAGES: Record<number, { error: string; message: string | string[] }> = {
  400: { error: 'Bad Request', message: ['property colour should not exist'] },
  401: { error: 'Unauthorized', message: 'authentication required' },
  403: { error: 'Forbidden', message: 'this route needs the admin role' },
  404: { error: 'Not Found', message: "cluster 'production' not found" },
  406: { error: 'Not Acceptable', message: 'Accept names none of application/json, application/yaml' },
  409: { error: 'Conflict', message: "a cluster named 'production' already exists" },
  410: { error: 'Gone', message: "session 'r1.x7k2' expired: resumable for 60 s (CAS_SESSION_RESUME_SECONDS)" },
  413: { error: 'Payload Too Large', message: 'request body is larger than 1048576 bytes' },
  414: { error: 'URI Too Long', message: 'a path segment is longer than 253 characters' },
  415: { error: 'Unsupported Media Type', message: "Unsupported Media Type: 'text/plain'" },
  422: { error: 'Unprocessable Entity', message: 'the object was refused' },
  429: { error: 'Too Many Requests', message: 'too many failed logins; try again in 60 s' },
  502: { error: 'Bad Gateway', message: "cluster 'production' could not be reached: ECONNREFUSED" },
  503: { error: 'Service Unavailable', message: 'the service is shutting down' },
  504: { error: 'Gateway Timeout', message: "cluster 'production' did not answer within 30 s" },
};

/** An example of the service's error body with this status. */
export function errorExample(status: number) {
  const known = ERROR_EXAMPLE_MESSAGES[status];
  if (!known) return undefined;
  return { statusCode: status, ...known, requestId: '7f9c2ba4-e88f-4b0e-9c3d-5f1a2b3c4d5e' };
}

/** A cluster's own refusal, as resource routes pass it through (`default`: any other status). */
export const CLUSTER_STATUS_EXAMPLE = {
  kind: 'Status',
  apiVersion: 'v1',
  metadata: {},
  status: 'Failure',
  message:
    'the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml',
  reason: 'UnsupportedMediaType',
  code: 415,
};
