import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { KEY_FILE_NAME, keyIdOf, loadOrCreateKey, SecretBox, SecretBoxError } from '../../src/common/secret-box.js';

describe('SecretBox (AES-256-GCM for stored kubeconfigs)', () => {
  const key = randomBytes(32);
  const box = new SecretBox(key);

  test('seal → v1.<keyId>.<iv>.<tag>.<ciphertext>; open gives the plaintext back', () => {
    const sealed = box.seal('token: very-secret', 'purpose');
    const parts = sealed.split('.');
    assert.equal(parts.length, 5);
    assert.equal(parts[0], 'v1');
    assert.equal(parts[1], keyIdOf(key));
    assert.ok(!sealed.includes('very-secret'));
    assert.notEqual(box.seal('token: very-secret', 'purpose'), sealed, 'a fresh IV each time');
    assert.equal(box.open(sealed, 'purpose'), 'token: very-secret');
  });

  test('a changed byte, another purpose or another key does not open', () => {
    const sealed = box.seal('data', 'purpose');
    const parts = sealed.split('.');
    const ct = Buffer.from(parts[4], 'base64url');
    ct[0] ^= 1;
    const tampered = [...parts.slice(0, 4), ct.toString('base64url')].join('.');
    assert.throws(() => box.open(tampered, 'purpose'), SecretBoxError);
    assert.throws(() => box.open(sealed, 'other'), SecretBoxError);
    assert.throws(() => new SecretBox(randomBytes(32)).open(sealed, 'purpose'), /sealed with key id/);
    assert.equal(new SecretBox(randomBytes(32), [key]).open(sealed, 'purpose'), 'data', 'an older key still opens');
  });

  test('without CAS_ENCRYPTION_KEY a key file is made once, mode 0600, and reused', async () => {
    const dataDir = await mkdtemp(join(tmpdir(), 'cas-key-'));
    try {
      const first = loadOrCreateKey({ dataDir, encryptionKey: undefined });
      assert.equal(first.length, 32);
      const file = join(dataDir, KEY_FILE_NAME);
      assert.equal((await stat(file)).mode & 0o777, 0o600);
      assert.deepEqual(loadOrCreateKey({ dataDir, encryptionKey: undefined }), first);
      assert.equal((await readFile(file, 'utf8')).trim(), first.toString('base64'));
      const configured = randomBytes(32);
      assert.deepEqual(loadOrCreateKey({ dataDir, encryptionKey: configured }), configured);
      await writeFile(file, 'short\n');
      assert.throws(() => loadOrCreateKey({ dataDir, encryptionKey: undefined }), /must hold 32 bytes/);
    } finally {
      await rm(dataDir, { recursive: true, force: true });
    }
  });
});
