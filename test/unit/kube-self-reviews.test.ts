// kubectl auth can-i asks with a SelfSubjectAccessReview and --list with a SelfSubjectRulesReview: the
// service answers both from its own rules, with the mapping the Kubernetes path uses for requests.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { Authorizer } from '../../src/access/authorizer.js';
import type { Caller } from '../../src/access/caller.js';
import { parseRequestInfo } from '../../src/k8s/request-info.js';
import {
  accessReviewDecision,
  isSelfReview,
  ReviewInputError,
  rulesReviewStatus,
  subjectReviewStatus,
} from '../../src/kube/self-reviews.js';

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
/** Discovery as a v1.20 apiserver answers it, in part. */
const TYPES = [
  { group: '', plural: 'pods', namespaced: true, subresources: ['attach', 'exec', 'log', 'portforward', 'status'] },
  { group: '', plural: 'configmaps', namespaced: true, subresources: [] },
  { group: '', plural: 'secrets', namespaced: true, subresources: [] },
  { group: '', plural: 'namespaces', namespaced: false, subresources: ['finalize', 'status'] },
  { group: '', plural: 'nodes', namespaced: false, subresources: ['proxy'] },
  { group: 'apps', plural: 'deployments', namespaced: true, subresources: ['scale', 'status'] },
];
const REQUEST = ['get', 'list', 'watch', 'create', 'update', 'patch', 'delete', 'deletecollection'];
const ask = (caller: Caller, resourceAttributes: Record<string, string | undefined>) =>
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
    const inShop = rulesReviewStatus(authorizer, dev, 'a', 'shop', TYPES);
    assert.deepEqual(inShop.resourceRules, [
      { verbs: ['get', 'list', 'delete', 'deletecollection'], apiGroups: [''], resources: ['pods'] },
      { verbs: ['get'], apiGroups: [''], resources: ['pods/status', 'pods/log'] },
      { verbs: ['get', 'list', 'delete', 'deletecollection'], apiGroups: ['apps'], resources: ['deployments'] },
      { verbs: ['get'], apiGroups: ['apps'], resources: ['deployments/scale', 'deployments/status'] },
    ]);
    assert.deepEqual(rulesReviewStatus(authorizer, dev, 'a', 'other', TYPES).resourceRules, []);
    // update and patch of the object write its scale, never its status: that takes a rule naming it
    const writer: Caller = {
      ...dev,
      rules: [
        { role: 'w', clusters: ['a'], namespaces: ['shop'], resources: ['deployments.apps'], verbs: ['*'] },
        { role: 'w', clusters: ['a'], namespaces: ['shop'], resources: ['pods/status'], verbs: ['patch', 'get'] },
        { role: 'w', clusters: ['a'], namespaces: ['shop'], resources: ['pods'], verbs: ['exec', 'log'] },
      ],
    };
    assert.deepEqual(rulesReviewStatus(authorizer, writer, 'a', 'shop', TYPES).resourceRules, [
      { verbs: [...REQUEST], apiGroups: ['apps'], resources: ['deployments'] },
      { verbs: ['get', 'update', 'patch'], apiGroups: ['apps'], resources: ['deployments/scale'] },
      { verbs: ['get'], apiGroups: ['apps'], resources: ['deployments/status'] },
      { verbs: ['patch'], apiGroups: [''], resources: ['pods/status'] },
      { verbs: ['get'], apiGroups: [''], resources: ['pods/log'] },
      { verbs: ['get', 'create'], apiGroups: [''], resources: ['pods/exec'] },
    ]);
    assert.deepEqual(rulesReviewStatus(authorizer, admin, 'a', 'other', TYPES).resourceRules, [
      { verbs: ['*'], apiGroups: ['*'], resources: ['*'] },
    ]);
  });

  test("a '*' rule lists what it enforces: the served types but Secrets, no terminal verb, no status write", () => {
    const wildcard = (namespaces: string[]): Caller => ({
      ...dev,
      rules: [{ role: 'w', clusters: ['a'], namespaces, resources: ['*'], verbs: ['*'] }],
    });
    const inShop = rulesReviewStatus(authorizer, wildcard(['shop']), 'a', 'shop', TYPES).resourceRules;
    assert.deepEqual(inShop, [
      { verbs: [...REQUEST], apiGroups: [''], resources: ['pods', 'configmaps'] },
      { verbs: ['get'], apiGroups: [''], resources: ['pods/status', 'pods/log'] },
      { verbs: [...REQUEST], apiGroups: ['apps'], resources: ['deployments'] },
      { verbs: ['get', 'update', 'patch'], apiGroups: ['apps'], resources: ['deployments/scale'] },
      { verbs: ['get'], apiGroups: ['apps'], resources: ['deployments/status'] },
    ]);
    // Every verb of every listed resource is one the path allows, and nothing the path refuses is listed.
    for (const rule of inShop) {
      for (const resource of rule.resources) {
        const [plural, subresource = ''] = resource.split('/');
        for (const verb of rule.verbs) {
          const asked = { verb, group: rule.apiGroups[0], resource: plural, subresource, namespace: 'shop' };
          assert.equal(ask(wildcard(['shop']), asked).allowed, true, JSON.stringify(asked));
        }
      }
    }
    for (const refused of [
      { verb: 'get', resource: 'secrets', namespace: 'shop' },
      { verb: 'create', resource: 'pods', subresource: 'exec', namespace: 'shop' },
      { verb: 'patch', group: 'apps', resource: 'deployments', subresource: 'status', namespace: 'shop' },
      { verb: 'get', resource: 'namespaces', name: 'shop' },
    ]) {
      assert.equal(ask(wildcard(['shop']), refused).allowed, false, JSON.stringify(refused));
    }
    // With every namespace, the cluster-scoped types too.
    const everywhere = rulesReviewStatus(authorizer, wildcard(['*']), 'a', 'shop', TYPES).resourceRules;
    assert.deepEqual(everywhere[0], {
      verbs: [...REQUEST],
      apiGroups: [''],
      resources: ['pods', 'configmaps', 'namespaces', 'nodes'],
    });
    assert.ok(!JSON.stringify(everywhere).includes('secrets'));
  });

  test("whoami: a SelfSubjectReview of authentication.k8s.io v1, v1beta1 or v1alpha1 is the service's; the caller as clusters see it", () => {
    const review = (path: string, method = 'POST') =>
      isSelfReview(parseRequestInfo(method, path, new URLSearchParams()));
    for (const version of ['v1', 'v1beta1', 'v1alpha1']) {
      assert.equal(review(`/apis/authentication.k8s.io/${version}/selfsubjectreviews`), true, version);
    }
    assert.equal(review('/apis/authentication.k8s.io/v2/selfsubjectreviews'), false);
    assert.equal(review('/apis/authentication.k8s.io/v1/selfsubjectreviews', 'GET'), false);
    assert.equal(review('/apis/authentication.k8s.io/v1/tokenreviews'), false);
    assert.equal(review('/apis/authorization.k8s.io/v1/selfsubjectaccessreviews'), true);
    assert.deepEqual(subjectReviewStatus(dev), {
      userInfo: { username: 'cas:dev', groups: ['cas:role:dev', 'system:authenticated'] },
    });
    const key: Caller = { ...dev, kind: 'apiKey', id: 42, name: 'laptop', userName: 'ann' };
    assert.deepEqual(subjectReviewStatus(key), {
      userInfo: { username: 'cas:ann', groups: ['cas:role:dev', 'system:authenticated'], extra: { 'cas-key': ['42'] } },
    });
  });
});
