import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { Authorizer, type Verb } from '../../src/access/authorizer.js';
import { impersonationFor, impersonationHeaders } from '../../src/access/impersonation.js';
import type { AccessRule } from '../../src/access/rules.js';
import type { Caller } from '../../src/access/caller.js';
import { BUILT_IN_RULES } from '../../src/database/migrations/common/1795351998878-RoleRulesKeyOwners.data.js';

const authorizer = new Authorizer();

/** The roles the cases use: the built-in rule sets as stored, and custom ones. */
const ROLES: Record<string, AccessRule[]> = {
  ...BUILT_IN_RULES,
  // The example role.
  'shop-dev': [
    { clusters: ['a'], namespaces: ['shop'], resources: ['deployments.apps', 'pods'], verbs: ['get', 'list', 'patch'] },
  ],
  'web-reader': [{ clusters: ['*'], namespaces: ['web', 'web2'], resources: ['*'], verbs: ['get', 'list'] }],
  'secret-reader': [{ clusters: ['a'], namespaces: ['*'], resources: ['secrets'], verbs: ['get'] }],
  'node-admin': [{ clusters: ['b'], namespaces: ['*'], resources: ['nodes', 'metrics'], verbs: ['*'] }],
  empty: [],
  'shop-all': [{ clusters: ['a'], namespaces: ['shop'], resources: ['*'], verbs: ['*'] }],
  'shop-helm': [{ clusters: ['a'], namespaces: ['shop'], resources: ['helmreleases'], verbs: ['list', 'get'] }],
  'shop-status': [{ clusters: ['a'], namespaces: ['shop'], resources: ['pods/status'], verbs: ['patch'] }],
};

function caller(roles: string[], kind: Caller['kind'] = 'user'): Caller {
  return {
    kind,
    id: 1,
    name: 'someone',
    roles,
    isAdmin: roles.includes('admin'),
    rules: roles.flatMap((role) => (ROLES[role] ?? []).map((rule) => ({ role, ...rule }))),
    userId: 1,
    userName: 'someone',
    keyExpiresAt: null,
    sessionId: null,
  };
}

type Case = [
  roles: string[],
  verb: Verb,
  cluster: string,
  resource: string,
  namespace: string | null,
  allowed: boolean,
];

const cases: Case[] = [
  [['admin'], 'delete', 'a', 'secrets', 'kube-system', true],
  [['admin'], 'get', 'a', 'metrics', null, true],
  [['admin'], 'create', 'zzz', 'widgets.example.com', null, true],
  [['admin'], 'update', 'a', 'pods/status', 'shop', true],
  // status writes (issue 29 #13): only a rule naming <resource>/status grants them
  [['shop-all'], 'patch', 'a', 'pods', 'shop', true],
  [['shop-all'], 'patch', 'a', 'pods/status', 'shop', false],
  [['shop-all'], 'update', 'a', 'deployments.apps/status', 'shop', false],
  [['shop-status'], 'patch', 'a', 'pods/status', 'shop', true],
  [['shop-status'], 'update', 'a', 'pods/status', 'shop', false],
  [['shop-status'], 'patch', 'a', 'pods/status', 'web', false],
  [['viewer'], 'patch', 'a', 'pods/status', 'shop', false],
  // viewer: unchanged meaning
  [['viewer'], 'get', 'a', 'configmaps', 'default', true],
  [['viewer'], 'list', 'a', 'deployments.apps', null, true],
  [['viewer'], 'watch', 'b', 'widgets.example.com', 'shop', true],
  [['viewer'], 'log', 'a', 'pods', 'shop', true],
  [['viewer'], 'list', 'a', 'namespaces', null, true],
  [['viewer'], 'get', 'a', 'secrets', 'default', false],
  [['viewer'], 'list', 'a', 'secrets', null, false],
  [['viewer'], 'get', 'a', 'metrics', null, false],
  [['viewer'], 'create', 'a', 'configmaps', 'default', false],
  [['viewer'], 'patch', 'a', 'deployments.apps', 'shop', false],
  [['viewer'], 'delete', 'a', 'namespaces', null, false],
  // no role, or a role without rules
  [[], 'get', 'a', 'configmaps', 'default', false],
  [[], 'list', 'a', 'namespaces', null, false],
  [['empty'], 'get', 'a', 'configmaps', 'default', false],
  // the role: exactly its cluster, namespace, resources and verbs
  [['shop-dev'], 'get', 'a', 'deployments.apps', 'shop', true],
  [['shop-dev'], 'list', 'a', 'deployments.apps', 'shop', true],
  [['shop-dev'], 'patch', 'a', 'deployments.apps', 'shop', true],
  [['shop-dev'], 'list', 'a', 'pods', 'shop', true],
  [['shop-dev'], 'get', 'b', 'deployments.apps', 'shop', false],
  [['shop-dev'], 'get', 'a', 'deployments.apps', 'web', false],
  [['shop-dev'], 'get', 'a', 'configmaps', 'shop', false],
  [['shop-dev'], 'delete', 'a', 'deployments.apps', 'shop', false],
  [['shop-dev'], 'update', 'a', 'deployments.apps', 'shop', false],
  [['shop-dev'], 'list', 'a', 'deployments.apps', null, false],
  [['shop-dev'], 'get', 'a', 'deployments', 'shop', false],
  [['shop-dev'], 'log', 'a', 'pods', 'shop', false],
  // '*' on resources covers everything but secrets and metrics; '*' on clusters covers every cluster
  [['web-reader'], 'get', 'zzz', 'configmaps', 'web2', true],
  [['web-reader'], 'get', 'a', 'secrets', 'web', false],
  [['web-reader'], 'list', 'a', 'configmaps', null, false],
  [['web-reader'], 'get', 'a', 'nodes', null, false],
  // named sensitive resources
  [['secret-reader'], 'get', 'a', 'secrets', 'anything', true],
  [['secret-reader'], 'list', 'a', 'secrets', 'anything', false],
  [['secret-reader'], 'get', 'b', 'secrets', 'anything', false],
  [['node-admin'], 'delete', 'b', 'nodes', null, true],
  [['node-admin'], 'get', 'b', 'metrics', 'shop', true],
  [['node-admin'], 'get', 'b', 'pods', 'shop', false],
  // Helm releases are Secrets: only a rule naming them grants them
  [['shop-all'], 'get', 'a', 'helmreleases', 'shop', false],
  [['viewer'], 'list', 'a', 'helmreleases', null, false],
  [['shop-helm'], 'list', 'a', 'helmreleases', 'shop', true],
  [['shop-helm'], 'get', 'a', 'helmreleases', 'shop', true],
  [['shop-helm'], 'update', 'a', 'helmreleases', 'shop', false],
  [['shop-helm'], 'list', 'a', 'helmreleases', null, false],
  [['shop-helm'], 'list', 'a', 'helmreleases', 'web', false],
  [['admin'], 'delete', 'a', 'helmreleases', 'web', true],
  // rules of several roles add up
  [['shop-dev', 'secret-reader'], 'get', 'a', 'secrets', 'shop', true],
  [['shop-dev', 'secret-reader'], 'patch', 'a', 'pods', 'shop', true],
  [['shop-dev', 'viewer'], 'list', 'a', 'configmaps', null, true],
  [['shop-dev', 'viewer'], 'patch', 'a', 'configmaps', 'shop', false],
];

describe('authorizer', () => {
  for (const [roles, verb, cluster, resource, namespace, allowed] of cases) {
    test(`${roles.join('+') || 'no role'}: ${verb} ${resource} in ${namespace ?? '_all'} on ${cluster} → ${allowed ? 'allowed' : 'refused'}`, () => {
      const request = { verb, cluster, resource, namespace };
      const decision = authorizer.can(caller(roles), request);
      assert.equal(decision.allowed, allowed, decision.reason);
      if (allowed) assert.doesNotThrow(() => authorizer.require(caller(roles), request));
      else assert.throws(() => authorizer.require(caller(roles), request), { status: 403, message: decision.reason });
    });
  }

  test('the cheap pre-check never refuses what the full check allows', () => {
    for (const [roles, verb, cluster, resource, namespace] of cases) {
      if (authorizer.can(caller(roles), { verb, cluster, resource, namespace }).allowed) {
        assert.equal(authorizer.mayAttempt(caller(roles), verb, cluster).allowed, true, `${roles} ${verb} ${cluster}`);
      }
    }
    assert.equal(authorizer.mayAttempt(caller([]), 'get', 'a').allowed, false);
    assert.equal(authorizer.mayAttempt(caller(['viewer']), 'delete', 'a').allowed, false);
    assert.equal(authorizer.mayAttempt(caller(['shop-dev']), 'get', 'b').allowed, false);
    assert.equal(authorizer.mayAttempt(caller(['shop-dev']), 'delete', 'a').allowed, false);
  });

  test('refusals say what is lacking', () => {
    const dev = caller(['shop-dev', 'web-reader']);
    const all = authorizer.can(dev, { verb: 'list', cluster: 'a', resource: 'deployments.apps', namespace: null });
    assert.match(all.reason, /every namespace/);
    assert.match(all.reason, /shop, web, web2/, 'names the namespaces it may use');
    const other = authorizer.can(caller(['shop-dev']), {
      verb: 'get',
      cluster: 'b',
      resource: 'pods',
      namespace: 'shop',
    });
    assert.match(other.reason, /nothing on cluster 'b'/);
    const secret = authorizer.can(caller(['viewer']), {
      verb: 'get',
      cluster: 'a',
      resource: 'secrets',
      namespace: 'x',
    });
    assert.match(secret.reason, /secrets/);
    assert.equal(
      authorizer.can(caller([]), { verb: 'get', cluster: 'a', resource: 'pods', namespace: 'x' }).reason,
      'the caller has no role',
    );
  });

  test('a refused write names the verb, the resource, the namespace and where the verb is allowed, as a refused list does', () => {
    const dev = caller(['shop-dev']);
    // No rule allows delete on the cluster at all: the cheap pre-check says so in the same words.
    const what = { resource: 'deployments.apps', namespace: 'shop' };
    const early = authorizer.mayAttempt(dev, 'delete', 'a', what);
    assert.equal(early.allowed, false);
    assert.equal(
      early.reason,
      "your roles do not allow delete on deployments.apps in namespace 'shop' on cluster 'a'; they allow it in no namespace",
    );
    assert.equal(early.reason, authorizer.can(dev, { verb: 'delete', cluster: 'a', ...what }).reason);
    const across = authorizer.mayAttempt(dev, 'create', 'a', { resource: 'nodes', namespace: null });
    assert.match(across.reason, /create on nodes across all namespaces \(or cluster-scoped\) on cluster 'a'/);
    // Without the request's facts (can-i before a cluster is known) the pre-check stays short.
    assert.equal(authorizer.mayAttempt(dev, 'delete', 'a').reason, "your roles do not allow delete on cluster 'a'");
  });

  test('permissions: the rules that apply on one cluster', () => {
    const p = authorizer.permissions(caller(['shop-dev', 'node-admin']), 'a');
    assert.deepEqual(p, {
      admin: false,
      rules: [
        {
          role: 'shop-dev',
          namespaces: ['shop'],
          resources: ['deployments.apps', 'pods'],
          verbs: ['get', 'list', 'patch'],
        },
      ],
    });
    assert.deepEqual(authorizer.permissions(caller(['shop-dev']), 'b').rules, []);
    assert.equal(authorizer.permissions(caller(['admin']), 'b').admin, true);
  });

  test('impersonation: cas:<username>; a key as its owner with extra cas-key; one group per role; unsafe values are refused', () => {
    assert.deepEqual(impersonationFor(caller(['viewer', 'shop-dev'])), {
      user: 'cas:someone',
      groups: ['cas:role:viewer', 'cas:role:shop-dev'],
    });
    assert.deepEqual(
      impersonationFor({ ...caller(['viewer'], 'apiKey'), id: 42, name: 'ci deployer', userName: 'bob' }),
      {
        user: 'cas:bob',
        groups: ['cas:role:viewer'],
        extra: { 'cas-key': ['42'] },
      },
    );
    assert.deepEqual(impersonationHeaders({ user: 'cas:bob', groups: [], extra: { 'cas-key': ['42'] } }), {
      'impersonate-user': 'cas:bob',
      'impersonate-extra-cas-key': ['42'],
    });
    for (const badKey of ['Cas-Key', 'cas key', 'cas:key', '', 'x\r\ny']) {
      assert.throws(() => impersonationHeaders({ user: 'cas:a', groups: [], extra: { [badKey]: ['1'] } }), /unsafe/);
    }
    assert.throws(
      () => impersonationHeaders({ user: 'cas:a', groups: [], extra: { 'cas-key': ['1\r\nx: y'] } }),
      /unsafe/,
    );
    assert.deepEqual(impersonationHeaders({ user: 'cas:a', groups: ['cas:role:x', 'cas:role:y'] }), {
      'impersonate-user': 'cas:a',
      'impersonate-group': ['cas:role:x', 'cas:role:y'],
    });
    assert.deepEqual(impersonationHeaders({ user: 'cas:a', groups: [] }), { 'impersonate-user': 'cas:a' });
    for (const bad of ['cas:a\r\nx-evil: 1', 'cas:\u00e9', ' cas:a', '', 'cas:' + 'a'.repeat(600)]) {
      assert.throws(() => impersonationHeaders({ user: bad, groups: [] }), /unsafe/);
      assert.throws(() => impersonationHeaders({ user: 'cas:a', groups: [bad] }), /unsafe/);
    }
  });
});
