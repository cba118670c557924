import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ConfigError, loadConfig } from '../../src/config/config.js';

describe('metrics configuration', () => {
  test('defaults: no token, no port, 30 s query time-out, the listener on HOST', () => {
    const { metrics } = loadConfig({ HOST: '127.0.0.1' });
    assert.deepEqual(metrics, { token: undefined, port: undefined, host: '127.0.0.1', queryTimeoutSeconds: 30 });
  });

  test('values are read and checked, naming the variable', () => {
    const { metrics } = loadConfig({
      CAS_METRICS_TOKEN: 'a-token-of-enough-length',
      CAS_METRICS_PORT: '9464',
      CAS_METRICS_HOST: '10.0.0.5',
      CAS_METRICS_QUERY_TIMEOUT_SECONDS: '5',
    });
    assert.deepEqual(metrics, {
      token: 'a-token-of-enough-length',
      port: 9464,
      host: '10.0.0.5',
      queryTimeoutSeconds: 5,
    });
    for (const [env, message] of [
      [{ CAS_METRICS_TOKEN: 'short' }, /CAS_METRICS_TOKEN must be 16–512 printable characters/],
      [{ CAS_METRICS_TOKEN: 'has a space in the token' }, /CAS_METRICS_TOKEN/],
      [{ CAS_METRICS_PORT: '70000' }, /CAS_METRICS_PORT must be an integer from 0 to 65535/],
      [{ CAS_METRICS_PORT: 'nine' }, /CAS_METRICS_PORT/],
      [{ CAS_METRICS_PORT: '8080' }, /CAS_METRICS_PORT must differ from PORT/],
      [{ CAS_METRICS_HOST: 'a b' }, /CAS_METRICS_HOST is not a valid address/],
      [
        { CAS_METRICS_QUERY_TIMEOUT_SECONDS: '0' },
        /CAS_METRICS_QUERY_TIMEOUT_SECONDS must be an integer from 1 to 600/,
      ],
    ] as const) {
      assert.throws(
        () => loadConfig(env),
        (error: Error) => error instanceof ConfigError && message.test(error.message),
      );
    }
  });
});
