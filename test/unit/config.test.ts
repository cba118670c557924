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
    assert.equal(config.encryptionKey, undefined);
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
      [{ CAS_SESSION_IDLE_SECONDS: '9000', CAS_SESSION_MAX_SECONDS: '600' }, /CAS_SESSION_IDLE_SECONDS/],
      [{ CAS_BOOTSTRAP_USERNAME: 'root' }, /CAS_BOOTSTRAP_PASSWORD/],
      [{ CAS_TRUST_PROXY: 'maybe' }, /CAS_TRUST_PROXY/],
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
