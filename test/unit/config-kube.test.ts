// Configuration of the Kubernetes API path (issue 30): the public URL kubeconfigs point at, the CA they
// carry, the longest key lifetime, and the service's own TLS. A bad value stops start-up naming it.
import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { ConfigError, loadConfig } from '../../src/config/config.js';

const CERT = '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n';
const KEY = '-----BEGIN PRIVATE KEY-----\nMIIB\n-----END PRIVATE KEY-----\n';

describe('configuration of the Kubernetes API path', () => {
  let dir: string;
  let cert: string;
  let key: string;
  let notPem: string;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'cas-config-kube-'));
    [cert, key, notPem] = [join(dir, 'tls.crt'), join(dir, 'tls.key'), join(dir, 'notes.txt')];
    await writeFile(cert, CERT);
    await writeFile(key, KEY);
    await writeFile(notPem, 'hello');
  });
  after(() => rm(dir, { recursive: true, force: true }));

  test('defaults: the loopback URL, no CA, 7 days at most, no TLS', () => {
    const config = loadConfig({});
    assert.deepEqual(config.kube, {
      publicUrl: 'http://localhost:8080',
      publicCaFile: undefined,
      kubeconfigMaxSeconds: 7 * 86400,
    });
    assert.equal(config.tls, undefined);
  });

  test('CAS_PUBLIC_URL, CAS_PUBLIC_CA_FILE and CAS_KUBECONFIG_MAX_SECONDS are taken', () => {
    const config = loadConfig({
      CAS_PUBLIC_URL: 'https://cas.example.com/',
      CAS_PUBLIC_CA_FILE: cert,
      CAS_KUBECONFIG_MAX_SECONDS: '3600',
    });
    assert.deepEqual(config.kube, {
      publicUrl: 'https://cas.example.com',
      publicCaFile: cert,
      kubeconfigMaxSeconds: 3600,
    });
  });

  test('with TLS the default public URL is https, and both files are kept', () => {
    const config = loadConfig({ CAS_TLS_CERT_FILE: cert, CAS_TLS_KEY_FILE: key, PORT: '8443' });
    assert.deepEqual(config.tls, { certFile: cert, keyFile: key });
    assert.equal(config.kube.publicUrl, 'https://localhost:8443');
  });

  const refused: Array<[string, Record<string, string>, RegExp]> = [
    ['a certificate without its key', { CAS_TLS_CERT_FILE: '' }, /CAS_TLS_CERT_FILE and CAS_TLS_KEY_FILE/],
    ['a missing file', { CAS_PUBLIC_CA_FILE: '/nonexistent/ca.crt' }, /CAS_PUBLIC_CA_FILE cannot be read: ENOENT/],
    ['a CA file that is not PEM', { CAS_PUBLIC_CA_FILE: '' }, /CAS_PUBLIC_CA_FILE must be a PEM file/],
    [
      'a key file holding a certificate',
      { CAS_TLS_CERT_FILE: '', CAS_TLS_KEY_FILE: '' },
      /CAS_TLS_KEY_FILE must be a PEM/,
    ],
    ['a maximum of 0', { CAS_KUBECONFIG_MAX_SECONDS: '0' }, /CAS_KUBECONFIG_MAX_SECONDS must be an integer from 60/],
    ['a maximum above a year', { CAS_KUBECONFIG_MAX_SECONDS: '99999999' }, /CAS_KUBECONFIG_MAX_SECONDS/],
    ['a public URL over plain http', { CAS_PUBLIC_URL: 'http://cas.example.com' }, /CAS_PUBLIC_URL must be an https/],
  ];
  for (const [what, env, message] of refused) {
    test(`refused: ${what}`, () => {
      // '' placeholders name the files made in before()
      const filled: Record<string, string> = {};
      for (const [name, value] of Object.entries(env)) {
        if (value !== '') filled[name] = value;
        else if (name === 'CAS_TLS_CERT_FILE') filled[name] = cert;
        else if (name === 'CAS_TLS_KEY_FILE') filled[name] = cert;
        else filled[name] = notPem;
      }
      assert.throws(
        () => loadConfig(filled),
        (error: unknown) => error instanceof ConfigError && message.test(error.message),
      );
    });
  }
});
