import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { Authorizer, type Verb } from '../../src/access/authorizer.js';
import type { Caller } from '../../src/auth/caller.js';
import type { RoleName } from '../../src/users/role.entity.js';

const authorizer = new Authorizer();

function caller(roles: RoleName[], kind: Caller['kind'] = 'user'): Caller {
  return { kind, id: 1, name: 'someone', roles, isAdmin: roles.includes('admin'), sessionId: null };
}

const cases: Array<[RoleName[], Verb, string, string | null, boolean]> = [
  [['admin'], 'delete', 'secrets', 'kube-system', true],
  [['admin'], 'get', 'metrics', null, true],
  [['viewer'], 'get', 'configmaps', 'default', true],
  [['viewer'], 'list', 'deployments.apps', null, true],
  [['viewer'], 'watch', 'widgets.example.com', 'shop', true],
  [['viewer'], 'log', 'pods', 'shop', true],
  [['viewer'], 'get', 'secrets', 'default', false],
  [['viewer'], 'list', 'secrets', null, false],
  [['viewer'], 'get', 'metrics', null, false],
  [['viewer'], 'create', 'configmaps', 'default', false],
  [['viewer'], 'patch', 'deployments.apps', 'shop', false],
  [['viewer'], 'delete', 'namespaces', null, false],
  [[], 'get', 'configmaps', 'default', false],
  [[], 'list', 'namespaces', null, false],
];

describe('authorizer', () => {
  for (const [roles, verb, resource, namespace, allowed] of cases) {
    test(`${roles.join('+') || 'no role'} ${verb} ${resource} in ${namespace ?? '_all'} → ${allowed ? 'allowed' : 'refused'}`, () => {
      const request = { verb, cluster: 'a', resource, namespace };
      const decision = authorizer.can(caller(roles), request);
      assert.equal(decision.allowed, allowed, decision.reason);
      if (allowed) assert.doesNotThrow(() => authorizer.require(caller(roles), request));
      else assert.throws(() => authorizer.require(caller(roles), request), { status: 403, message: decision.reason });
    });
  }

  test('the cheap pre-check never allows what the full check refuses for every resource', () => {
    for (const [roles, verb] of cases) {
      const pre = authorizer.mayAttempt(caller(roles), verb, 'a');
      const anyAllowed = cases.some(
        ([r, v, res, ns]) =>
          r === roles &&
          v === verb &&
          authorizer.can(caller(r), { verb: v, cluster: 'a', resource: res, namespace: ns }).allowed,
      );
      if (anyAllowed) assert.equal(pre.allowed, true, `${roles} ${verb}`);
    }
    assert.equal(authorizer.mayAttempt(caller([]), 'get', 'a').allowed, false);
    assert.equal(authorizer.mayAttempt(caller(['viewer']), 'delete', 'a').allowed, false);
  });
});
