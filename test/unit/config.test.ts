import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ConfigError, loadConfig } from '../../src/config/config.js';

describe('configuration', () => {
  test('defaults', () => {
    const config = loadConfig({});
    assert.equal(config.port, 8080);
    assert.equal(config.host, '0.0.0.0');
    assert.equal(config.database.type, 'sqlite');
    assert.match(config.database.type === 'sqlite' ? config.database.path : '', /data\/cas\.sqlite$/);
    assert.equal(config.logLevel, 'info');
    assert.deepEqual(config.corsOrigins, []);
    assert.equal(config.corsMaxAgeSeconds, 600);
    assert.equal(config.encryptionKey, undefined);
    assert.deepEqual(config.clusters, {
      healthIntervalSeconds: 60,
      probeTimeoutMs: 3000,
      inClusterDir: '/var/run/secrets/kubernetes.io/serviceaccount',
      inClusterServer: '',
    });
    assert.equal(config.clusterRequestTimeoutSeconds, 30);
    assert.equal(config.bootstrap.inCluster, false);
    assert.equal(config.bootstrap.kubeconfigFile, undefined);
  });

  test('cluster settings: the in-cluster server from the pod environment, or overridden', () => {
    const pod = loadConfig({ KUBERNETES_SERVICE_HOST: '10.96.0.1', KUBERNETES_SERVICE_PORT: '443' });
    assert.equal(pod.clusters.inClusterServer, 'https://10.96.0.1:443');
    const v6 = loadConfig({ KUBERNETES_SERVICE_HOST: 'fd00::1', KUBERNETES_SERVICE_PORT: '6443' });
    assert.equal(v6.clusters.inClusterServer, 'https://[fd00::1]:6443');
    const config = loadConfig({
      KUBERNETES_SERVICE_HOST: '10.96.0.1',
      CAS_IN_CLUSTER_SERVER: 'https://127.0.0.1:6443/',
      CAS_IN_CLUSTER_DIR: '/tmp/sa',
      CAS_CLUSTER_HEALTH_INTERVAL_SECONDS: '0',
      CAS_CLUSTER_PROBE_TIMEOUT_MS: '500',
      CAS_CLUSTER_REQUEST_TIMEOUT_SECONDS: '90',
      CAS_BOOTSTRAP_KUBECONFIG_FILE: '/etc/cas/kubeconfig',
    });
    assert.deepEqual(config.clusters, {
      healthIntervalSeconds: 0,
      probeTimeoutMs: 500,
      inClusterDir: '/tmp/sa',
      inClusterServer: 'https://127.0.0.1:6443',
    });
    assert.equal(config.clusterRequestTimeoutSeconds, 90);
    assert.equal(config.bootstrap.kubeconfigFile, '/etc/cas/kubeconfig');
  });

  test('postgres URL, origins and key are read', () => {
    const key = Buffer.alloc(32, 7).toString('base64');
    const config = loadConfig({
      DATABASE_URL: 'postgres://u:p@db:5432/cas',
      CORS_ORIGINS: 'https://a.example.com, http://localhost:3000',
      CAS_ENCRYPTION_KEY: key,
    });
    assert.deepEqual(config.database, { type: 'postgres', url: 'postgres://u:p@db:5432/cas' });
    assert.deepEqual(config.corsOrigins, ['https://a.example.com', 'http://localhost:3000']);
    assert.equal(config.encryptionKey?.length, 32);
  });

  test('a bad value stops start-up with a message naming the variable', () => {
    const cases: Array<[Record<string, string>, RegExp]> = [
      [{ PORT: 'eighty' }, /PORT/],
      [{ PORT: '70000' }, /PORT/],
      [{ LOG_LEVEL: 'loud' }, /LOG_LEVEL/],
      [{ DATABASE_URL: 'mysql://x' }, /DATABASE_URL/],
      [{ CAS_ENCRYPTION_KEY: 'c2hvcnQ=' }, /CAS_ENCRYPTION_KEY/],
      [{ CORS_ORIGINS: 'https://a.example.com/path' }, /CORS_ORIGINS/],
      [{ CORS_ORIGINS: '*' }, /CORS_ORIGINS/],
      [{ CAS_CORS_MAX_AGE_SECONDS: '-1' }, /CAS_CORS_MAX_AGE_SECONDS/],
      [{ CAS_CORS_MAX_AGE_SECONDS: 'forever' }, /CAS_CORS_MAX_AGE_SECONDS/],
      [{ CAS_SESSION_IDLE_SECONDS: '9000', CAS_SESSION_MAX_SECONDS: '600' }, /CAS_SESSION_IDLE_SECONDS/],
      [{ CAS_BOOTSTRAP_USERNAME: 'root' }, /CAS_BOOTSTRAP_PASSWORD/],
      [{ CAS_TRUST_PROXY: 'maybe' }, /CAS_TRUST_PROXY/],
      [{ CAS_SHUTDOWN_GRACE_SECONDS: '-1' }, /CAS_SHUTDOWN_GRACE_SECONDS/],
      [{ CAS_CLUSTER_HEALTH_INTERVAL_SECONDS: '-1' }, /CAS_CLUSTER_HEALTH_INTERVAL_SECONDS/],
      [{ CAS_CLUSTER_PROBE_TIMEOUT_MS: '10' }, /CAS_CLUSTER_PROBE_TIMEOUT_MS/],
      [{ CAS_CLUSTER_REQUEST_TIMEOUT_SECONDS: '0' }, /CAS_CLUSTER_REQUEST_TIMEOUT_SECONDS/],
      [{ CAS_IN_CLUSTER_SERVER: 'http://10.0.0.1' }, /CAS_IN_CLUSTER_SERVER/],
      [{ CAS_IN_CLUSTER_SERVER: 'not a url' }, /CAS_IN_CLUSTER_SERVER/],
      [{ CAS_BOOTSTRAP_IN_CLUSTER: 'perhaps' }, /CAS_BOOTSTRAP_IN_CLUSTER/],
      [{ CAS_BOOTSTRAP_IN_CLUSTER: 'true', CAS_BOOTSTRAP_KUBECONFIG_FILE: '/k' }, /CAS_BOOTSTRAP_KUBECONFIG_FILE/],
    ];
    for (const [env, pattern] of cases) {
      assert.throws(
        () => loadConfig(env),
        (e: Error) => e instanceof ConfigError && pattern.test(e.message),
        JSON.stringify(env),
      );
    }
  });
});

describe('CAS_TRUST_PROXY (issue 29 #8)', () => {
  test('a hop count, a list of proxy addresses, true as one hop, false or unset as none', () => {
    const cases: Array<[string | undefined, false | number | string[]]> = [
      [undefined, false],
      ['', false],
      ['false', false],
      ['0', false],
      ['true', 1],
      ['TRUE', 1],
      ['1', 1],
      ['3', 3],
      ['10.0.0.1', ['10.0.0.1']],
      ['10.0.0.0/8, 192.168.1.7,fd00::/8', ['10.0.0.0/8', '192.168.1.7', 'fd00::/8']],
      ['loopback,10.1.2.0/24', ['loopback', '10.1.2.0/24']],
    ];
    for (const [raw, expected] of cases) {
      const trust = loadConfig(raw === undefined ? {} : { CAS_TRUST_PROXY: raw }).trustProxy;
      if (typeof expected !== 'number') {
        assert.deepEqual(trust, expected, raw);
        continue;
      }
      // A hop count is a function (Fastify takes a plain number as "trust nothing"): the nearest
      // `expected` hops are proxies, the next one is the client.
      assert.equal(typeof trust, 'function', raw);
      const trusts = trust as (address: string, hop: number) => boolean;
      for (let hop = 0; hop <= expected + 1; hop++)
        assert.equal(trusts('10.0.0.1', hop), hop < expected, `${raw} ${hop}`);
    }
  });

  test('anything else stops start-up with a message naming the variable and the bad entry', () => {
    for (const raw of [
      'maybe',
      '10.0.0.0/33',
      'fd00::/129',
      '10.0.0.1/8/1',
      '10.0.0.1,',
      'proxy.example',
      '101',
      '-1',
    ]) {
      assert.throws(
        () => loadConfig({ CAS_TRUST_PROXY: raw }),
        (e: Error) => e instanceof ConfigError && /CAS_TRUST_PROXY/.test(e.message),
        raw,
      );
    }
    assert.throws(() => loadConfig({ CAS_TRUST_PROXY: '10.0.0.0/8,evil' }), /'evil' is none of these/);
  });
});
