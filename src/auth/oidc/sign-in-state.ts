import { Logger } from '@nestjs/common';
import { createHmac, timingSafeEqual } from 'node:crypto';
import { loadOrCreateKey, SecretBox } from '../../common/secret-box.js';
import type { AppConfig } from '../../config/config.js';

/** How long a sign-in may take at the provider before it must start again. */
export const SIGN_IN_STATE_SECONDS = 600;

/** What the browser carries from `/login` to `/callback`: it binds the provider's answer to this browser. */
export interface SignInState {
  state: string;
  nonce: string;
  /** PKCE code verifier (the provider only ever saw its S256 challenge). */
  verifier: string;
  /** The relative path of this service to go to afterwards. */
  redirect: string;
  /** Epoch milliseconds after which the state is refused. */
  expiresAt: number;
}

/**
 * Seals and opens the short-lived sign-in cookie with AES-256-GCM (authenticated: any change is
 * refused; encrypted: the PKCE verifier and nonce stay unreadable). Its key is derived from the
 * service's encryption key (CAS_ENCRYPTION_KEY or the key file), so every replica sharing that key
 * accepts a cookie another replica set; the provider id is bound as additional data, so a cookie
 * for one provider cannot complete a sign-in at another.
 */
export class SignInStateBox {
  private readonly box: SecretBox;

  constructor(config: Pick<AppConfig, 'encryptionKey' | 'dataDir'>) {
    const key = loadOrCreateKey(config, new Logger(SignInStateBox.name));
    this.box = new SecretBox(createHmac('sha256', key).update('cas oidc sign-in state v1').digest());
  }

  seal(providerId: string, state: SignInState): string {
    return this.box.seal(JSON.stringify(state), `oidc-sign-in:${providerId}`);
  }

  /** The state, or null when the cookie is missing, altered, sealed for another provider, or expired. */
  open(providerId: string, sealed: string | undefined, now = Date.now()): SignInState | null {
    if (!sealed || sealed.length > 4096) return null;
    try {
      const state = JSON.parse(this.box.open(sealed, `oidc-sign-in:${providerId}`)) as SignInState;
      if (typeof state.expiresAt !== 'number' || state.expiresAt <= now) return null;
      return state;
    } catch {
      return null;
    }
  }
}

export function sameSecret(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

/**
 * Where to send the browser after sign-in: a path of this service (`/…`), never another site.
 * Anything else (absolute URLs, `//host`, `/\host`, control characters) becomes `/`. The check runs
 * again on what the URL parser produced: dot segments (`/.//host`, `/a/..//host`, `/%2e%2e//host`)
 * normalise into `//host`, which a browser follows to another site.
 */
export function safeRedirect(raw: string | undefined): string {
  if (!raw || raw.length > 2048) return '/';
  if (!isLocalPath(raw)) return '/';
  if ([...raw].some((c) => c.charCodeAt(0) < 0x20 || c.charCodeAt(0) === 0x7f || c === '\\')) return '/';
  const base = 'http://service.invalid';
  let url: URL;
  try {
    url = new URL(raw, base);
  } catch {
    return '/';
  }
  if (url.origin !== base || !isLocalPath(url.pathname)) return '/';
  return url.pathname + url.search + url.hash;
}

/** A path on this origin: one leading `/`, not the network-path `//host` nor `/\host` (which browsers read as `//host`). */
function isLocalPath(path: string): boolean {
  return path.startsWith('/') && !path.startsWith('//') && !path.startsWith('/\\');
}
