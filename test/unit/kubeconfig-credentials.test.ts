import { KubeConfig } from '@kubernetes/client-node';
import assert from 'node:assert/strict';
import type { RequestOptions } from 'node:https';
import { before, describe, test } from 'node:test';
import { credentialsOf, selectContext } from '../../src/clusters/kubeconfig.js';
import { b64, kubeconfigYaml, testCertificates } from '../support/kubeconfigs.js';

let certs: Awaited<ReturnType<typeof testCertificates>>;

/** What client-node makes of the same stored context: the reference the service's own conversion must match. */
async function viaClientNode(yaml: string) {
  const kc = new KubeConfig();
  kc.loadFromString(yaml);
  const options: RequestOptions = {};
  await kc.applyToHTTPSOptions(options);
  const header = (options.headers as Record<string, string> | undefined)?.Authorization;
  return {
    ca: options.ca?.toString(),
    cert: options.cert?.toString(),
    key: options.key?.toString(),
    authorization: header ?? (options.auth ? `Basic ${Buffer.from(options.auth).toString('base64')}` : undefined),
  };
}

function ours(yaml: string) {
  const c = credentialsOf(selectContext(yaml));
  return { ca: c.ca?.toString(), cert: c.cert?.toString(), key: c.key?.toString(), authorization: c.authorization };
}

describe('connection credentials of a stored context', () => {
  before(async () => {
    certs = await testCertificates();
  });

  const cases: Array<[string, () => Record<string, unknown>, () => Record<string, unknown>]> = [
    ['a bearer token', () => ({ token: 'secret-token-0123456789' }), () => ({})],
    [
      'a client certificate and key',
      () => ({ 'client-certificate-data': b64(certs.certData), 'client-key-data': b64(certs.keyData) }),
      () => ({}),
    ],
    ['basic auth', () => ({ username: 'someone', password: 'pass:with:colons' }), () => ({})],
    [
      'no CA, skip verification',
      () => ({ token: 'another-token-0123456789' }),
      () => ({ 'insecure-skip-tls-verify': true }),
    ],
  ];
  for (const [what, user, cluster] of cases) {
    test(`${what}: the same TLS material and Authorization as client-node's applyToHTTPSOptions`, async () => {
      const caField = (cluster() as { 'insecure-skip-tls-verify'?: boolean })['insecure-skip-tls-verify']
        ? {}
        : { 'certificate-authority-data': b64(certs.caData) };
      const yaml = kubeconfigYaml([
        { name: 'c', cluster: { server: 'https://127.0.0.1:6443', ...caField, ...cluster() }, user: user() },
      ]);
      const expected = await viaClientNode(yaml);
      assert.deepEqual(ours(yaml), expected);
      assert.ok(expected.authorization || expected.cert, 'the case carries a credential');
    });
  }
});
