import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { kubeRequest, readAudit, waitFor, type ControlPlane } from '../harness/control-plane.js';
import type { TestApp } from '../support/app.js';
import { kubeconfigFor, registerCluster } from '../support/clusters.js';
import { request } from '../support/http.js';
import { startClusterApp } from '../support/cluster-app.js';
import { serviceAccountToken } from '../support/kube.js';
import { ApiResourcesService } from '../../src/resources/api-resources.service.js';
import { ClusterClientFactory } from '../../src/clusters/cluster-client.factory.js';

describe('what a cluster serves: api-resources and schemas', () => {
  let cp: ControlPlane;
  let t: TestApp;
  let admin: string;
  let viewer: string;
  const group = `apires${process.pid}.example.com`;
  const crdName = `sprockets.${group}`;
  const get = (path: string, token: string | undefined, query?: Record<string, string>) =>
    request(t.app, 'GET', `/api/v1/clusters/${path}`, { token, query });
  const byId = (body: any, id: string) => (body.resources as any[]).find((r) => r.id === id);

  before(async () => {
    ({ cp, t, admin, viewer } = await startClusterApp({ cluster: 'alpha', viewer: true }));
  });
  after(async () => {
    await kubeRequest(cp, 'DELETE', `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${crdName}`);
    await t?.close();
  });

  test('every type with its discovery data, and the verbs the caller may use: admin and viewer differ', async () => {
    const asAdmin = await get('alpha/api-resources', admin);
    assert.equal(asAdmin.status, 200, asAdmin.text);
    assert.equal(asAdmin.body.cluster, 'alpha');
    assert.equal(asAdmin.body.namespace, null);
    assert.ok(asAdmin.body.resources.length > 40, `${asAdmin.body.resources.length} types`);

    assert.deepEqual(byId(asAdmin.body, 'configmaps'), {
      id: 'configmaps',
      name: 'configmaps',
      group: '',
      version: 'v1',
      kind: 'ConfigMap',
      namespaced: true,
      verbs: ['create', 'delete', 'deletecollection', 'get', 'list', 'patch', 'update', 'watch'],
      shortNames: ['cm'],
      categories: [],
      subresources: [],
      allowedVerbs: ['get', 'list', 'watch', 'create', 'update', 'patch', 'delete'],
    });
    const deployments = byId(asAdmin.body, 'deployments.apps');
    assert.equal(deployments.kind, 'Deployment');
    assert.deepEqual(deployments.shortNames, ['deploy']);
    assert.deepEqual(deployments.categories, ['all']);
    assert.deepEqual([...deployments.subresources].sort(), ['scale', 'status']);
    assert.equal(byId(asAdmin.body, 'namespaces').namespaced, false);
    assert.ok(byId(asAdmin.body, 'pods').allowedVerbs.includes('log'));
    assert.ok(byId(asAdmin.body, 'pods').subresources.includes('log'));

    const asViewer = await get('alpha/api-resources', viewer);
    assert.equal(asViewer.status, 200, asViewer.text);
    assert.deepEqual(byId(asViewer.body, 'configmaps').allowedVerbs, ['get', 'list', 'watch']);
    assert.deepEqual(byId(asViewer.body, 'pods').allowedVerbs, ['get', 'list', 'watch', 'log']);
    assert.deepEqual(byId(asViewer.body, 'secrets').allowedVerbs, []);
    assert.deepEqual(byId(asAdmin.body, 'secrets').allowedVerbs, [
      'get',
      'list',
      'watch',
      'create',
      'update',
      'patch',
      'delete',
    ]);

    const inNamespace = await get('alpha/api-resources', viewer, { namespace: 'default' });
    assert.equal(inNamespace.status, 200);
    assert.equal(inNamespace.body.namespace, 'default');
  });

  test('a CRD is listed right after it is created, and its schema follows', async () => {
    // discovery of the cluster is loaded (and cached) before the CRD exists
    assert.equal(byId((await get('alpha/api-resources', viewer)).body, crdName), undefined);
    const crd = await kubeRequest(cp, 'POST', '/apis/apiextensions.k8s.io/v1/customresourcedefinitions', {
      apiVersion: 'apiextensions.k8s.io/v1',
      kind: 'CustomResourceDefinition',
      metadata: { name: crdName },
      spec: {
        group,
        scope: 'Namespaced',
        names: {
          plural: 'sprockets',
          singular: 'sprocket',
          kind: 'Sprocket',
          shortNames: ['spr'],
          categories: ['gear'],
        },
        versions: [
          {
            name: 'v1',
            served: true,
            storage: true,
            subresources: { status: {} },
            schema: {
              openAPIV3Schema: {
                type: 'object',
                properties: {
                  spec: { type: 'object', properties: { teeth: { type: 'integer', minimum: 1 } } },
                  status: { type: 'object', properties: { phase: { type: 'string' } } },
                },
              },
            },
          },
        ],
      },
    });
    assert.equal(crd.status, 201, JSON.stringify(crd.body));
    const created = Date.now();
    const listed = await waitFor(
      'the CRD in api-resources',
      async () => byId((await get('alpha/api-resources', viewer)).body, crdName),
      10_000,
      100,
    );
    console.log(`# CRD listed ${Date.now() - created} ms after its creation`);
    assert.deepEqual(
      { ...listed, verbs: [...listed.verbs].sort() },
      {
        id: crdName,
        name: 'sprockets',
        group,
        version: 'v1',
        kind: 'Sprocket',
        namespaced: true,
        verbs: ['create', 'delete', 'deletecollection', 'get', 'list', 'patch', 'update', 'watch'],
        shortNames: ['spr'],
        categories: ['gear'],
        subresources: ['status'],
        allowedVerbs: ['get', 'list', 'watch'],
      },
    );
    const forAdmin = byId((await get('alpha/api-resources', admin)).body, crdName);
    assert.deepEqual(forAdmin.allowedVerbs, ['get', 'list', 'watch', 'create', 'update', 'patch', 'delete']);

    const schema = await waitFor(
      'the CRD in /openapi/v2',
      async () => {
        const res = await get(`alpha/api-resources/${crdName}/schema`, viewer);
        return res.status === 200 ? res : undefined;
      },
      30_000,
      500,
    );
    console.log(`# CRD schema served ${Date.now() - created} ms after its creation`);
    assert.equal(schema.body.kind, 'Sprocket');
    assert.equal(schema.body.definition, `com.example.${group.split('.')[0]}.v1.Sprocket`);
    assert.deepEqual(schema.body.schema.properties.spec.properties.teeth, { type: 'integer', minimum: 1 });
  });

  test('the schema of a built-in type comes with every definition it refers to', async () => {
    const res = await get('alpha/api-resources/deployments.apps/schema', viewer);
    assert.equal(res.status, 200, res.text);
    assert.equal(res.body.id, 'deployments.apps');
    assert.equal(res.body.definition, 'io.k8s.api.apps.v1.Deployment');
    assert.equal(res.body.schema.properties.spec.$ref, '#/definitions/io.k8s.api.apps.v1.DeploymentSpec');
    const defs = res.body.definitions;
    assert.ok(defs['io.k8s.api.apps.v1.DeploymentSpec']);
    assert.ok(defs['io.k8s.api.core.v1.PodSpec'], 'reached through DeploymentSpec → PodTemplateSpec → PodSpec');
    assert.equal(defs['io.k8s.api.apps.v1.Deployment'], undefined, 'the root is in schema, not repeated');
    assert.equal(defs['io.k8s.api.core.v1.ConfigMap'], undefined, 'only what it refers to');

    const core = await get('alpha/api-resources/configmaps/schema', viewer);
    assert.equal(core.status, 200);
    assert.equal(core.body.definition, 'io.k8s.api.core.v1.ConfigMap');
  });

  test('bad input and unknown names are clear 4xx answers', async () => {
    const cases: Array<[string, Record<string, string> | undefined, number, RegExp]> = [
      ['alpha/api-resources', { namespace: 'Not_A_Label' }, 400, /namespace must be a DNS label/],
      ['alpha/api-resources', { verbose: 'true' }, 400, /property verbose should not exist/],
      ['nope/api-resources', undefined, 404, /cluster 'nope' not found/],
      ['alpha/api-resources/widgets.nowhere.example/schema', undefined, 404, /does not serve a resource type/],
      ['alpha/api-resources/Bad..Name/schema', undefined, 400, /resource must be a plural resource name/],
      ['alpha/api-resources/configmaps/schema', { x: '1' }, 400, /query parameter 'x' is not accepted/],
    ];
    for (const [path, query, status, message] of cases) {
      const res = await get(path, viewer, query);
      assert.equal(res.status, status, `${path}: ${res.text}`);
      assert.match(JSON.stringify(res.body.message), message, path);
      assert.ok(res.body.requestId, 'the service error shape');
    }
    assert.equal((await get('alpha/api-resources', undefined)).status, 401);
  });
});

describe('the OpenAPI document is fetched again only when the cluster changed it', () => {
  let cp: ControlPlane;
  let t: TestApp;
  let admin: string;
  let sa: { token: string; username: string };
  const ns = `noschema-${process.pid}`;

  before(async () => {
    ({ cp, t, admin } = await startClusterApp({ cluster: 'setup', namespace: ns }));
    // The service reads the cluster as a ServiceAccount of this test only, to pick its requests out of the audit log.
    sa = await serviceAccountToken(cp, ns, 'cas-noschema');
    await registerCluster(t, admin, 'alpha', kubeconfigFor(cp, { token: sa.token }));
  });
  after(async () => {
    await kubeRequest(cp, 'DELETE', `/api/v1/namespaces/${ns}`);
    await t?.close();
  });

  // A type missing from the document (a CRD a moment old, an aggregated API without a schema) reloads it
  // at most every 2 s, on every replica and for every caller: each reload must not cost megabytes read and
  // parsed when nothing changed. (Every 1.20 built-in type has a schema, so the reload is driven directly.)
  test('a reload of an unchanged document is a 304 from the cluster, and the parsed document is reused', async () => {
    const since = Date.now() - 1;
    const schema = await request(t.app, 'GET', '/api/v1/clusters/alpha/api-resources/configmaps/schema', {
      token: admin,
    });
    assert.equal(schema.status, 200, schema.text);
    const service = t.app.get(ApiResourcesService) as unknown as {
      load(conn: unknown): Promise<{ definitions: object; etag?: string }>;
    };
    const conn = await t.app.get(ClusterClientFactory).forName('alpha');
    const first = await service.load(conn);
    const again = await service.load(conn);
    assert.ok(first.etag, 'the cluster sent a validator');
    assert.equal(again.definitions, first.definitions, 'the parsed definitions are reused, not parsed again');
    const codes = await waitFor(
      'the fetches in the audit log',
      async () => {
        const found = (await readAudit(cp))
          .filter(
            (e) =>
              e.stage === 'ResponseComplete' &&
              e.user.username === sa.username &&
              e.requestURI === '/openapi/v2' &&
              Date.parse(e.requestReceivedTimestamp) >= since,
          )
          .map((e) => e.responseStatus?.code);
        return found.length >= 3 ? found : undefined;
      },
      10_000,
    );
    assert.deepEqual(codes, [200, 304, 304]);
  });
});
