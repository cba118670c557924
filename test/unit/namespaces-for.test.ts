// The namespaces a caller can reach on a cluster, with the verbs it holds in each: its rules against the
// cluster's namespaces, and on an impersonating cluster only what the cluster's own rules grant too.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { Authorizer } from '../../src/access/authorizer.js';
import type { ClusterResourceRule } from '../../src/access/namespaces.js';
import type { AccessRule } from '../../src/access/rules.js';
import type { Caller } from '../../src/access/caller.js';

const authorizer = new Authorizer();

function caller(rules: AccessRule[], isAdmin = false): Caller {
  return {
    kind: 'user',
    id: 1,
    name: 'someone',
    roles: isAdmin ? ['admin'] : ['r'],
    isAdmin,
    rules: rules.map((rule) => ({ role: 'r', ...rule })),
    userId: 1,
    userName: 'someone',
    keyExpiresAt: null,
    sessionId: null,
  };
}

const NAMESPACES = ['default', 'shop', 'kube-system', 'web'];
/** What `view` bound in a namespace gives, shortened; and what every authenticated person holds (system:basic-user). */
const VIEW: ClusterResourceRule[] = [
  { verbs: ['get', 'list', 'watch'], apiGroups: [''], resources: ['configmaps', 'pods', 'pods/log', 'services'] },
  { verbs: ['get', 'list', 'watch'], apiGroups: ['apps'], resources: ['deployments', 'deployments/scale'] },
];
const BASIC: ClusterResourceRule[] = [
  { verbs: ['create'], apiGroups: ['authorization.k8s.io'], resources: ['selfsubjectaccessreviews'] },
];

describe('grantedNamespaces: where the rules grant a verb on a type', () => {
  test('a rule covering every namespace: null; named ones: those; none: an empty set', () => {
    const all = caller([{ clusters: ['a'], namespaces: ['*'], resources: ['configmaps'], verbs: ['list'] }]);
    assert.equal(authorizer.grantedNamespaces(all, { verb: 'list', cluster: 'a', resource: 'configmaps' }), null);
    const some = caller([
      { clusters: ['a'], namespaces: ['shop', 'web'], resources: ['*'], verbs: ['list'] },
      { clusters: ['b'], namespaces: ['other'], resources: ['*'], verbs: ['list'] },
      { clusters: ['a'], namespaces: ['kube-system'], resources: ['pods'], verbs: ['list'] },
    ]);
    assert.deepEqual(
      [...authorizer.grantedNamespaces(some, { verb: 'list', cluster: 'a', resource: 'configmaps' })!].sort(),
      ['shop', 'web'],
    );
    assert.deepEqual(
      [...authorizer.grantedNamespaces(some, { verb: 'list', cluster: 'a', resource: 'secrets' })!],
      [],
      'a * never covers Secrets',
    );
  });
});

describe('namespacesFor: the namespace picker', () => {
  test('the admin role: every namespace, every verb', async () => {
    const reach = await authorizer.namespacesFor(caller([], true), 'a', NAMESPACES);
    assert.deepEqual(
      reach.map((r) => r.name),
      ['default', 'kube-system', 'shop', 'web'],
    );
    assert.ok(reach.every((r) => r.verbs.includes('exec') && r.verbs.includes('delete')));
  });

  test('a namespace-scoped person: its namespaces with its verbs; a * of verbs holds no terminal verb', async () => {
    const person = caller([
      { clusters: ['a'], namespaces: ['shop'], resources: ['deployments.apps'], verbs: ['get', 'list', 'patch'] },
      { clusters: ['a'], namespaces: ['web', 'gone'], resources: ['*'], verbs: ['*'] },
      { clusters: ['b'], namespaces: ['default'], resources: ['*'], verbs: ['*'] },
      { clusters: ['a'], namespaces: ['*'], resources: ['metrics'], verbs: ['get'] },
    ]);
    assert.deepEqual(await authorizer.namespacesFor(person, 'a', NAMESPACES), [
      { name: 'shop', verbs: ['get', 'list', 'patch'] },
      { name: 'web', verbs: ['get', 'list', 'watch', 'create', 'update', 'patch', 'delete', 'log'] },
    ]);
  });

  test("an impersonating cluster: only what its rules for the person grant too, on a type both cover", async () => {
    const person = caller([
      { clusters: ['a'], namespaces: ['*'], resources: ['*'], verbs: ['get', 'list', 'delete', 'log'] },
      { clusters: ['a'], namespaces: ['*'], resources: ['secrets'], verbs: ['get'] },
    ]);
    const asked: string[] = [];
    const reach = await authorizer.namespacesFor(person, 'a', NAMESPACES, async (ns) => {
      asked.push(ns);
      return ns === 'shop' ? [...BASIC, ...VIEW] : BASIC;
    });
    assert.deepEqual(reach, [{ name: 'shop', verbs: ['get', 'list', 'log'] }]);
    assert.deepEqual(asked.sort(), [...NAMESPACES].sort(), 'each namespace the rules cover is asked');
  });

  test('the cluster granting only Secrets does not count for a * of the service (which never covers them)', async () => {
    const person = caller([{ clusters: ['a'], namespaces: ['shop'], resources: ['*'], verbs: ['get'] }]);
    const secrets = [{ verbs: ['get'], apiGroups: [''], resources: ['secrets'] }];
    assert.deepEqual(await authorizer.namespacesFor(person, 'a', NAMESPACES, async () => secrets), []);
    const named = caller([{ clusters: ['a'], namespaces: ['shop'], resources: ['deployments.apps/status'], verbs: ['patch'] }]);
    const status = [{ verbs: ['patch'], apiGroups: ['apps'], resources: ['deployments/status'] }];
    assert.deepEqual(await authorizer.namespacesFor(named, 'a', NAMESPACES, async () => status), [
      { name: 'shop', verbs: ['patch'] },
    ]);
    const everything = [{ verbs: ['*'], apiGroups: ['*'], resources: ['*'] }];
    assert.deepEqual(await authorizer.namespacesFor(named, 'a', NAMESPACES, async () => everything), [
      { name: 'shop', verbs: ['patch'] },
    ]);
  });

  test('the cluster has no say (undefined): the rules alone', async () => {
    const person = caller([{ clusters: ['a'], namespaces: ['web'], resources: ['pods'], verbs: ['exec'] }]);
    assert.deepEqual(await authorizer.namespacesFor(person, 'a', NAMESPACES, async () => undefined), [
      { name: 'web', verbs: ['exec'] },
    ]);
  });
});
