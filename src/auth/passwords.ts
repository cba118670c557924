import { Inject, Injectable, ServiceUnavailableException } from '@nestjs/common';
import argon2 from 'argon2';
import { BusyError, WorkLimiter } from '../common/work-limiter.js';
import { APP_CONFIG, type AppConfig } from '../config/config.js';

/**
 * argon2id, 64 MiB and 3 passes (the library's defaults) in one lane: the library runs one thread per
 * lane, so with four lanes a single hash took every core of a small machine and a burst of logins
 * starved the event loop. One lane keeps each hash on one thread, and `CAS_PASSWORD_HASH_CONCURRENCY`
 * is then the number of cores password work may take. (Stored hashes say their own parameters.)
 */
export function hashPassword(password: string): Promise<string> {
  return argon2.hash(password, { type: argon2.argon2id, parallelism: 1 });
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

/**
 * Every password hash and verification of the running service goes through here: argon2id takes
 * 64 MiB and ~200 ms of a libuv thread, and the thread pool (4 threads) is shared with DNS lookups
 * and file I/O, so a burst of logins must queue here instead of starving everything else.
 */
@Injectable()
export class PasswordHasher {
  private readonly limiter: WorkLimiter;

  constructor(@Inject(APP_CONFIG) config: AppConfig) {
    this.limiter = new WorkLimiter(config.limits.passwordHashConcurrency, config.limits.passwordHashQueue);
  }

  /** Refuses at once (503) when a password check could not even wait its turn: before any other work on it. */
  assertNotBusy(): void {
    if (this.limiter.full) throw this.busy();
  }

  hash(password: string): Promise<string> {
    return this.limited(() => hashPassword(password));
  }

  verify(hash: string | null | undefined, password: string): Promise<boolean> {
    return this.limited(() => verifyPassword(hash, password));
  }

  private async limited<T>(task: () => Promise<T>): Promise<T> {
    try {
      return await this.limiter.run(task);
    } catch (error) {
      if (error instanceof BusyError) throw this.busy();
      throw error;
    }
  }

  private busy(): ServiceUnavailableException {
    return new ServiceUnavailableException({
      message: 'too many password checks in progress; try again in a moment',
      retryAfter: 1,
    });
  }
}
