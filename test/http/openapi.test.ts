import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { after, before, describe, test } from 'node:test';
import { startTestApp, type TestApp } from '../support/app.js';
import { signedIn } from '../support/factories.js';
import { client, request } from '../support/http.js';
import { ContractValidator } from '../support/openapi-validator.js';

/** The first routes' operation ids: generated clients name their methods after these, so they are kept. */
const CORE_OPERATION_IDS = [
  'createSuperUser',
  'listUsers',
  'createUser',
  'updateUser',
  'deleteUser',
  'resetUserPassword',
  'setUserEnabled',
  'setUserRoles',
  'listRoles',
  'login',
  'logout',
  'getCurrentUser',
  'listApiKeys',
  'createApiKey',
  'deleteApiKey',
  'listClusters',
  'createCluster',
  'updateCluster',
  'deleteCluster',
  'importClusters',
  'listAvailableClusters',
  'listResources',
  'getResource',
  'createResource',
  'replaceResource',
  'patchResource',
  'deleteResource',
  'listAuditEvents',
  'listObjectEvents',
];
const HEALTH_OPERATION_IDS = ['getHealth', 'getReadiness'];
/** Issue 14: queries of each cluster's Prometheus. */
const METRICS_OPERATION_IDS = [
  'queryMetrics',
  'queryMetricsRange',
  'listMetricSeries',
  'listMetricLabels',
  'listMetricLabelValues',
  'getPodMetrics',
  'getNodeMetrics',
];
/** Issue 12: roles with rules, keys owned by users, what a caller may do. */
const ACCESS_OPERATION_IDS = [
  'createRole',
  'getRole',
  'updateRole',
  'deleteRole',
  'listOwnApiKeys',
  'createOwnApiKey',
  'deleteOwnApiKey',
  'getMyPermissions',
  'checkPermission',
  // Issue 34: one key.
  'getApiKey',
  'getOwnApiKey',
  // Issue 39: the namespaces a caller can reach on a cluster.
  'listClusterNamespaces',
];
/** Single sign-on (issue 15): public by nature. */
const SSO_OPERATION_IDS = ['listAuthProviders', 'startOidcLogin', 'completeOidcLogin'];
/** Issue 13: pod logs, what a cluster serves, subresources. */
const CONSOLE_OPERATION_IDS = [
  'getPodLog',
  'searchResources',
  'listApiResources',
  'getApiResourceSchema',
  'getSubresource',
  'replaceSubresource',
  'patchSubresource',
];
/** Issue 31: the terminal's WebSocket upgrades and the recordings of its sessions. */
const TERMINAL_OPERATION_IDS = ['execPod', 'attachPod', 'portForwardPod', 'getAuditRecording', 'debugPod', 'nodeShell'];
/** One user and one cluster by id, beside their PUT and DELETE. */
const SINGLE_GET_OPERATION_IDS = ['getUser', 'getCluster'];
/** The Kubernetes API path (one passthrough operation per method) and its kubeconfigs. */
const KUBE_OPERATION_IDS = [
  'getKubernetesApi',
  'postKubernetesApi',
  'putKubernetesApi',
  'patchKubernetesApi',
  'deleteKubernetesApi',
  'createKubeconfig',
];
/** Issue 33: multi-document server-side apply. */
const APPLY_OPERATION_IDS = ['applyResources'];
const HELM_OPERATION_IDS = [
  'listHelmReleases',
  'getHelmRelease',
  'getHelmReleaseRevision',
  'listHelmReleaseHistory',
  'diffHelmRelease',
  'installHelmRelease',
  'upgradeHelmRelease',
  'rollbackHelmRelease',
  'uninstallHelmRelease',
];
const PUBLIC_OPERATIONS = new Set(['createSuperUser', 'login', ...HEALTH_OPERATION_IDS, ...SSO_OPERATION_IDS]);

describe('OpenAPI document', () => {
  let t: TestApp;
  let served: any;
  before(async () => {
    t = await startTestApp();
    const res = await request(t.app, 'GET', '/api/docs/openapi.json');
    assert.equal(res.status, 200);
    served = res.body;
  });
  after(() => t.close());

  test('the committed openapi.json equals the served document (regenerate with `npm run openapi`)', async () => {
    const committed = JSON.parse(await readFile(new URL('../../../openapi.json', import.meta.url), 'utf8'));
    assert.deepEqual(served, committed);
  });

  test('every operation: a known operationId (unique), a tag, security unless public, documented errors', () => {
    assert.match(served.openapi, /^3\./);
    const ids: string[] = [];
    for (const [path, item] of Object.entries<any>(served.paths)) {
      for (const [method, op] of Object.entries<any>(item)) {
        const label = `${method.toUpperCase()} ${path}`;
        ids.push(op.operationId);
        assert.ok(
          [
            ...CORE_OPERATION_IDS,
            ...HEALTH_OPERATION_IDS,
            ...METRICS_OPERATION_IDS,
            ...ACCESS_OPERATION_IDS,
            ...SSO_OPERATION_IDS,
            ...CONSOLE_OPERATION_IDS,
            ...SINGLE_GET_OPERATION_IDS,
            ...KUBE_OPERATION_IDS,
            ...APPLY_OPERATION_IDS,
            ...HELM_OPERATION_IDS,
            ...TERMINAL_OPERATION_IDS,
          ].includes(op.operationId),
          `${label}: ${op.operationId}`,
        );
        assert.ok(op.tags?.length > 0, `${label} has a tag`);
        const codes = Object.keys(op.responses);
        assert.ok(
          codes.some((c) => /^2/.test(c) || (c === '302' && SSO_OPERATION_IDS.includes(op.operationId))),
          `${label} documents success`,
        );
        if (PUBLIC_OPERATIONS.has(op.operationId)) {
          assert.deepEqual(op.security, [], `${label} is public: security []`);
        } else {
          // Alternatives, one requirement object each, so a client sends one credential.
          // The Kubernetes API path takes `Authorization` only: no session cookie.
          const alternatives = path.startsWith('/api/v1/clusters/{name}/k8s/')
            ? [{ apiKey: [] }, { bearer: [] }]
            : [{ apiKey: [] }, { bearer: [] }, { session: [] }];
          if (op.operationId === 'importClusters') alternatives.push({} as any); // public until the first user
          assert.deepEqual(op.security, alternatives, `${label} security`);
          assert.ok(codes.includes('401') && codes.includes('403'), `${label} documents 401 and 403`);
        }
        if (op.operationId !== 'getHealth' && op.operationId !== 'listAuthProviders') {
          assert.ok(
            codes.some((c) => /^[45]/.test(c)),
            `${label} documents its errors`,
          );
        }
        if (['post', 'put', 'patch'].includes(method) && op.operationId !== 'logout') {
          assert.ok(op.requestBody, `${label} documents its body`);
        }
      }
    }
    assert.equal(new Set(ids).size, ids.length, 'operationIds are unique');
    for (const id of [...CORE_OPERATION_IDS, ...ACCESS_OPERATION_IDS, ...SINGLE_GET_OPERATION_IDS])
      assert.ok(ids.includes(id), `missing ${id}`);
    for (const scheme of ['apiKey', 'bearer', 'session']) assert.ok(served.components.securitySchemes[scheme], scheme);
  });

  test('request schemas carry the validation rules', () => {
    const create = served.components.schemas.CreateUserDto;
    assert.deepEqual(create.required.sort(), ['password', 'username']);
    assert.equal(create.properties.username.minLength, 3);
    assert.equal(create.properties.username.maxLength, 64);
    assert.equal(create.properties.password.minLength, 8);
    const list = served.paths['/api/v1/admin/users']?.get ?? served.paths['/api/v1/admin/users/']?.get;
    const names = list.parameters.map((p: { name: string }) => p.name).sort();
    assert.deepEqual(names, ['page', 'role', 'search', 'size', 'sortBy', 'sortOrder']);
  });

  test('pod logs are documented as a text/plain stream; subresources name the ones served', () => {
    const log = served.paths['/api/v1/pods/{namespace}/{name}/log'].get;
    assert.deepEqual(Object.keys(log.responses['200'].content), ['text/plain']);
    const sub = served.paths['/api/v1/{resource}/{namespace}/{name}/{subresource}'];
    assert.deepEqual(Object.keys(sub).sort(), ['get', 'patch', 'put']);
    const param = sub.get.parameters.find((p: { name: string }) => p.name === 'subresource');
    assert.deepEqual(param.schema.enum, ['scale', 'status']);
  });

  test('servers, tags with descriptions, a description on every operation, opaque bearer tokens', () => {
    assert.ok(served.servers?.length > 0, 'servers is not empty');
    const tags = new Map<string, string>(served.tags.map((t: any) => [t.name, t.description]));
    for (const { label, op } of operations(served)) {
      for (const tag of op.tags) assert.ok(tags.get(tag), `${label}: tag ${tag} is declared with a description`);
      assert.ok(op.description?.trim(), `${label} has a description`);
    }
    assert.equal(served.components.securitySchemes.bearer.bearerFormat, undefined, 'tokens are opaque, not JWTs');
    for (const scheme of Object.values<any>(served.components.securitySchemes)) {
      assert.match(scheme.description, /Authorization/, 'each scheme states the precedence');
    }
  });

  test('integers are integers: ids, page, size, limit; no `number` the service does not mean', () => {
    const numbers: string[] = [];
    walk(served, (node, at) => {
      // `format: double` marks a value that really is fractional (CPU cores in a usage series).
      if (node.type === 'number' && node.format !== 'double' && !at.endsWith('/responseTime')) numbers.push(at);
    });
    assert.deepEqual(numbers, [], 'no `type: number` left (ids, counts and sizes are integers)');
    const param = (path: string, method: string, name: string) =>
      served.paths[path][method].parameters.find((p: any) => p.name === name).schema;
    assert.deepEqual(param('/api/v1/admin/users/{id}', 'put', 'id'), {
      type: 'integer',
      minimum: 1,
      maximum: 2_147_483_647,
    });
    assert.equal(param('/api/v1/admin/users', 'get', 'page').type, 'integer');
    assert.equal(param('/api/v1/admin/users', 'get', 'size').maximum, 100);
    assert.equal(param('/api/v1/{resource}/{namespace}', 'get', 'limit').type, 'integer');
    for (const flag of ['force', 'cascade', 'wait']) {
      assert.equal(param('/api/v1/{resource}/{namespace}/{name}', 'delete', flag).type, 'boolean', flag);
    }
  });

  test('request bodies: optional properties carry no default (generators would make them required)', () => {
    for (const { label, op } of operations(served)) {
      const ref = op.requestBody?.content?.['application/json']?.schema?.$ref;
      if (!ref) continue;
      const schema = served.components.schemas[ref.split('/').pop()];
      for (const [name, property] of Object.entries<any>(schema.properties ?? {})) {
        assert.equal(property.default, undefined, `${label}: ${name} has no default`);
      }
    }
    const contract = new ContractValidator(served);
    const accepts = (schemaName: string, value: unknown) =>
      (contract as any).validatorOf({ $ref: `#/components/schemas/${schemaName}` })(value);
    assert.ok(accepts('UpdateUserDto', { avatar_url: '' }), 'avatar_url "" (clears it) is allowed');
    assert.ok(accepts('UpdateUserDto', { avatar_url: 'HTTPS://example.com/a.png' }));
    assert.ok(!accepts('UpdateUserDto', { avatar_url: 'ftp://example.com/a.png' }));
    assert.ok(accepts('UpdateClusterDto', { metricsURL: '' }), 'metricsURL "" is allowed');
    assert.ok(accepts('LivenessDto', { status: 'ok' }) && !accepts('LivenessDto', {}), 'LivenessDto has its status');
  });

  test('every response declares x-request-id; 429 Retry-After; login Set-Cookie; bodies 400/413/415; login 401', () => {
    for (const { label, method, op } of operations(served)) {
      for (const [code, response] of Object.entries<any>(op.responses)) {
        assert.ok(response.headers?.['x-request-id'], `${label} ${code} declares x-request-id`);
        if (code === '429') assert.ok(response.headers['Retry-After'], `${label} 429 declares Retry-After`);
      }
      if (['post', 'put', 'patch', 'delete'].includes(method)) {
        for (const code of ['400', '413', '415']) assert.ok(op.responses[code], `${label} declares ${code}`);
      }
      assert.ok(op.responses['503'], `${label} declares 503 (shutting down)`);
    }
    const login = served.paths['/api/v1/auth/login'].post;
    assert.ok(login.responses['200'].headers['Set-Cookie'].required);
    assert.ok(login.responses['401'] && login.responses['429']);
    assert.ok(served.paths['/api/v1/admin/users'].post.responses['413']);
  });

  test('resource routes: Kubernetes objects and lists; each 4xx is the service error or the cluster Status', () => {
    const status = served.components.schemas.KubernetesStatus;
    assert.deepEqual(status.properties.kind.enum, ['Status']);
    assert.ok(status.required.includes('kind'));
    const list = served.paths['/api/v1/{resource}/{namespace}'].get;
    assert.equal(list.responses['200'].content['application/json'].schema.$ref, '#/components/schemas/KubernetesList');
    assert.deepEqual(served.components.schemas.KubernetesList.properties.metadata, {
      $ref: '#/components/schemas/ListMeta',
    });
    for (const { label, op } of operations(served)) {
      if (!op.tags.includes('Resources')) continue;
      assert.ok(op.responses.default, `${label}: any other cluster answer`);
      for (const [code, response] of Object.entries<any>(op.responses)) {
        const schema = response.content?.['application/json']?.schema;
        if (/^4/.test(code) || code === 'default') {
          assert.deepEqual(
            schema.oneOf.map((s: any) => s.$ref).sort(),
            ['#/components/schemas/ErrorResponseDto', '#/components/schemas/KubernetesStatus'],
            `${label} ${code}`,
          );
        } else if (/^5/.test(code)) {
          assert.equal(schema.$ref, '#/components/schemas/ErrorResponseDto', `${label} ${code} is the service's`);
        }
      }
    }
  });

  test('getCurrentUser is a union discriminated by kind, and every discriminator mapping agrees with its enum', () => {
    const me = served.paths['/api/v1/auth/me'].get.responses['200'].content['application/json'].schema;
    assert.equal(me.discriminator.propertyName, 'kind');
    assert.deepEqual(Object.keys(me.discriminator.mapping).sort(), ['apiKey', 'user']);
    walk(served, (node, at) => {
      if (!node.discriminator?.mapping) return;
      for (const [value, ref] of Object.entries<string>(node.discriminator.mapping)) {
        const target = served.components.schemas[ref.split('/').pop()!];
        assert.deepEqual(target.properties[node.discriminator.propertyName].enum, [value], `${at}: ${value}`);
        assert.ok(target.required.includes(node.discriminator.propertyName), `${at}: ${value} requires it`);
      }
    });
  });

  test('what every body route may answer is declared and arrives in the one error shape: 415, 413, bad JSON', async () => {
    const admin = await signedIn(t, 'admin');
    const api = client(t.app, admin.token);
    // Each answer also passes the contract check of the request helper (status declared, body, x-request-id).
    const wrongType = await api.post('/api/v1/admin/users', {
      rawBody: 'username=x',
      headers: { 'content-type': 'text/plain' },
    });
    assert.equal(wrongType.status, 415);
    assert.ok(wrongType.body.requestId);
    const tooLarge = await api.post('/api/v1/admin/users', {
      rawBody: JSON.stringify({ username: 'big', password: 'x'.repeat(1024 * 1024) }),
      headers: { 'content-type': 'application/json' },
    });
    assert.equal(tooLarge.status, 413);
    const badJson = await api.post('/api/v1/auth/logout', {
      rawBody: '{"oops"',
      headers: { 'content-type': 'application/json' },
    });
    assert.equal(badJson.status, 400);
    const wrongLogin = await request(t.app, 'POST', '/api/v1/auth/login', {
      body: { username: admin.username, password: 'not-the-password' },
    });
    assert.equal(wrongLogin.status, 401);
  });

  test('DELETE flags are booleans: true/false are taken, anything else is a 400 naming the flag', async () => {
    const admin = await signedIn(t, 'admin');
    const api = client(t.app, admin.token);
    const bad = await api.delete('/api/v1/configmaps/default/x', { query: { force: 'yes' } });
    assert.equal(bad.status, 400);
    assert.match(JSON.stringify(bad.body.message), /force must be true or false/);
    // A valid flag passes validation and the request goes on to choose the cluster (no header: 400 for that).
    const good = await api.delete('/api/v1/configmaps/default/x', { query: { force: 'true', wait: 'false' } });
    assert.equal(good.status, 400);
    assert.doesNotMatch(JSON.stringify(good.body.message), /force|wait/);
    assert.match(JSON.stringify(good.body.message), /x-cluster-name/);
  });
});

function operations(document: any): Array<{ label: string; method: string; op: any }> {
  const result: Array<{ label: string; method: string; op: any }> = [];
  for (const [path, item] of Object.entries<any>(document.paths)) {
    for (const [method, op] of Object.entries<any>(item)) {
      result.push({ label: `${op.operationId} (${method.toUpperCase()} ${path})`, method, op });
    }
  }
  return result;
}

function walk(node: any, visit: (node: any, at: string) => void, at = ''): void {
  if (!node || typeof node !== 'object') return;
  visit(node, at);
  for (const [key, value] of Object.entries(node)) walk(value, visit, `${at}/${key}`);
}
