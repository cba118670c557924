import { hash, randomBytes } from 'node:crypto';

/** Recognisable prefixes so secret scanners can spot a leaked credential. */
export const SESSION_TOKEN_PREFIX = 'cas_sess_';
export const API_KEY_PREFIX = 'cas_key_';
/** How much of an API key is kept in clear to tell keys apart: the prefix and four random characters. */
export const API_KEY_DISPLAY_LENGTH = API_KEY_PREFIX.length + 4;

/** A prefixed secret carrying 256 bits from the platform's cryptographic generator. */
export function generateSecret(prefix: string): string {
  return prefix + randomBytes(32).toString('base64url');
}

/** One-shot hashing: no Hash object per call (the API key or session token of every request is hashed). */
export function sha256Hex(value: string): string {
  return hash('sha256', value, 'hex');
}
