/**
 * The typed client generated from the committed openapi.json (`npm run client`, @hey-api/openapi-ts) drives a
 * whole scenario against the listening service and a real control plane: bootstrap, login, users, API keys,
 * clusters, every resource verb, and the errors. It is compiled with the strict test build, so a document that
 * drifts from what this code expects fails to compile; every answer also goes through the contract validator.
 */
import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { kubeRequest, sharedControlPlane, type ControlPlane } from '../harness/control-plane.js';
import { createClient, createConfig, type Client } from '../client/generated/client/index.js';
import * as cas from '../client/generated/sdk.gen.js';
import type {
  ClientOptions,
  ErrorResponseDto,
  KubernetesStatus,
  PatchResourceData,
} from '../client/generated/types.gen.js';
import { startTestApp, type TestApp } from '../support/app.js';
import { kubeconfigFor } from '../support/clusters.js';
import { assertContract } from '../support/openapi-validator.js';

/** The service's own error, or the cluster's Status: told apart by `kind`. */
function isStatus(error: ErrorResponseDto | KubernetesStatus | undefined): error is KubernetesStatus {
  return error !== undefined && 'kind' in error && error.kind === 'Status';
}

describe('a client generated from openapi.json drives the service end to end', () => {
  let t: TestApp;
  let cp: ControlPlane;
  let baseUrl: string;
  const ns = `client-${process.pid}`;
  const checked: string[] = [];

  /** A client sending one credential, as a Bearer token (the document lists the schemes as alternatives). */
  const clientWith = (token?: string): Client => {
    const c = createClient(
      createConfig<ClientOptions>({
        baseUrl,
        auth: (scheme) => (scheme.scheme === 'bearer' ? token : undefined),
      }),
    );
    c.interceptors.response.use(async (response, request) => {
      const url = new URL(request.url);
      assertContract({
        method: request.method,
        url: url.pathname + url.search,
        status: response.status,
        headers: Object.fromEntries(response.headers.entries()),
        text: await response.clone().text(),
      });
      checked.push(`${request.method} ${url.pathname} ${response.status}`);
      return response;
    });
    return c;
  };

  before(async () => {
    cp = await sharedControlPlane('a');
    t = await startTestApp();
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    baseUrl = `http://127.0.0.1:${(t.app.getHttpServer().address() as AddressInfo).port}`;
  });
  after(async () => {
    await kubeRequest(cp, 'DELETE', `/api/v1/namespaces/${ns}`);
    await t.close();
  });

  test('admin plane, clusters, every resource verb, errors', async () => {
    const anonymous = clientWith();

    // Bootstrap: public while no user exists (security: []), 201 the user.
    const superUser = await cas.createSuperUser({
      client: anonymous,
      body: { username: 'root', password: 'root-password-1', name: 'Root' },
    });
    assert.equal(superUser.response?.status, 201);
    assert.equal(superUser.data?.roles[0]?.name, 'admin');
    const again = await cas.createSuperUser({
      client: anonymous,
      body: { username: 'second', password: 'password-22' },
    });
    assert.equal(again.response?.status, 409);
    assert.match(String(again.error?.message), /already/);

    const wrong = await cas.login({ client: anonymous, body: { username: 'root', password: 'not-the-password' } });
    assert.equal(wrong.response?.status, 401);
    assert.ok(wrong.error?.requestId);
    const signIn = await cas.login({ client: anonymous, body: { username: 'root', password: 'root-password-1' } });
    assert.equal(signIn.response?.status, 200);
    assert.match(signIn.response?.headers.getSetCookie().join(';'), /cas_session=/);
    const admin = clientWith(signIn.data!.token);
    assert.equal((await cas.getCurrentUser({ client: anonymous })).response?.status, 401);

    const me = await cas.getCurrentUser({ client: admin });
    assert.equal(me.data?.kind, 'user');
    if (me.data?.kind === 'user') assert.equal(me.data.user.username, 'root');

    // Users.
    const created = await cas.createUser({
      client: admin,
      body: { username: 'alice', password: 'alice-password-1', name: 'Alice' },
    });
    assert.equal(created.response?.status, 201);
    const alice = created.data!;
    const invalid = await cas.createUser({ client: admin, body: { username: 'a', password: 'short' } });
    assert.equal(invalid.response?.status, 400);
    assert.ok(Array.isArray(invalid.error?.message));
    const updated = await cas.updateUser({
      client: admin,
      path: { id: alice.id },
      body: { name: 'Alice A.', avatar_url: 'https://example.com/a.png' },
    });
    assert.equal(updated.data?.avatar_url, 'https://example.com/a.png');
    const cleared = await cas.updateUser({ client: admin, path: { id: alice.id }, body: { avatar_url: '' } });
    assert.equal(cleared.response?.status, 200);
    const page = await cas.listUsers({
      client: admin,
      query: { page: 1, size: 1, sortBy: 'username', sortOrder: 'asc', search: 'ali' },
    });
    assert.deepEqual(
      page.data?.users.map((u) => u.username),
      ['alice'],
    );
    assert.equal(page.data?.total, 1);
    assert.equal((await cas.listUsers({ client: admin, query: { size: 1000 } })).response?.status, 400);
    assert.deepEqual(((await cas.listRoles({ client: admin })).data ?? []).map((r) => r.name).sort(), [
      'admin',
      'viewer',
    ]);
    assert.equal(
      (await cas.setUserRoles({ client: admin, path: { id: alice.id }, body: { roles: ['viewer'] } })).data?.roles[0]
        ?.name,
      'viewer',
    );
    const reset = await cas.resetUserPassword({
      client: admin,
      path: { id: alice.id },
      body: { password: 'alice-password-2' },
    });
    assert.equal(reset.data?.success, true);
    const aliceLogin = await cas.login({
      client: anonymous,
      body: { username: 'alice', password: 'alice-password-2' },
    });
    const viewer = clientWith(aliceLogin.data!.token);
    const forbidden = await cas.listUsers({ client: viewer });
    assert.equal(forbidden.response?.status, 403);
    assert.equal(
      (await cas.setUserEnabled({ client: admin, path: { id: alice.id }, body: { enabled: false } })).data?.success,
      true,
    );
    assert.equal((await cas.getCurrentUser({ client: viewer })).response?.status, 401, 'disabling ends sessions');
    assert.equal((await cas.deleteUser({ client: admin, path: { id: alice.id } })).data?.success, true);
    assert.equal((await cas.deleteUser({ client: admin, path: { id: alice.id } })).response?.status, 404);

    // API keys: the key authenticates as itself, told apart by `kind`.
    const key = await cas.createApiKey({ client: admin, body: { name: 'ci-reader', role: 'viewer' } });
    assert.equal(key.response?.status, 201);
    assert.match(key.data!.key, /^cas_key_/);
    const keyClient = clientWith(key.data!.key);
    const asKey = await cas.getCurrentUser({ client: keyClient });
    assert.equal(asKey.data?.kind, 'apiKey');
    if (asKey.data?.kind === 'apiKey') assert.equal(asKey.data.apiKey.name, 'ci-reader');
    assert.deepEqual(
      (await cas.listApiKeys({ client: admin })).data?.map((k) => k.name),
      ['ci-reader'],
    );

    // Clusters.
    const cluster = await cas.createCluster({
      client: admin,
      body: { name: 'alpha', config: kubeconfigFor(cp), description: 'shared control plane a' },
    });
    assert.equal(cluster.response?.status, 201, JSON.stringify(cluster.error));
    const clusters = await cas.listClusters({ client: admin });
    assert.equal(clusters.data?.[0]?.status, 'ok');
    assert.equal(clusters.data?.[0]?.config, '');
    assert.deepEqual(
      (await cas.listAvailableClusters({ client: keyClient })).data?.map((c) => [c.name, c.isDefault]),
      [['alpha', true]],
    );
    assert.equal(
      (await cas.updateCluster({ client: admin, path: { id: cluster.data!.id }, body: { description: 'a' } })).response
        ?.status,
      200,
    );
    const imported = await cas.importClusters({ client: admin, body: { config: kubeconfigFor(cp) } });
    assert.equal(imported.response?.status, 409, 'import works only while no cluster exists');
    const beta = await cas.createCluster({ client: admin, body: { name: 'beta', config: kubeconfigFor(cp) } });
    assert.equal(
      (await cas.deleteCluster({ client: admin, path: { id: cluster.data!.id } })).response?.status,
      409,
      'the default cluster cannot be deleted',
    );

    // Resources on cluster alpha: every verb.
    const on = { 'x-cluster-name': 'alpha' };
    const nsCreated = await cas.createResource({
      client: admin,
      headers: on,
      path: { resource: 'namespaces', namespace: '_all' },
      body: { metadata: { name: ns } },
    });
    assert.equal(nsCreated.response?.status, 201);
    assert.equal(nsCreated.data?.kind, 'Namespace');
    const where = { resource: 'configmaps', namespace: ns };
    const cm = await cas.createResource({
      client: admin,
      headers: on,
      path: where,
      body: { metadata: { name: 'settings', labels: { app: 'demo' } }, data: { mode: 'a' } },
    });
    assert.equal(cm.response?.status, 201);
    assert.equal(cm.data?.metadata.namespace, ns);
    const got = await cas.getResource({ client: keyClient, headers: on, path: { ...where, name: 'settings' } });
    assert.equal(got.data?.data && (got.data.data as Record<string, string>).mode, 'a');
    const list = await cas.listResources({
      client: keyClient,
      headers: on,
      path: where,
      query: { labelSelector: 'app=demo', limit: 10 },
    });
    assert.equal(list.data?.kind, 'ConfigMapList');
    assert.deepEqual(
      list.data?.items.map((i) => i.metadata.name),
      ['settings'],
    );
    const replaced = await cas.replaceResource({
      client: admin,
      headers: on,
      path: { ...where, name: 'settings' },
      body: { ...cm.data, data: { mode: 'b' } },
    });
    assert.equal(replaced.response?.status, 200);
    const stale = await cas.replaceResource({
      client: admin,
      headers: on,
      path: { ...where, name: 'settings' },
      body: { ...cm.data, data: { mode: 'c' } },
    });
    assert.equal(stale.response?.status, 409);
    assert.ok(isStatus(stale.error) && stale.error.reason === 'Conflict', "a stale version is the cluster's Status");
    const noVersion = await cas.replaceResource({
      client: admin,
      headers: on,
      path: { ...where, name: 'settings' },
      body: { metadata: { name: 'settings' }, data: {} },
    });
    assert.equal(noVersion.response?.status, 400);
    assert.ok(!isStatus(noVersion.error) && noVersion.error?.requestId, "a missing version is the service's error");
    const patches: Array<[PatchResourceData['query'], PatchResourceData['body']]> = [
      [undefined, { metadata: { labels: { strategic: 'yes' } } }],
      [{ patchType: 'merge' }, { metadata: { labels: { merge: 'yes' } } }],
      [{ patchType: 'json' }, [{ op: 'add', path: '/data/json', value: 'yes' }]],
    ];
    for (const [query, body] of patches) {
      const patched = await cas.patchResource({
        client: admin,
        headers: on,
        path: { ...where, name: 'settings' },
        query,
        body,
      });
      assert.equal(patched.response?.status, 200, `${query?.patchType}: ${JSON.stringify(patched.error)}`);
    }
    const final = await cas.getResource({ client: admin, headers: on, path: { ...where, name: 'settings' } });
    assert.deepEqual(final.data?.metadata.labels, { app: 'demo', strategic: 'yes', merge: 'yes' });
    assert.equal((final.data?.data as Record<string, string>).json, 'yes');
    const viewerWrite = await cas.deleteResource({
      client: keyClient,
      headers: on,
      path: { ...where, name: 'settings' },
    });
    assert.equal(viewerWrite.response?.status, 403);
    const secrets = await cas.listResources({
      client: keyClient,
      headers: on,
      path: { ...where, resource: 'secrets' },
    });
    assert.equal(secrets.response?.status, 403, 'viewers read no Secrets');
    // Booleans in the query, as the client serialises them.
    const deleted = await cas.deleteResource({
      client: admin,
      headers: on,
      path: { ...where, name: 'settings' },
      query: { wait: true, cascade: true, force: false, timeoutSeconds: 30 },
    });
    assert.equal(deleted.response?.status, 200, JSON.stringify(deleted.error));
    const gone = await cas.getResource({ client: admin, headers: on, path: { ...where, name: 'settings' } });
    assert.equal(gone.response?.status, 404);
    assert.ok(isStatus(gone.error) && gone.error.reason === 'NotFound', "the cluster's NotFound Status");
    const noCluster = await cas.getResource({
      client: admin,
      headers: { 'x-cluster-name': 'nowhere' },
      path: { ...where, name: 'settings' },
    });
    assert.equal(noCluster.response?.status, 404);
    assert.ok(!isStatus(noCluster.error) && /nowhere/.test(String(noCluster.error?.message)));
    const nsDeleted = await cas.deleteResource({
      client: admin,
      headers: on,
      path: { resource: 'namespaces', namespace: '_all', name: ns },
      query: { wait: false },
    });
    assert.ok([200, 202].includes(nsDeleted.response?.status ?? 0), String(nsDeleted.response?.status));

    // Clean-up through the client; then the session ends.
    assert.equal((await cas.deleteCluster({ client: admin, path: { id: beta.data!.id } })).response?.status, 200);
    assert.equal((await cas.deleteApiKey({ client: admin, path: { id: key.data!.id } })).data?.success, true);
    assert.equal((await cas.getCurrentUser({ client: keyClient })).response?.status, 401);
    assert.equal((await cas.logout({ client: admin })).data?.success, true);
    assert.equal((await cas.getCurrentUser({ client: admin })).response?.status, 401);
    assert.equal((await cas.getHealth({ client: anonymous })).data?.status, 'ok');

    const operations = new Set(checked.map((c) => c.split(' ').slice(0, 2).join(' ')));
    assert.ok(checked.length >= 50, `${checked.length} answers checked against the document`);
    assert.ok(operations.size >= 20, `${operations.size} distinct method+path`);
  });
});
