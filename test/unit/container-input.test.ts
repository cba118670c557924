// Issue 43: what a debug container or node shell may be asked to run, and who may ask.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { Authorizer } from '../../src/access/authorizer.js';
import type { Caller } from '../../src/access/caller.js';
import { commandProblem, containerNameProblem, ephemeralApiOf, imageProblem } from '../../src/k8s/container-input.js';
import { DebugService } from '../../src/debug/debug.service.js';
import { kubeAccessOf } from '../../src/kube/kube-access.js';
import { parseRequestInfo } from '../../src/k8s/request-info.js';

describe('debug input', () => {
  test('image references: registries, ports, paths, tags and digests pass; anything a shell would read does not', () => {
    for (const ok of [
      'busybox',
      'busybox:1.36',
      'library/busybox:latest',
      'registry.example.com:5000/tools/netshoot:v0.11',
      'ghcr.io/org/debug-tools@sha256:' + 'a'.repeat(64),
      'nicolaka/netshoot:v0.11_rc-1',
    ]) {
      assert.equal(imageProblem(ok), null, ok);
    }
    for (const bad of [
      '',
      'busybox; rm -rf /',
      'busybox && sh',
      '$(id)',
      '`id`',
      'busy box',
      'Busybox',
      'busybox:tag with space',
      'busybox\n',
      'busybox:' + 'x'.repeat(129),
      'a'.repeat(513),
      '../busybox',
      'busybox@sha256:short',
      "busybox'",
      42,
      null,
    ]) {
      assert.notEqual(imageProblem(bad), null, JSON.stringify(bad));
    }
    assert.match(imageProblem('x'.repeat(600))!, /at most 512/);
  });

  test('container names are DNS labels of at most 63 characters', () => {
    assert.equal(containerNameProblem('name', 'debugger-x7k2p'), null);
    assert.match(containerNameProblem('target', 'App')!, /^target must be a container name/);
    assert.match(containerNameProblem('name', 'a'.repeat(64))!, /^name must be at most 63/);
    assert.match(containerNameProblem('name', '-a')!, /container name/);
    assert.match(containerNameProblem('name', 'a;b')!, /container name/);
    assert.match(containerNameProblem('name', '')!, /non-empty/);
  });

  test('commands are an argv: bounded, strings, no control characters; shell characters are just characters', () => {
    assert.equal(commandProblem(['sh']), null);
    assert.equal(
      commandProblem(['sh', '-c', 'echo $HOME; ls | wc -l']),
      null,
      'an argument is never read by a shell of ours',
    );
    assert.match(commandProblem([])!, /non-empty array/);
    assert.match(commandProblem('sh -c id')!, /non-empty array/);
    assert.match(commandProblem(['sh', 3])!, /command\[1\] must be a string/);
    assert.match(commandProblem(['sh', 'a\u0000b'])!, /control characters/);
    assert.match(commandProblem(['sh', 'a\nb'])!, /control characters/);
    assert.match(commandProblem([''])!, /must not be empty/);
    assert.match(commandProblem(Array(65).fill('x'))!, /at most 64 arguments/);
    assert.match(commandProblem(['x'.repeat(4097)])!, /at most 4096 characters/);
    assert.match(commandProblem(Array(5).fill('x'.repeat(4000)))!, /16384 bytes/);
  });

  test('the subresource takes EphemeralContainers on v1.16–v1.21, a Pod from v1.22, and nothing before', () => {
    assert.equal(ephemeralApiOf('1', '15'), null);
    assert.equal(ephemeralApiOf('1', '16'), 'EphemeralContainers');
    assert.equal(ephemeralApiOf('1', '20+'), 'EphemeralContainers');
    assert.equal(ephemeralApiOf('1', '21'), 'EphemeralContainers');
    assert.equal(ephemeralApiOf('1', '22'), 'Pod');
    assert.equal(ephemeralApiOf('1', '35'), 'Pod');
    assert.equal(ephemeralApiOf('', ''), null);
  });
});

describe('the debugging grants', () => {
  const authorizer = new Authorizer();
  const caller = (rules: Array<{ resources: string[]; verbs: string[]; namespaces?: string[] }>): Caller => ({
    kind: 'user',
    id: 1,
    name: 'dev',
    roles: ['r'],
    isAdmin: false,
    rules: rules.map((r) => ({ role: 'r', clusters: ['a'], namespaces: r.namespaces ?? ['shop'], ...r })),
    userId: 1,
    userName: 'dev',
    keyExpiresAt: null,
    sessionId: null,
  });
  const debug = { verb: 'update' as const, cluster: 'a', resource: 'pods/ephemeralcontainers', namespace: 'shop' };
  const shell = { verb: 'create' as const, cluster: 'a', resource: 'nodes/shell', namespace: null };

  test("a rule naming both grants them; '*' in resources or verbs covers neither", () => {
    assert.equal(
      authorizer.can(caller([{ resources: ['pods/ephemeralcontainers'], verbs: ['update'] }]), debug).allowed,
      true,
    );
    assert.equal(
      authorizer.can(caller([{ resources: ['nodes/shell'], verbs: ['create'], namespaces: ['*'] }]), shell).allowed,
      true,
    );
    for (const rules of [
      [{ resources: ['*'], verbs: ['*'], namespaces: ['*'] }],
      [{ resources: ['pods/ephemeralcontainers', 'nodes/shell'], verbs: ['*'], namespaces: ['*'] }],
      [{ resources: ['*'], verbs: ['update', 'create'], namespaces: ['*'] }],
      [{ resources: ['pods'], verbs: ['update', 'exec', 'attach'], namespaces: ['*'] }],
    ]) {
      for (const request of [debug, shell]) {
        const decision = authorizer.can(caller(rules), request);
        assert.equal(decision.allowed, false, JSON.stringify({ rules, request }));
        assert.match(decision.reason, /names both .* \(a '\*' covers neither\)/);
      }
    }
    // A node shell is cluster-wide: the rule needs every namespace.
    assert.equal(authorizer.can(caller([{ resources: ['nodes/shell'], verbs: ['create'] }]), shell).allowed, false);
  });

  test('kubectl debug on the Kubernetes path needs the same grant; reading the subresource is reading the pod', () => {
    const info = (method: string, path: string) => parseRequestInfo(method, path, new URLSearchParams());
    const patch = kubeAccessOf(info('PATCH', '/api/v1/namespaces/shop/pods/web-0/ephemeralcontainers'), 'a');
    assert.deepEqual(patch, { kind: 'resource', request: debug });
    const put = kubeAccessOf(info('PUT', '/api/v1/namespaces/shop/pods/web-0/ephemeralcontainers'), 'a');
    assert.deepEqual(put, { kind: 'resource', request: debug });
    const get = kubeAccessOf(info('GET', '/api/v1/namespaces/shop/pods/web-0/ephemeralcontainers'), 'a');
    assert.deepEqual(get, {
      kind: 'resource',
      request: { verb: 'get', cluster: 'a', resource: 'pods', namespace: 'shop' },
    });
  });
});

/**
 * The debug route's choice by the cluster's version, against a stand-in of the service's own client seam
 * (a real apiserver cannot be made to report v1.15 or v1.30: the e2e tests cover v1.20 end to end).
 */
describe('the debug route by cluster version', () => {
  const admin: Caller = {
    kind: 'user',
    id: 1,
    name: 'root',
    roles: ['admin'],
    isAdmin: true,
    rules: [],
    userId: 1,
    userName: 'root',
    keyExpiresAt: null,
    sessionId: null,
  };
  function cluster(version: { major: string; minor: string; gitVersion: string }) {
    const calls: Array<{ method: string; path: string; contentType?: string; body?: string }> = [];
    let added: unknown;
    const client = {
      target: "cluster 'old'",
      send: async (call: { method: string; path: string; contentType?: string; body?: Buffer }) => {
        calls.push({ ...call, body: call.body?.toString('utf8') });
        let answer: [number, unknown];
        if (call.path === '/version') answer = [200, version];
        else if (call.method === 'PATCH') {
          added = JSON.parse(call.body!.toString('utf8'));
          answer = [200, {}];
        } else {
          answer = [
            200,
            {
              spec: { containers: [{ name: 'app' }] },
              status: added ? { ephemeralContainerStatuses: [{ name: 'dbg', state: { running: {} } }] } : {},
            },
          ];
        }
        return { statusCode: answer[0], body: Buffer.from(JSON.stringify(answer[1])) };
      },
      read: async (res: { body: Buffer }) => res.body,
    };
    const gateway = { clientFor: async () => client };
    const config = { debug: { startMs: 1000 } } as never;
    return { service: new DebugService(config, new Authorizer(), gateway as never), calls };
  }
  const add = (service: DebugService) =>
    service.addDebugContainer(
      admin,
      'old',
      'shop',
      'web-0',
      { image: 'busybox', name: 'dbg', target: 'app' },
      () => {},
    );

  test('v1.15: 409 naming the version, and nothing is sent but /version', async () => {
    const { service, calls } = cluster({ major: '1', minor: '15', gitVersion: 'v1.15.12' });
    await assert.rejects(add(service), (error: Error & { getStatus(): number }) => {
      assert.equal(error.getStatus(), 409);
      assert.match(error.message, /runs Kubernetes v1\.15\.12, which has no ephemeral containers/);
      return true;
    });
    assert.deepEqual(
      calls.map((c) => c.path),
      ['/version'],
    );
  });

  test('v1.30: a strategic merge patch of the Pod; v1.20: a JSON patch of EphemeralContainers', async () => {
    const modern = cluster({ major: '1', minor: '30', gitVersion: 'v1.30.1' });
    assert.equal((await add(modern.service)).api, 'Pod');
    const patch = modern.calls.find((c) => c.method === 'PATCH')!;
    assert.equal(patch.path, '/api/v1/namespaces/shop/pods/web-0/ephemeralcontainers');
    assert.equal(patch.contentType, 'application/strategic-merge-patch+json');
    assert.equal(JSON.parse(patch.body!).spec.ephemeralContainers[0].targetContainerName, 'app');
    const alpha = cluster({ major: '1', minor: '20', gitVersion: 'v1.20.2' });
    assert.equal((await add(alpha.service)).api, 'EphemeralContainers');
    const json = alpha.calls.find((c) => c.method === 'PATCH')!;
    assert.equal(json.contentType, 'application/json-patch+json');
    assert.equal(JSON.parse(json.body!)[0].path, '/ephemeralContainers/-');
  });
});
