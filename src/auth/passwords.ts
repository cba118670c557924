import argon2 from 'argon2';

/** argon2id with the library's defaults (64 MiB, 3 passes, 4 lanes). */
export function hashPassword(password: string): Promise<string> {
  return argon2.hash(password, { type: argon2.argon2id });
}

let dummyHash: Promise<string> | undefined;

/**
 * Verifies a password; with no stored hash it verifies against a throw-away one, so that an
 * unknown user costs the same time as a wrong password.
 */
export async function verifyPassword(hash: string | null | undefined, password: string): Promise<boolean> {
  if (!hash) {
    dummyHash ??= hashPassword('not-a-real-password-' + Math.random());
    await argon2.verify(await dummyHash, password).catch(() => false);
    return false;
  }
  return argon2.verify(hash, password).catch(() => false);
}
