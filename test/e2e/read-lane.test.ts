import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { kubeRequest, type ControlPlane } from '../harness/control-plane.js';
import type { TestApp } from '../support/app.js';
import { signedIn } from '../support/factories.js';
import { request, type Response } from '../support/http.js';
import { startClusterApp } from '../support/cluster-app.js';

/**
 * A read without query parameters takes the direct lane (src/resources/read-lane.ts); the same read
 * with a query parameter that changes nothing takes the Nest route. Both must answer alike, to the
 * byte but for the request id: status, body, content type and the set of headers.
 */
describe('resource reads: the direct lane answers exactly as the Nest route', () => {
  let t: TestApp;
  let cp: ControlPlane;
  let admin: string;
  let viewer: string;
  const ns = `lane-${process.pid}`;

  before(async () => {
    ({ cp, t, admin, viewer } = await startClusterApp({ cluster: 'lane', namespace: ns, viewer: true }));
    for (const name of ['one', 'two']) {
      await kubeRequest(cp, 'POST', `/api/v1/namespaces/${ns}/configmaps`, {
        metadata: { name },
        data: { value: name },
      });
    }
  });

  after(async () => {
    await kubeRequest(cp, 'DELETE', `/api/v1/namespaces/${ns}`);
    await t?.close();
  });

  const comparable = (res: Response) => {
    const body = res.body && typeof res.body === 'object' ? { ...res.body, requestId: undefined } : res.text;
    return {
      status: res.status,
      body,
      contentType: res.headers['content-type'],
      headerNames: Object.keys(res.headers)
        .filter((h) => h !== 'date')
        .sort(),
    };
  };

  /** Reads `path` both ways: no query (the lane) and with `same` (a query that changes nothing: Nest). */
  async function bothWays(path: string, same: Record<string, string>, token: string, cluster: string | null = 'lane') {
    const headers: Record<string, string> = cluster === null ? {} : { 'x-cluster-name': cluster };
    const lane = await request(t.app, 'GET', `/api/v1/${path}`, { token, headers });
    const nest = await request(t.app, 'GET', `/api/v1/${path}`, { token, headers, query: same });
    assert.deepEqual(comparable(lane), comparable(nest), `GET ${path}`);
    return lane;
  }

  // A GET's resourceVersion "0" answers from the apiserver's cache: the same object, unchanged meanwhile.
  const GET = { resourceVersion: '0' };
  // A limit larger than the list: one page, the same items.
  const LIST = { limit: '500' };

  test('an object and a list', async () => {
    const one = await bothWays(`configmaps/${ns}/one`, GET, admin);
    assert.equal(one.status, 200);
    assert.equal(one.body.data.value, 'one');
    const list = await request(t.app, 'GET', `/api/v1/configmaps/${ns}`, {
      token: viewer,
      headers: { 'x-cluster-name': 'lane' },
    });
    assert.equal(list.status, 200);
    const names = (res: Response) =>
      res.body.items
        .map((i: { metadata: { name: string } }) => i.metadata.name)
        .filter((n: string) => n !== 'kube-root-ca.crt');
    assert.deepEqual(names(list).sort(), ['one', 'two']);
    const nested = await request(t.app, 'GET', `/api/v1/configmaps/${ns}`, {
      token: viewer,
      headers: { 'x-cluster-name': 'lane' },
      query: LIST,
    });
    assert.deepEqual(names(nested).sort(), ['one', 'two'], 'the list through Nest has the same items');
  });

  test("the cluster's refusal passes through", async () => {
    const res = await bothWays(`configmaps/${ns}/missing`, GET, admin);
    assert.equal(res.status, 404);
    assert.equal(res.body.kind, 'Status');
  });

  test('the refusals of the service', async () => {
    const cases: Array<[string, Record<string, string>, string, string | null, number]> = [
      [`nosuchthings/${ns}/x`, GET, admin, 'lane', 404], // discovery
      [`nosuchthings/${ns}`, LIST, admin, 'lane', 404],
      [`configmaps/${ns}/one`, GET, admin, null, 400], // no x-cluster-name
      [`configmaps/${ns}`, LIST, admin, 'nope', 404], // no such cluster
      [`configmaps/_all/one`, GET, admin, 'lane', 400], // namespaced, no namespace
      [`namespaces/${ns}/x`, GET, admin, 'lane', 400], // cluster-scoped under a namespace
      [`configmaps/Not_A_Namespace/one`, GET, admin, 'lane', 400],
      [`configmaps/${ns}/a%25b`, GET, admin, 'lane', 400],
      [`secrets/${ns}/x`, GET, viewer, 'lane', 403], // viewers read no Secrets
      [`secrets/${ns}`, LIST, viewer, 'lane', 403],
      [`configmaps/${ns}/one`, GET, 'cas_s_not-a-token', 'lane', 401],
    ];
    for (const [path, same, token, cluster, status] of cases) {
      const res = await bothWays(path, same, token, cluster);
      assert.equal(res.status, status, `GET ${path}: ${res.text}`);
      assert.equal(typeof res.body.requestId, 'string', `GET ${path} names its request`);
    }
  });

  test('a caller without a role is refused on both ways', async () => {
    const nobody = (await signedIn(t, [])).token;
    const res = await bothWays(`configmaps/${ns}/one`, GET, nobody);
    assert.equal(res.status, 403);
  });
});
