import { Logger } from '@nestjs/common';
import { createCipheriv, createDecipheriv, createHmac, randomBytes } from 'node:crypto';
import { closeSync, mkdirSync, openSync, readFileSync, statSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import type { AppConfig } from '../config/config.js';

export const KEY_FILE_NAME = 'encryption.key';
const FORMAT = 'v1';
const IV_BYTES = 12;
const TAG_BYTES = 16;

/** A short, stable name for a key (not the key: an HMAC of a fixed label), stored with each ciphertext. */
export function keyIdOf(key: Buffer): string {
  return createHmac('sha256', key).update('cas key id').digest('base64url').slice(0, 11);
}

export class SecretBoxError extends Error {}

/**
 * AES-256-GCM for secrets at rest. A sealed value is `v1.<keyId>.<iv>.<tag>.<ciphertext>` (base64url
 * parts): the key id says which key opens it, so that a later key rotation can keep old keys for
 * opening while sealing with the new one. `purpose` is bound as additional data: a value sealed for
 * one purpose cannot be passed off as another.
 */
export class SecretBox {
  readonly keyId: string;
  private readonly keys: Map<string, Buffer>;

  constructor(
    private readonly key: Buffer,
    previousKeys: Buffer[] = [],
  ) {
    if (key.length !== 32) throw new SecretBoxError('the encryption key must be 32 bytes');
    this.keyId = keyIdOf(key);
    this.keys = new Map([...previousKeys, key].map((k) => [keyIdOf(k), k]));
  }

  seal(plaintext: string, purpose: string): string {
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv('aes-256-gcm', this.key, iv, { authTagLength: TAG_BYTES });
    cipher.setAAD(Buffer.from(purpose, 'utf8'));
    const ciphertext = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
    const parts = [iv, cipher.getAuthTag(), ciphertext].map((b) => b.toString('base64url'));
    return [FORMAT, this.keyId, ...parts].join('.');
  }

  open(sealed: string, purpose: string): string {
    const parts = sealed.split('.');
    if (parts.length !== 5 || parts[0] !== FORMAT) throw new SecretBoxError('not a sealed value of a known format');
    const [, keyId, iv, tag, ciphertext] = parts;
    const key = this.keys.get(keyId);
    if (!key) {
      throw new SecretBoxError(
        `sealed with key id '${keyId}', but this service has key id '${this.keyId}' (every replica needs the same CAS_ENCRYPTION_KEY)`,
      );
    }
    try {
      const decipher = createDecipheriv('aes-256-gcm', key, Buffer.from(iv, 'base64url'), {
        authTagLength: TAG_BYTES,
      });
      decipher.setAAD(Buffer.from(purpose, 'utf8'));
      decipher.setAuthTag(Buffer.from(tag, 'base64url'));
      return Buffer.concat([decipher.update(Buffer.from(ciphertext, 'base64url')), decipher.final()]).toString('utf8');
    } catch {
      throw new SecretBoxError('the sealed value does not open with its key: it was altered or is damaged');
    }
  }
}

/**
 * The key from CAS_ENCRYPTION_KEY, else the key file in the data directory, created (mode 0600) on
 * first start. Created exclusively, so two processes starting together on one data directory agree.
 */
export function loadOrCreateKey(config: Pick<AppConfig, 'encryptionKey' | 'dataDir'>, logger?: Logger): Buffer {
  if (config.encryptionKey) return config.encryptionKey;
  const path = join(config.dataDir, KEY_FILE_NAME);
  mkdirSync(config.dataDir, { recursive: true, mode: 0o700 });
  try {
    const fd = openSync(path, 'wx', 0o600);
    try {
      writeSync(fd, randomBytes(32).toString('base64') + '\n');
    } finally {
      closeSync(fd);
    }
    logger?.log(
      `generated an encryption key in ${path}; keep it with the database (without it, stored kubeconfigs cannot be read)`,
    );
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
  }
  const text = readFileSync(path, 'utf8').trim();
  const key = Buffer.from(text, 'base64');
  if (key.length !== 32 || !/^[A-Za-z0-9+/]+={0,2}$/.test(text)) {
    throw new SecretBoxError(`${path} must hold 32 bytes in base64 (or set CAS_ENCRYPTION_KEY)`);
  }
  if ((statSync(path).mode & 0o077) !== 0) {
    logger?.warn(`${path} can be read by other users of this host; chmod 600 it`);
  }
  return key;
}

/** The service's SecretBox, keyed from configuration (a provider factory of the clusters module). */
export function secretBoxFromConfig(config: AppConfig): SecretBox {
  const logger = new Logger(SecretBox.name);
  const box = new SecretBox(loadOrCreateKey(config, logger));
  if (!config.encryptionKey && config.database.type === 'postgres') {
    logger.warn(
      'CAS_ENCRYPTION_KEY is not set: kubeconfigs are encrypted with the key file of this replica alone; replicas sharing the database need the same CAS_ENCRYPTION_KEY',
    );
  }
  return box;
}
