import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ConfigError, loadConfig } from '../../src/config/config.js';

describe('configuration: limits (issue 9)', () => {
  test('defaults', () => {
    assert.deepEqual(loadConfig({}).limits, {
      maxJsonDepth: 64,
      requestTimeoutSeconds: 30,
      connectionTimeoutSeconds: 300,
      keepAliveTimeoutSeconds: 72,
      maxConnectionsPerAddress: 256,
      passwordHashConcurrency: 1,
      passwordHashQueue: 32,
      allowLinkLocalClusters: false,
    });
  });

  test('set, and a bad value names the variable', () => {
    const limits = loadConfig({
      CAS_MAX_JSON_DEPTH: '10',
      CAS_REQUEST_TIMEOUT_SECONDS: '5',
      CAS_CONNECTION_TIMEOUT_SECONDS: '0',
      CAS_KEEP_ALIVE_TIMEOUT_SECONDS: '2',
      CAS_MAX_CONNECTIONS_PER_ADDRESS: '0',
      CAS_PASSWORD_HASH_CONCURRENCY: '4',
      CAS_PASSWORD_HASH_QUEUE: '0',
      CAS_CLUSTER_ALLOW_LINK_LOCAL: 'true',
    }).limits;
    assert.equal(limits.maxJsonDepth, 10);
    assert.equal(limits.connectionTimeoutSeconds, 0);
    assert.equal(limits.allowLinkLocalClusters, true);
    for (const [name, value] of [
      ['CAS_MAX_JSON_DEPTH', '1'],
      ['CAS_REQUEST_TIMEOUT_SECONDS', '0'],
      ['CAS_PASSWORD_HASH_CONCURRENCY', '0'],
      ['CAS_MAX_CONNECTIONS_PER_ADDRESS', '-1'],
      ['CAS_CLUSTER_ALLOW_LINK_LOCAL', 'maybe'],
    ]) {
      assert.throws(
        () => loadConfig({ [name]: value }),
        (e: unknown) => e instanceof ConfigError && e.message.includes(name),
      );
    }
  });
});
