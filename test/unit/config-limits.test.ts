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

describe('configuration: the list caches', () => {
  test('defaults: 200,000 objects and 128 MiB of JSON, idle after 600 s', () => {
    assert.deepEqual(loadConfig({}).listCache, { maxObjects: 200_000, maxBytes: 128 * 1024 * 1024, idleSeconds: 600 });
  });

  test('CAS_LIST_CACHE_MAX_BYTES set; below 1 MiB, above 64 GiB or not a number names the variable', () => {
    assert.equal(loadConfig({ CAS_LIST_CACHE_MAX_BYTES: '1048576' }).listCache.maxBytes, 1024 * 1024);
    for (const value of ['1048575', '68719476737', '1e9', '-1', '128MiB']) {
      assert.throws(
        () => loadConfig({ CAS_LIST_CACHE_MAX_BYTES: value }),
        (e: unknown) => e instanceof ConfigError && e.message.includes('CAS_LIST_CACHE_MAX_BYTES'),
        value,
      );
    }
  });
});
