import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { kubeRequest, readAudit, sharedControlPlane, waitFor, type ControlPlane } from '../harness/control-plane.js';
import { startTestApp, type TestApp } from '../support/app.js';
import { kubeconfigFor, registerCluster } from '../support/clusters.js';
import { signedIn } from '../support/factories.js';
import { request } from '../support/http.js';
import { assertContract } from '../support/openapi-validator.js';
import { serviceAccountToken } from '../support/kube.js';

/** One HTTP/1.1 request with the path sent byte for byte as given. */
function rawRequest(
  port: number,
  method: string,
  path: string,
  headers: Record<string, string>,
): Promise<{ status: number; headers: http.IncomingHttpHeaders; text: string }> {
  const { body, ...rest } = headers;
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: '127.0.0.1',
        port,
        method,
        path,
        headers: { ...rest, ...(body ? { 'content-type': 'application/json' } : {}) },
        agent: false,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () =>
          resolve({ status: res.statusCode ?? 0, headers: res.headers, text: Buffer.concat(chunks).toString('utf8') }),
        );
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

describe('resource routes: cluster selection, path safety, headers, roles', () => {
  let t: TestApp;
  let a: ControlPlane;
  let b: ControlPlane;
  let admin: string;
  let sa: { token: string; username: string };
  let betaId: number;
  const ns = `sec-${process.pid}`;
  const on = (
    cluster: string | undefined,
    method: string,
    url: string,
    options: { token?: string; body?: unknown; headers?: Record<string, string> } = {},
  ) =>
    request(t.app, method, url.startsWith('/') ? url : `/api/v1/${url}`, {
      token: options.token ?? admin,
      body: options.body,
      headers: { ...(cluster === undefined ? {} : { 'x-cluster-name': cluster }), ...options.headers },
    });

  before(async () => {
    [a, b] = await Promise.all([sharedControlPlane('a'), sharedControlPlane('b')]);
    t = await startTestApp();
    admin = (await signedIn(t, 'admin')).token;
    for (const cp of [a, b]) {
      await kubeRequest(cp, 'POST', '/api/v1/namespaces', { metadata: { name: ns } });
      await kubeRequest(cp, 'POST', `/api/v1/namespaces/${ns}/configmaps`, {
        metadata: { name: 'which' },
        data: { cluster: cp === a ? 'a' : 'b' },
      });
      await kubeRequest(cp, 'POST', `/api/v1/namespaces/${ns}/secrets`, {
        metadata: { name: 'token' },
        stringData: { password: 'hunter2' },
      });
    }
    // On cluster a the service authenticates as a ServiceAccount of this test alone: its audit events are ours.
    sa = await serviceAccountToken(a, ns, 'cas');
    await registerCluster(t, admin, 'alpha', kubeconfigFor(a, { token: sa.token }));
    betaId = await registerCluster(t, admin, 'beta', kubeconfigFor(b));
  });
  after(async () => {
    for (const cp of [a, b]) await kubeRequest(cp, 'DELETE', `/api/v1/namespaces/${ns}`);
    await kubeRequest(a, 'DELETE', `/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/${ns}-cas`);
    await t.close();
  });

  test('the same request with two x-cluster-name values reaches two clusters', async () => {
    const fromA = await on('alpha', 'GET', `configmaps/${ns}/which`);
    const fromB = await on('beta', 'GET', `configmaps/${ns}/which`);
    assert.equal(fromA.body.data.cluster, 'a');
    assert.equal(fromB.body.data.cluster, 'b');
  });

  test('missing header → 400, unknown → 404, disabled → 409, anonymous → 401', async () => {
    const missing = await on(undefined, 'GET', `configmaps/${ns}`);
    assert.equal(missing.status, 400);
    assert.match(missing.body.message.join(';'), /x-cluster-name/);
    const unknown = await on('gamma', 'GET', `configmaps/${ns}`);
    assert.equal(unknown.status, 404);
    assert.match(unknown.body.message, /cluster 'gamma' not found/);
    const anonymous = await request(t.app, 'GET', `/api/v1/configmaps/${ns}`, {
      headers: { 'x-cluster-name': 'alpha' },
    });
    assert.equal(anonymous.status, 401);

    const disable = await on(undefined, 'PUT', `admin/clusters/${betaId}`, { body: { enabled: false } });
    assert.equal(disable.status, 200, disable.text);
    const disabled = await on('beta', 'GET', `configmaps/${ns}`);
    assert.equal(disabled.status, 409);
    assert.match(disabled.body.message, /disabled/);
    assert.equal((await on(undefined, 'PUT', `admin/clusters/${betaId}`, { body: { enabled: true } })).status, 200);
    assert.equal((await on('beta', 'GET', `configmaps/${ns}`)).status, 200);
  });

  test('a viewer may list and get, but not write, and never read Secrets', async () => {
    const viewer = (await signedIn(t, 'viewer')).token;
    assert.equal((await on('alpha', 'GET', `configmaps/${ns}`, { token: viewer })).status, 200);
    assert.equal((await on('alpha', 'GET', `configmaps/${ns}/which`, { token: viewer })).status, 200);
    assert.equal((await on('alpha', 'GET', 'namespaces/_all', { token: viewer })).status, 200);
    const writes: Array<[string, string, unknown]> = [
      ['POST', `configmaps/${ns}`, { metadata: { name: 'v' } }],
      ['PUT', `configmaps/${ns}/which`, { metadata: { name: 'which', resourceVersion: '1' } }],
      ['PATCH', `configmaps/${ns}/which`, { data: { x: '1' } }],
      ['DELETE', `configmaps/${ns}/which`, undefined],
    ];
    for (const [method, url, body] of writes) {
      const res = await on('alpha', method, url, { token: viewer, body });
      assert.equal(res.status, 403, `${method} ${url}`);
    }
    for (const url of [`secrets/${ns}`, `secrets/${ns}/token`, 'secrets/_all']) {
      const res = await on('alpha', 'GET', url, { token: viewer });
      assert.equal(res.status, 403, url);
      assert.match(res.body.message, /secrets/);
    }
    assert.equal((await on('alpha', 'GET', `secrets/${ns}/token`)).status, 200, 'an admin may read them');
    assert.equal(
      (await on('alpha', 'GET', `configmaps/${ns}/which`)).body.data.cluster,
      'a',
      'nothing was changed by the viewer',
    );
  });

  test("the caller's Authorization and Impersonate-* headers never reach the cluster", async () => {
    const since = new Date().toISOString();
    const res = await on('alpha', 'GET', `configmaps/${ns}/which`, {
      headers: { 'impersonate-user': 'system:admin', 'impersonate-group': 'system:masters', cookie: 'x=1' },
    });
    assert.equal(res.status, 200, "the cluster accepted the service's own credentials, not the caller's session token");
    const events = await waitFor('the audit event', async () => {
      const found = (await readAudit(a)).filter(
        (e) =>
          e.user.username === sa.username &&
          e.requestURI === `/api/v1/namespaces/${ns}/configmaps/which` &&
          e.requestReceivedTimestamp >= since,
      );
      return found.length ? found : undefined;
    });
    for (const event of events) {
      assert.equal(event.impersonatedUser, undefined);
      assert.equal(event.userAgent, 'cluster-admin-service/1');
    }
  });

  test('at least 100 crafted resource, namespace and name values → 4xx from the service, and nothing reaches another path', async () => {
    const since = new Date().toISOString();
    const resources = [
      '..',
      '.',
      '%2e%2e',
      '%2E%2E',
      '%252e%252e',
      'configmaps%2F..',
      'configmaps%2f..%2fsecrets',
      '..%2f..%2fapis',
      'CONFIGMAPS',
      'configmaps%00',
      'configmaps%0d%0aX-Evil:1',
      'config%20maps',
      '%E2%80%AE',
      'configmaps.',
      '.configmaps',
      'c'.repeat(300),
      'configmaps;x',
      'configmaps%3Fwatch=1',
      'configmaps%23frag',
      'config%5Cmaps',
      'secrets%2F..%2Fconfigmaps',
      '%C0%AE%C0%AE',
    ];
    const namespaces = [
      '..',
      '%2e%2e',
      '..%2f..',
      `${ns}%2F..%2Fkube-system`,
      'DEFAULT',
      'ns%00',
      'ns%0d%0aHost:x',
      '%C3%A9',
      'n'.repeat(64),
      `${ns}%3Fx=1`,
      `${ns}%23x`,
      '_ALL',
      '-x',
      'x-',
      '%252F',
      '%2F',
      `${ns}%2Fconfigmaps`,
      '%E0%A4%A',
      `${ns}%09`,
    ];
    const names = [
      '..',
      '.',
      '%2e%2e',
      '%2E%2e',
      '..%2F..%2Fsecrets%2Ftoken',
      'a%2Fb',
      'a%252Fb',
      'a%00b',
      'a%0d%0ab',
      'a%0Ab',
      'a%20b',
      'a%3Fb',
      'a%23b',
      '%C3%BC',
      '%F0%9F%98%80',
      'x'.repeat(254),
      'a%5Cb',
      '%2F',
      '%25',
      'a%09b',
      '..%5C..%5Csecrets',
      '%2e%2e%2f%2e%2e',
      'which%2F..%2F..%2Fsecrets',
      '%u002e%u002e',
    ];
    const urls: string[] = [];
    for (const r of resources) urls.push(`/api/v1/${r}/${ns}/which`, `/api/v1/${r}/${ns}`);
    for (const n of namespaces) urls.push(`/api/v1/configmaps/${n}/which`, `/api/v1/configmaps/${n}`);
    for (const n of names) urls.push(`/api/v1/configmaps/${ns}/${n}`);
    // Over a real socket, paths exactly as written: no client-side resolution of dot segments.
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    const port = (t.app.getHttpServer().address() as AddressInfo).port;
    let sent = 0;
    for (const url of urls) {
      for (const method of ['GET', 'PUT', 'PATCH', 'DELETE']) {
        const res = await rawRequest(port, method, url, {
          authorization: `Bearer ${admin}`,
          'x-cluster-name': 'alpha',
          ...(method === 'PUT' || method === 'PATCH' ? { body: JSON.stringify({ metadata: { name: 'which' } }) } : {}),
        });
        sent++;
        assertContract({ method, url, status: res.status, headers: res.headers, text: res.text });
        assert.ok(res.status >= 400 && res.status < 500, `${method} ${url} → ${res.status} ${res.text.slice(0, 200)}`);
      }
    }
    assert.ok(sent >= 100, `${sent} crafted requests`);

    // Everything the service asked cluster a as this test's identity: discovery, and the one intended collection.
    await new Promise((r) => setTimeout(r, 500));
    const ours = (await readAudit(a)).filter(
      (e) => e.user.username === sa.username && e.requestReceivedTimestamp >= since,
    );
    const allowed = /^\/(api|apis)(\/[a-z0-9.-]+){0,2}$|^\/api$|^\/apis$/;
    const stray = ours.filter((e) => !allowed.test(e.requestURI.split('?')[0]));
    assert.deepEqual(
      stray.map((e) => `${e.verb} ${e.requestURI}`),
      [],
    );
    assert.equal((await on('alpha', 'GET', `configmaps/${ns}/which`)).status, 200, 'the target is untouched');
  });
});
