import assert from 'node:assert/strict';
import { before, describe, test } from 'node:test';
import { parse } from 'yaml';
import {
  allContexts,
  KubeconfigError,
  selectContext,
  toStoredKubeconfig,
  type KubeconfigContext,
} from '../../src/clusters/kubeconfig.js';
import { b64, kubeconfigYaml, testCertificates, type ContextSpec } from '../support/kubeconfigs.js';

const TOKEN = 'secret-token-0123456789abcdef';
let certs: Awaited<ReturnType<typeof testCertificates>>;

function problemsOf(text: string, select: (t: string) => unknown = selectContext): string[] {
  try {
    select(text);
  } catch (error) {
    assert.ok(error instanceof KubeconfigError, `a KubeconfigError, got ${String(error)}`);
    return error.problems;
  }
  assert.fail('expected the kubeconfig to be refused');
}

function ctx(name: string, user: Record<string, unknown>, cluster: Record<string, unknown> = {}): ContextSpec {
  return {
    name,
    cluster: { server: 'https://127.0.0.1:6443', 'certificate-authority-data': b64(certs.caData), ...cluster },
    user,
  };
}

describe('kubeconfig validation', () => {
  before(async () => {
    certs = await testCertificates();
  });

  test('a token context is selected and normalised', () => {
    const selected = selectContext(kubeconfigYaml([{ ...ctx('prod', { token: TOKEN }), namespace: 'apps' }]));
    assert.deepEqual(selected, {
      name: 'prod',
      namespace: 'apps',
      clusterName: 'prod-cluster',
      cluster: {
        server: 'https://127.0.0.1:6443',
        certificateAuthorityData: b64(certs.caData),
        insecureSkipTlsVerify: false,
      },
      userName: 'prod-user',
      user: { token: TOKEN },
    });
  });

  test('client certificate, basic auth, tls-server-name, path prefix and insecure-skip-tls-verify are accepted', () => {
    const cert = selectContext(
      kubeconfigYaml([
        ctx(
          'c',
          { 'client-certificate-data': b64(certs.certData), 'client-key-data': b64(certs.keyData) },
          { 'tls-server-name': 'kubernetes.default', server: 'https://example.com:8443/k8s/' },
        ),
      ]),
    );
    assert.equal(cert.user.clientCertificateData, b64(certs.certData));
    assert.equal(cert.user.clientKeyData, b64(certs.keyData));
    assert.equal(cert.cluster.tlsServerName, 'kubernetes.default');
    assert.equal(cert.cluster.server, 'https://example.com:8443/k8s', 'trailing slash dropped');

    const basic = selectContext(
      kubeconfigYaml([
        {
          name: 'b',
          cluster: { server: 'https://10.0.0.1', 'insecure-skip-tls-verify': true },
          user: { username: 'admin', password: 'pw' },
        },
      ]),
    );
    assert.deepEqual(basic.user, { username: 'admin', password: 'pw' });
    assert.equal(basic.cluster.insecureSkipTlsVerify, true);
  });

  test('current-context chooses among several; the only context is chosen without it', () => {
    const three = [ctx('a', { token: 'ta' }), ctx('b', { token: 'tb' }), ctx('c', { token: 'tc' })];
    assert.equal(selectContext(kubeconfigYaml(three, 'b')).user.token, 'tb');
    assert.equal(selectContext(kubeconfigYaml([ctx('only', { token: 't' })], null)).name, 'only');
    assert.match(problemsOf(kubeconfigYaml(three, null)).join(), /3 contexts and no current-context/);
    assert.match(problemsOf(kubeconfigYaml(three, 'zzz')).join(), /current-context 'zzz' is not one of the contexts/);
    assert.match(problemsOf('apiVersion: v1\nkind: Config\n').join(), /no usable context/);
  });

  test('programs and host files are refused, naming the field', () => {
    const cases: Array<[ContextSpec, RegExp]> = [
      [
        ctx('x', { exec: { command: '/bin/sh', args: ['-c', 'id'], apiVersion: 'client.authentication.k8s.io/v1' } }),
        /^users\[0\]\.user\.exec is not allowed: a stored kubeconfig must never run a program$/,
      ],
      [ctx('x', { 'auth-provider': { name: 'gcp', config: {} } }), /^users\[0\]\.user\.auth-provider is not allowed/],
      [ctx('x', { tokenFile: '/etc/shadow' }), /^users\[0\]\.user\.tokenFile is not allowed: .*never read a file/],
      [ctx('x', { 'token-file': '/etc/shadow' }), /^users\[0\]\.user\.token-file is not allowed/],
      [
        ctx('x', { 'client-certificate': '/tmp/c.crt', 'client-key-data': b64(certs.keyData) }),
        /^users\[0\]\.user\.client-certificate is not allowed: .*use client-certificate-data/,
      ],
      [ctx('x', { 'client-key': '/tmp/k.key', token: 't' }), /^users\[0\]\.user\.client-key is not allowed/],
      [
        ctx('x', { token: 't' }, { 'certificate-authority': '/etc/ca.crt', 'certificate-authority-data': undefined }),
        /^clusters\[0\]\.cluster\.certificate-authority is not allowed: .*use certificate-authority-data/,
      ],
      [
        ctx('x', { token: 't' }, { 'proxy-url': 'http://proxy:3128' }),
        /^clusters\[0\]\.cluster\.proxy-url is not allowed/,
      ],
      [ctx('x', { token: 't', as: 'system:admin' }), /^users\[0\]\.user\.as is not allowed: impersonation/],
    ];
    for (const [spec, pattern] of cases) {
      const problems = problemsOf(kubeconfigYaml([spec]));
      assert.ok(
        problems.some((p) => pattern.test(p)),
        `${JSON.stringify(spec.user)} → ${problems.join(' | ')}`,
      );
    }
  });

  test('credentials must be inline, complete and well-formed', () => {
    const cases: Array<[ContextSpec, RegExp]> = [
      [ctx('x', {}), /users\[0\]\.user has no inline credentials/],
      [ctx('x', { username: 'u' }), /username and users\[0\]\.user\.password must be given together/],
      [ctx('x', { token: 't', username: 'u', password: 'p' }), /token or username and password, not both/],
      [
        ctx('x', { 'client-certificate-data': b64(certs.certData) }),
        /client-certificate-data and users\[0\]\.user\.client-key-data must be given together/,
      ],
      [
        ctx('x', { 'client-certificate-data': b64(certs.certData), 'client-key-data': b64(certs.otherKeyData) }),
        /users\[0\]\.user\.client-key-data is not the key of client-certificate-data/,
      ],
      [
        ctx('x', { 'client-certificate-data': 'not base64!', 'client-key-data': b64(certs.keyData) }),
        /users\[0\]\.user\.client-certificate-data must be base64/,
      ],
      [
        ctx('x', { 'client-certificate-data': b64('hello'), 'client-key-data': b64(certs.keyData) }),
        /client-certificate-data must be base64 of PEM certificates/,
      ],
      [ctx('x', { token: 42 }), /users\[0\]\.user\.token must be a string/],
      [
        ctx('x', { token: 't' }, { 'certificate-authority-data': b64('junk') }),
        /certificate-authority-data must be base64 of PEM/,
      ],
      [ctx('x', { token: 't' }, { server: undefined }), /clusters\[0\]\.cluster\.server is required/],
      [ctx('x', { token: 't' }, { server: 'http://127.0.0.1:8080' }), /server must be an https:\/\/ URL/],
      [ctx('x', { token: 't' }, { server: 'https://u:p@host' }), /server must not carry credentials/],
      [
        ctx('x', { token: 't' }, { 'insecure-skip-tls-verify': true }),
        /insecure-skip-tls-verify cannot be true together with certificate-authority-data/,
      ],
    ];
    for (const [spec, pattern] of cases) {
      const problems = problemsOf(kubeconfigYaml([spec]));
      assert.ok(
        problems.some((p) => pattern.test(p)),
        `${pattern} → ${problems.join(' | ')}`,
      );
    }
  });

  test('contexts must name a defined cluster and user', () => {
    const text = `
current-context: c
contexts:
- name: c
  context: {cluster: nowhere, user: nobody}
clusters: []
users: []
`;
    const problems = problemsOf(text);
    assert.ok(problems.includes("contexts[0].context.cluster 'nowhere' is not one of the clusters"), problems.join());
    assert.ok(problems.includes("contexts[0].context.user 'nobody' is not one of the users"), problems.join());
  });

  test('not YAML, not a kubeconfig: 400-ready messages that never quote the document', () => {
    const broken = `users:\n- name: u\n  user:\n    token: ${TOKEN}: [unclosed\n`;
    const problems = problemsOf(broken);
    assert.equal(problems.length, 1);
    assert.match(problems[0], /^config is not valid YAML: .* at line \d+, column \d+$/);
    assert.ok(!problems[0].includes(TOKEN));
    assert.match(problemsOf('').join(), /config is empty/);
    assert.match(problemsOf('just a string').join(), /must be a kubeconfig/);
    assert.match(problemsOf('a: 1\na: 2\n').join(), /not valid YAML/);
    assert.match(problemsOf('contexts: {}\n').join(), /contexts must be a list/);
  });

  test('only the selected context, its cluster and its user are stored; a stored one reads back the same', () => {
    const text = kubeconfigYaml(
      [
        ctx('a', { token: 'token-of-a' }),
        ctx('b', { 'client-certificate-data': b64(certs.certData), 'client-key-data': b64(certs.keyData) }),
        ctx('c', { token: 'token-of-c' }),
      ],
      'b',
    );
    const selected = selectContext(text);
    const stored = toStoredKubeconfig(selected);
    assert.ok(!stored.includes('token-of-a') && !stored.includes('token-of-c'));
    const doc = parse(stored);
    assert.deepEqual(
      [doc.clusters.length, doc.users.length, doc.contexts.length, doc['current-context']],
      [1, 1, 1, 'b'],
    );
    assert.deepEqual(selectContext(stored), selected);
  });

  test('import: every context, or every problem of every context', () => {
    const good = allContexts(
      kubeconfigYaml([ctx('one', { token: '1' }), ctx('two', { token: '2' }), ctx('three', { token: '3' })], 'two'),
    );
    assert.deepEqual(
      good.contexts.map((c: KubeconfigContext) => c.name),
      ['one', 'two', 'three'],
    );
    assert.equal(good.currentContext, 'two');

    const problems = problemsOf(
      kubeconfigYaml([
        ctx('ok', { token: '1' }),
        ctx('bad name', { token: '2' }),
        ctx('runs', { exec: { command: 'x' } }),
      ]),
      allContexts,
    );
    assert.deepEqual(problems, [
      "contexts[1].name 'bad name' cannot be a cluster name: use 1–253 printable ASCII characters without spaces",
      'users[2].user.exec is not allowed: a stored kubeconfig must never run a program',
    ]);
  });
});
