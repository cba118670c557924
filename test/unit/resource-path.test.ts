import assert from 'node:assert/strict';
import { BadRequestException } from '@nestjs/common';
import { describe, test } from 'node:test';
import {
  deleteOptions,
  parseResourceId,
  patchContentType,
  resourcePath,
  validateName,
  validateNamespace,
  type ResourceType,
} from '../../src/k8s/resource-path.js';

const configmaps: ResourceType = {
  group: '',
  version: 'v1',
  plural: 'configmaps',
  kind: 'ConfigMap',
  namespaced: true,
  verbs: [],
};
const deployments: ResourceType = {
  group: 'apps',
  version: 'v1',
  plural: 'deployments',
  kind: 'Deployment',
  namespaced: true,
  verbs: [],
};
const roles: ResourceType = {
  group: 'rbac.authorization.k8s.io',
  version: 'v1',
  plural: 'clusterroles',
  kind: 'ClusterRole',
  namespaced: false,
  verbs: [],
};

/** The 400's messages: BadRequestException carries them in its body, not its message. */
function refusedWith(pattern: RegExp) {
  return (error: unknown) =>
    error instanceof BadRequestException &&
    pattern.test(String((error.getResponse() as { message: string[] }).message));
}

describe('resource paths', () => {
  test('core, grouped, cluster-scoped and all-namespaces paths', () => {
    assert.equal(resourcePath(configmaps, 'default', null), '/api/v1/namespaces/default/configmaps');
    assert.equal(resourcePath(configmaps, 'default', 'x'), '/api/v1/namespaces/default/configmaps/x');
    assert.equal(resourcePath(configmaps, null, null), '/api/v1/configmaps');
    assert.equal(resourcePath(deployments, 'prod', 'web'), '/apis/apps/v1/namespaces/prod/deployments/web');
    assert.equal(
      resourcePath(roles, null, 'system:controller:x'),
      '/apis/rbac.authorization.k8s.io/v1/clusterroles/system%3Acontroller%3Ax',
    );
  });

  test('resource ids', () => {
    assert.deepEqual(parseResourceId('configmaps'), { plural: 'configmaps', group: undefined });
    assert.deepEqual(parseResourceId('deployments.apps'), { plural: 'deployments', group: 'apps' });
    assert.deepEqual(parseResourceId('widgets.example.com'), { plural: 'widgets', group: 'example.com' });
    for (const bad of [
      '',
      'ConfigMaps',
      '../secrets',
      'a/b',
      'a%2fb',
      '.x',
      'x.',
      'x..y',
      'a b',
      'é',
      'x'.repeat(254),
    ]) {
      assert.throws(() => parseResourceId(bad), refusedWith(/resource must be/), bad);
    }
  });

  test('namespaces and names are single safe segments', () => {
    for (const ok of ['default', 'kube-system', '_all', 'a'.repeat(63)]) validateNamespace(ok);
    for (const bad of ['', 'Default', '..', '.', 'a/b', 'a%2f', '-a', 'a'.repeat(64), 'ns?x', 'ns#x', 'ns\n']) {
      assert.throws(() => validateNamespace(bad), refusedWith(/namespace must be/), JSON.stringify(bad));
    }
    for (const ok of ['web', 'system:controller:x', 'a.b-c_d', 'x'.repeat(253)]) validateName(ok);
    for (const bad of [
      '',
      '.',
      '..',
      'a/b',
      '%2e%2e',
      'a%2Fb',
      'a b',
      'a?b',
      'a#b',
      'a\r\nb',
      'a\u0000b',
      'ü',
      'x'.repeat(254),
      'a\\b',
    ]) {
      assert.throws(() => validateName(bad), refusedWith(/name must be/), JSON.stringify(bad));
    }
  });

  test('patch types map to content types; anything else is a 400', () => {
    assert.equal(patchContentType(undefined, undefined), 'application/strategic-merge-patch+json');
    assert.equal(patchContentType(undefined, 'application/json'), 'application/strategic-merge-patch+json');
    assert.equal(patchContentType('merge', 'application/json'), 'application/merge-patch+json');
    assert.equal(patchContentType('json', undefined), 'application/json-patch+json');
    assert.equal(patchContentType('strategic', undefined), 'application/strategic-merge-patch+json');
    assert.equal(patchContentType('apply', undefined), 'application/apply-patch+yaml');
    assert.equal(patchContentType('apply', 'application/apply-patch+yaml'), 'application/apply-patch+yaml');
    assert.equal(patchContentType(undefined, 'application/apply-patch+yaml'), 'application/apply-patch+yaml');
    assert.throws(() => patchContentType('merge', 'application/apply-patch+yaml'), refusedWith(/contradicts/));
    assert.throws(() => patchContentType('server-side', undefined), refusedWith(/patchType/));
    assert.throws(() => patchContentType('', undefined), refusedWith(/patchType/));
  });

  test('without patchType, a Kubernetes patch Content-Type names the patch kind; a contradicting pair is a 400', () => {
    assert.equal(patchContentType(undefined, 'application/json-patch+json'), 'application/json-patch+json');
    assert.equal(
      patchContentType(undefined, 'Application/Merge-Patch+JSON; charset=utf-8'),
      'application/merge-patch+json',
    );
    assert.equal(
      patchContentType(undefined, 'application/strategic-merge-patch+json'),
      'application/strategic-merge-patch+json',
    );
    assert.equal(patchContentType('json', 'application/json-patch+json'), 'application/json-patch+json');
    assert.throws(() => patchContentType('merge', 'application/json-patch+json'), refusedWith(/contradicts/));
    assert.throws(() => patchContentType('strategic', 'application/merge-patch+json'), refusedWith(/contradicts/));
  });

  test('delete options', () => {
    assert.deepEqual(deleteOptions({}), { kind: 'DeleteOptions', apiVersion: 'v1', propagationPolicy: 'Foreground' });
    assert.equal(deleteOptions({ cascade: false }).propagationPolicy, 'Orphan');
    assert.equal(deleteOptions({ force: true }).gracePeriodSeconds, 0);
    assert.deepEqual(deleteOptions({ dryRun: true }).dryRun, ['All']);
  });
});
