// kubectl auth can-i asks with a SelfSubjectAccessReview and --list with a SelfSubjectRulesReview: the
// service answers both from its own rules, with the mapping the Kubernetes path uses for requests.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { Authorizer } from '../../src/access/authorizer.js';
import type { Caller } from '../../src/auth/caller.js';
import { accessReviewDecision, ReviewInputError, rulesReviewStatus } from '../../src/kube/self-reviews.js';

const authorizer = new Authorizer();
const dev: Caller = {
  kind: 'user',
  id: 1,
  name: 'dev',
  roles: ['dev'],
  isAdmin: false,
  rules: [
    {
      role: 'dev',
      clusters: ['a'],
      namespaces: ['shop'],
      resources: ['pods', 'deployments.apps'],
      verbs: ['get', 'list', 'delete', 'log'],
    },
  ],
  userId: 1,
  sessionId: null,
  userName: 'u',
  keyExpiresAt: null,
};
const admin: Caller = { ...dev, roles: ['admin'], isAdmin: true, rules: [] };
const ask = (caller: Caller, resourceAttributes: Record<string, string>) =>
  accessReviewDecision(authorizer, caller, 'a', { resourceAttributes });

describe('self reviews', () => {
  test('access reviews map as requests do', () => {
    assert.equal(ask(dev, { verb: 'list', resource: 'pods', namespace: 'shop' }).allowed, true);
    assert.equal(ask(dev, { verb: 'list', resource: 'pods', namespace: 'other' }).allowed, false);
    assert.equal(ask(dev, { verb: 'get', resource: 'pods', subresource: 'log', namespace: 'shop' }).allowed, true);
    assert.equal(ask(dev, { verb: 'create', resource: 'pods', subresource: 'exec', namespace: 'shop' }).allowed, false);
    assert.equal(ask(dev, { verb: 'deletecollection', resource: 'pods', namespace: 'shop' }).allowed, true);
    assert.equal(ask(dev, { verb: 'get', group: 'apps', resource: 'deployments', namespace: 'shop' }).allowed, true);
    assert.equal(
      ask(dev, { verb: 'get', group: 'apps', resource: 'deployments', subresource: 'scale', namespace: 'shop' })
        .allowed,
      true,
    );
    assert.equal(
      ask(dev, { verb: 'update', group: 'apps', resource: 'deployments', subresource: 'scale', namespace: 'shop' })
        .allowed,
      false,
    );
  });

  test("verbs and wildcards the service's rules do not have are for admins only", () => {
    for (const attributes of <Array<Record<string, string>>>[
      { verb: '*', resource: 'pods', namespace: 'shop' },
      { verb: 'get', resource: '*', namespace: 'shop' },
      { verb: 'impersonate', resource: 'users' },
      { verb: 'use', group: 'policy', resource: 'podsecuritypolicies' },
    ]) {
      assert.equal(ask(dev, attributes).allowed, false, JSON.stringify(attributes));
      assert.equal(ask(admin, attributes).allowed, true, JSON.stringify(attributes));
    }
  });

  test('non-resource reviews: discovery for anyone with a rule on the cluster, the rest for admins', () => {
    const nonResource = (caller: Caller, path: string) =>
      accessReviewDecision(authorizer, caller, 'a', { nonResourceAttributes: { path, verb: 'get' } }).allowed;
    assert.equal(nonResource(dev, '/version'), true);
    assert.equal(nonResource(dev, '/apis/apps/v1'), true);
    assert.equal(nonResource(dev, '/metrics'), false);
    assert.equal(nonResource(admin, '/metrics'), true);
    assert.equal(
      accessReviewDecision(authorizer, dev, 'b', { nonResourceAttributes: { path: '/version', verb: 'get' } }).allowed,
      false,
    );
  });

  test('a malformed review is refused with what is wrong', () => {
    assert.throws(() => accessReviewDecision(authorizer, dev, 'a', {}), ReviewInputError);
    assert.throws(
      () => accessReviewDecision(authorizer, dev, 'a', { resourceAttributes: { verb: 5 } }),
      /spec.resourceAttributes.verb must be a string/,
    );
    assert.throws(() => accessReviewDecision(authorizer, dev, 'a', null), /spec must be an object/);
  });

  test("rules reviews list the caller's rules in the namespace in RBAC's shape", () => {
    const inShop = rulesReviewStatus(authorizer, dev, 'a', 'shop');
    assert.deepEqual(inShop.resourceRules, [
      { verbs: ['get', 'list', 'delete', 'deletecollection'], apiGroups: [''], resources: ['pods'] },
      { verbs: ['get'], apiGroups: [''], resources: ['pods/scale'] },
      { verbs: ['get'], apiGroups: [''], resources: ['pods/status'] },
      { verbs: ['get'], apiGroups: [''], resources: ['pods/log'] },
      { verbs: ['get', 'list', 'delete', 'deletecollection'], apiGroups: ['apps'], resources: ['deployments'] },
      { verbs: ['get'], apiGroups: ['apps'], resources: ['deployments/scale'] },
      { verbs: ['get'], apiGroups: ['apps'], resources: ['deployments/status'] },
    ]);
    assert.deepEqual(rulesReviewStatus(authorizer, dev, 'a', 'other').resourceRules, []);
    // update and patch of the object write its scale, never its status: that takes a rule naming it
    const writer: Caller = {
      ...dev,
      rules: [
        { role: 'w', clusters: ['a'], namespaces: ['shop'], resources: ['deployments.apps'], verbs: ['*'] },
        { role: 'w', clusters: ['a'], namespaces: ['shop'], resources: ['pods/status'], verbs: ['patch', 'get'] },
      ],
    };
    assert.deepEqual(rulesReviewStatus(authorizer, writer, 'a', 'shop').resourceRules, [
      { verbs: ['*'], apiGroups: ['apps'], resources: ['deployments'] },
      { verbs: ['get', 'update', 'patch'], apiGroups: ['apps'], resources: ['deployments/scale'] },
      { verbs: ['get'], apiGroups: ['apps'], resources: ['deployments/status'] },
      { verbs: ['patch'], apiGroups: [''], resources: ['pods/status'] },
    ]);
    assert.deepEqual(rulesReviewStatus(authorizer, admin, 'a', 'other').resourceRules, [
      { verbs: ['*'], apiGroups: ['*'], resources: ['*'] },
    ]);
  });
});
