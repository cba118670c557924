// A request on the Kubernetes path is decided by the one authorizer, named as the resource routes name
// it; what the rules cannot express is refused to everyone but an admin, never let through.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { Authorizer } from '../../src/access/authorizer.js';
import type { AccessRule } from '../../src/access/rules.js';
import type { Caller } from '../../src/access/caller.js';
import { BUILT_IN_RULES } from '../../src/database/migrations/common/1795351998878-RoleRulesKeyOwners.data.js';
import { decideKubeAccess, kubeAccessOf } from '../../src/kube/kube-access.js';
import { parseRequestInfo } from '../../src/k8s/request-info.js';

const authorizer = new Authorizer();
const ROLES: Record<string, AccessRule[]> = {
  ...BUILT_IN_RULES,
  'shop-dev': [
    {
      clusters: ['a'],
      namespaces: ['shop'],
      resources: ['deployments.apps', 'pods', 'configmaps'],
      verbs: ['get', 'list', 'watch', 'patch', 'update', 'delete', 'log'],
    },
  ],
  'other-cluster': [{ clusters: ['b'], namespaces: ['*'], resources: ['*'], verbs: ['*'] }],
  'shop-status': [{ clusters: ['a'], namespaces: ['shop'], resources: ['deployments.apps/status'], verbs: ['patch'] }],
  'shop-term': [{ clusters: ['a'], namespaces: ['shop'], resources: ['pods'], verbs: ['get', 'exec', 'portforward'] }],
  star: [{ clusters: ['a'], namespaces: ['*'], resources: ['*'], verbs: ['*'] }],
};

function caller(role: string): Caller {
  return {
    kind: 'user',
    id: 1,
    name: 'someone',
    roles: [role],
    isAdmin: role === 'admin',
    rules: (ROLES[role] ?? []).map((rule) => ({ role, ...rule })),
    userId: 1,
    sessionId: null,
    userName: 'u',
    keyExpiresAt: null,
  };
}

function decide(role: string, method: string, url: string) {
  const [path, search = ''] = url.split('?');
  const info = parseRequestInfo(method, path, new URLSearchParams(search));
  const access = kubeAccessOf(info, 'a');
  return { access, decision: decideKubeAccess(authorizer, caller(role), access, 'a') };
}

/** [role, method, url, allowed, what the authorizer is asked (verb resource namespace) or the reason's words] */
const CASES: Array<[string, string, string, boolean, string]> = [
  ['shop-dev', 'GET', '/api/v1/namespaces/shop/pods', true, 'list pods shop'],
  ['shop-dev', 'GET', '/api/v1/namespaces/shop/pods?watch=1', true, 'watch pods shop'],
  ['shop-dev', 'GET', '/api/v1/watch/namespaces/shop/pods', true, 'watch pods shop'],
  ['shop-dev', 'GET', '/api/v1/pods', false, 'list pods null'],
  ['shop-dev', 'GET', '/api/v1/namespaces/other/pods', false, 'list pods other'],
  ['shop-dev', 'GET', '/apis/apps/v1/namespaces/shop/deployments/web', true, 'get deployments.apps shop'],
  ['shop-dev', 'POST', '/apis/apps/v1/namespaces/shop/deployments', false, 'create deployments.apps shop'],
  ['shop-dev', 'DELETE', '/api/v1/namespaces/shop/configmaps', true, 'delete configmaps shop'],
  ['shop-dev', 'DELETE', '/api/v1/configmaps', false, 'delete configmaps null'],
  ['shop-dev', 'GET', '/api/v1/namespaces/shop/pods/p/log', true, 'log pods shop'],
  ['viewer', 'GET', '/api/v1/namespaces/shop/pods/p/log?follow=true', true, 'log pods shop'],
  ['shop-dev', 'PATCH', '/apis/apps/v1/namespaces/shop/deployments/web/scale', true, 'patch deployments.apps shop'],
  // writing status needs a rule naming `<resource>/status` (RBAC keeps it apart from the object)
  [
    'shop-dev',
    'PUT',
    '/apis/apps/v1/namespaces/shop/deployments/web/status',
    false,
    'update deployments.apps/status shop',
  ],
  ['shop-dev', 'PATCH', '/api/v1/namespaces/shop/pods/p/status', false, 'patch pods/status shop'],
  ['shop-dev', 'GET', '/apis/apps/v1/namespaces/shop/deployments/web/status', true, 'get deployments.apps shop'],
  [
    'shop-status',
    'PATCH',
    '/apis/apps/v1/namespaces/shop/deployments/web/status',
    true,
    'patch deployments.apps/status shop',
  ],
  [
    'shop-status',
    'PUT',
    '/apis/apps/v1/namespaces/shop/deployments/web/status',
    false,
    'update deployments.apps/status shop',
  ],
  [
    'shop-status',
    'PATCH',
    '/apis/apps/v1/namespaces/other/deployments/web/status',
    false,
    'patch deployments.apps/status other',
  ],
  ['viewer', 'GET', '/apis/apps/v1/namespaces/shop/deployments/web/scale', true, 'get deployments.apps shop'],
  ['viewer', 'PATCH', '/apis/apps/v1/namespaces/shop/deployments/web/scale', false, 'patch deployments.apps shop'],
  ['viewer', 'GET', '/api/v1/namespaces/shop', true, 'get namespaces null'],
  ['shop-dev', 'GET', '/api/v1/namespaces/shop', false, 'get namespaces null'],
  ['viewer', 'GET', '/api/v1/namespaces/shop/secrets', false, 'list secrets shop'],
  ['viewer', 'GET', '/api/v1/nodes', true, 'list nodes null'],
  // what the rules cannot express: admin only
  // The terminal's verbs: granted only by a rule naming them; WebSocket GET and SPDY POST alike.
  ['shop-dev', 'POST', '/api/v1/namespaces/shop/pods/p/exec', false, 'do not allow exec on pods'],
  ['shop-dev', 'GET', '/api/v1/namespaces/shop/pods/p/attach', false, 'do not allow attach on pods'],
  ['shop-dev', 'POST', '/api/v1/namespaces/shop/pods/p/portforward', false, 'do not allow portforward on pods'],
  ['shop-term', 'GET', '/api/v1/namespaces/shop/pods/p/exec', true, 'role shop-term'],
  ['shop-term', 'POST', '/api/v1/namespaces/shop/pods/p/portforward', true, 'role shop-term'],
  ['shop-term', 'GET', '/api/v1/namespaces/other/pods/p/exec', false, "namespace 'other'"],
  ['shop-term', 'GET', '/api/v1/namespaces/shop/pods/p/attach', false, 'do not allow attach on pods'],
  ['star', 'GET', '/api/v1/namespaces/shop/pods/p/exec', false, "names the verb 'exec'"],
  ['star', 'GET', '/api/v1/namespaces/shop/pods/p', true, 'role star'],
  ['viewer', 'GET', '/api/v1/namespaces/shop/pods/p/exec', false, 'do not allow exec on pods'],
  ['shop-dev', 'POST', '/api/v1/namespaces/shop/pods/p/eviction', false, 'only the admin role'],
  ['viewer', 'GET', '/api/v1/namespaces/shop/services/s/proxy/x', false, 'only the admin role'],
  ['viewer', 'GET', '/api/v1/proxy/nodes/n1', false, 'only the admin role'],
  ['viewer', 'GET', '/healthz', false, 'only the admin role'],
  ['viewer', 'GET', '/metrics', false, 'only the admin role'],
  ['viewer', 'POST', '/version', false, 'only the admin role'],
  ['admin', 'POST', '/api/v1/namespaces/shop/pods/p/exec', true, 'role admin'],
  ['admin', 'GET', '/healthz', true, 'role admin'],
  // discovery: any rule on the cluster
  ['shop-dev', 'GET', '/version', true, 'role shop-dev'],
  ['shop-dev', 'GET', '/api', true, 'role shop-dev'],
  ['shop-dev', 'GET', '/apis/apps/v1', true, 'role shop-dev'],
  ['shop-dev', 'GET', '/openapi/v2', true, 'role shop-dev'],
  ['other-cluster', 'GET', '/version', false, "grant nothing on cluster 'a'"],
  ['other-cluster', 'GET', '/api/v1/namespaces/shop/pods', false, "grant nothing on cluster 'a'"],
  // nothing allows these
  ['admin', 'OPTIONS', '/api/v1/namespaces/shop/pods', false, 'no verb'],
  ['admin', 'GET', '/api/v1/namespaces/shop/Pods', false, 'not a resource name'],
];

describe('the Kubernetes path asks the one authorizer', () => {
  for (const [role, method, url, allowed, expected] of CASES) {
    test(`${role}: ${method} ${url} → ${allowed ? 'allowed' : 'refused'}`, () => {
      const { access, decision } = decide(role, method, url);
      assert.equal(decision.allowed, allowed, decision.reason);
      if (access.kind === 'resource' && /^[a-z]+ \S+ \S+$/.test(expected)) {
        const { verb, resource, namespace } = access.request;
        assert.equal(`${verb} ${resource} ${namespace}`, expected);
      } else {
        assert.ok(decision.reason.includes(expected), `${decision.reason} should say ${expected}`);
      }
    });
  }

  test("a refusal names what is missing in the authorizer's words", () => {
    const { decision } = decide('shop-dev', 'GET', '/api/v1/namespaces/other/pods');
    assert.match(decision.reason, /namespace 'other'.*they allow it in namespaces: shop/);
  });
});
