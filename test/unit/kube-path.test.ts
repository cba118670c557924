// The path below `/api/v1/clusters/<name>/k8s` is what the cluster will serve: decoded segment by
// segment, with nothing that could climb out of it or hide a slash, and forwarded as the cluster reads it.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { HttpException } from '@nestjs/common';
import { kubePathOf } from '../../src/kube/kube.service.js';

const base = '/api/v1/clusters/prod/k8s';

describe('kubePathOf', () => {
  test('the path after the cluster name and its query', () => {
    const { path, forwardPath, query } = kubePathOf(`${base}/api/v1/namespaces/a/pods?watch=1&labelSelector=app%3Dweb`);
    assert.equal(path, '/api/v1/namespaces/a/pods');
    assert.equal(forwardPath, '/api/v1/namespaces/a/pods');
    assert.equal(query.get('labelSelector'), 'app=web');
    assert.equal(query.get('watch'), '1');
  });

  test('names keep their characters: decoded to decide, sent as the cluster reads them', () => {
    const { path, forwardPath } = kubePathOf(`${base}/apis/rbac.authorization.k8s.io/v1/clusterroles/system%3Anode`);
    assert.equal(path, '/apis/rbac.authorization.k8s.io/v1/clusterroles/system:node');
    assert.equal(forwardPath, '/apis/rbac.authorization.k8s.io/v1/clusterroles/system:node');
    assert.equal(
      kubePathOf(`${base}/api/v1/namespaces/a/configmaps/a%20b`).forwardPath,
      '/api/v1/namespaces/a/configmaps/a%20b',
    );
  });

  test("a cluster named like the path's parts cannot shift it", () => {
    assert.equal(kubePathOf('/api/v1/clusters/k8s/k8s/version').path, '/version');
    assert.equal(kubePathOf('/api/v1/clusters/a%2Fk8s/k8s/version').path, '/version');
  });

  test('a trailing slash is dropped; the root is /', () => {
    assert.equal(kubePathOf(`${base}/api/`).path, '/api');
    assert.equal(kubePathOf(`${base}/`).path, '/');
  });

  for (const bad of [
    '/api/v1/namespaces/a/../b',
    '/api/v1/./pods',
    '/api//v1',
    '/api/v1/namespaces/a%2Fb/pods',
    '/%zz',
  ]) {
    test(`refused with a 400: ${bad}`, () => {
      assert.throws(
        () => kubePathOf(`${base}${bad}`),
        (error: unknown) => error instanceof HttpException && error.getStatus() === 400,
      );
    });
  }
});
