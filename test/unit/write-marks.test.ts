// The gateway's write hook: which calls mark read-your-writes for which collection, and a streamed
// answer passes through unchanged with its mark made before its reader sees its end.
import assert from 'node:assert/strict';
import { Readable } from 'node:stream';
import { describe, test } from 'node:test';
import type { ClusterResponse } from '../../src/clusters/gateway/answer.js';
import { WriteMarks, writtenCollection } from '../../src/clusters/gateway/write-marks.js';

const q = (s = '') => new URLSearchParams(s);

describe('writtenCollection', () => {
  const cases: Array<[string, string, string, ReturnType<typeof writtenCollection>]> = [
    ['POST', '/api/v1/namespaces/a/configmaps', '', { resourceId: 'configmaps', deleted: false }],
    ['PUT', '/apis/apps/v1/namespaces/a/deployments/web/scale', '', { resourceId: 'deployments.apps', deleted: false }],
    ['PATCH', '/api/v1/namespaces/a/pods/p/status', '', { resourceId: 'pods', deleted: false }],
    ['DELETE', '/api/v1/namespaces/a/pods/p', '', { resourceId: 'pods', deleted: true }],
    ['DELETE', '/api/v1/namespaces/a/configmaps', '', { resourceId: 'configmaps', deleted: true }],
    ['POST', '/api/v1/namespaces/a/pods/p/eviction', '', { resourceId: 'pods', deleted: true }],
    ['PATCH', '/apis/x.example.com/v1/gizmos/g', '', { resourceId: 'gizmos.x.example.com', deleted: false }],
    ['GET', '/api/v1/namespaces/a/configmaps', '', undefined],
    ['POST', '/api/v1/namespaces/a/configmaps', 'dryRun=All', undefined],
    ['POST', '/apis/authorization.k8s.io/v1/selfsubjectaccessreviews', '', undefined],
    ['POST', '/api/v1/namespaces/a/pods/p/exec', 'command=ls', undefined],
    ['POST', '/api/v1/namespaces/a/services/s/proxy/x', '', undefined],
    ['POST', '/version', '', undefined],
  ];
  for (const [method, path, query, expected] of cases) {
    test(`${method} ${path}${query ? `?${query}` : ''}`, () => {
      assert.deepEqual(writtenCollection({ method: method as never, path, query: q(query) }), expected);
    });
  }
});

describe('WriteMarks.observe', () => {
  const object = (rv: string) => Buffer.from(JSON.stringify({ kind: 'ConfigMap', metadata: { name: 'x', resourceVersion: rv } }));

  test('a whole answer marks its version; a refused write, a read or a dry run marks nothing', () => {
    const marks = new WriteMarks();
    const call = { method: 'POST' as const, path: '/api/v1/namespaces/a/configmaps' };
    marks.observe('c', { ...call, query: q('dryRun=All') }, { statusCode: 201, contentType: 'application/json', body: object('9') });
    marks.observe('c', call, { statusCode: 409, contentType: 'application/json', body: object('8') });
    assert.deepEqual(marks.take('c', 'configmaps'), { recount: false });
    marks.observe('c', call, { statusCode: 201, contentType: 'application/json', body: object('12') });
    assert.deepEqual(marks.take('c', 'configmaps'), { rv: 12n, recount: false });
    marks.observe('c', { method: 'DELETE', path: '/api/v1/namespaces/a/configmaps/x' }, {
      statusCode: 200,
      contentType: 'application/json',
      body: object('13'),
    });
    assert.deepEqual(marks.take('c', 'configmaps'), { rv: 12n, recount: true }, 'a delete asks for a recount');
    assert.deepEqual(marks.take('c', 'configmaps'), { rv: 12n, recount: false }, 'once');
  });

  test('a streamed answer passes through byte for byte; the mark is made before its end is read', async () => {
    const marks = new WriteMarks();
    const body = object('77');
    const source = Readable.from([body.subarray(0, 10), body.subarray(10)]) as ClusterResponse;
    source.statusCode = 200;
    source.headers = { 'content-type': 'application/json' };
    const out = marks.observe('c', { method: 'PATCH', path: '/api/v1/namespaces/a/configmaps/x' }, source) as ClusterResponse;
    assert.equal(out.statusCode, 200);
    assert.equal(out.headers['content-type'], 'application/json');
    const chunks: Buffer[] = [];
    let markedAtEnd: unknown;
    out.on('data', (c: Buffer) => chunks.push(c));
    await new Promise<void>((resolve) =>
      out.on('end', () => {
        markedAtEnd = marks.take('c', 'configmaps');
        resolve();
      }),
    );
    assert.deepEqual(Buffer.concat(chunks), body);
    assert.deepEqual(markedAtEnd, { rv: 77n, recount: false });
  });

  test('destroying the passed-through answer destroys the cluster answer (the request is aborted)', async () => {
    const marks = new WriteMarks();
    const source = new Readable({ read() {} }) as ClusterResponse;
    source.statusCode = 201;
    source.headers = {};
    const out = marks.observe('c', { method: 'POST', path: '/api/v1/namespaces/a/configmaps' }, source) as ClusterResponse;
    out.destroy();
    await new Promise((r) => setImmediate(r));
    assert.equal(source.destroyed, true);
  });
});
