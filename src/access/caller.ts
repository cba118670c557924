import type { GrantedRule } from './rules.js';

/**
 * Who is calling: a signed-in user, an API key, or (only on bootstrap routes before any user exists)
 * nobody yet. A plain object, so it can be cached and compared.
 */
export interface Caller {
  kind: 'user' | 'apiKey' | 'bootstrap';
  /** User id or API key id; null for bootstrap. */
  id: number | null;
  /** Username, or the API key's name. */
  name: string;
  /** The names of the roles the caller acts with (for an API key: its roles that its owner also holds). */
  roles: string[];
  isAdmin: boolean;
  /** The rules of those roles (the authorizer reads them). */
  rules: GrantedRule[];
  /** The user the caller acts for: the user itself, or the API key's owner; null for bootstrap. */
  userId: number | null;
  /** That user's username (for an API key: its owner's); null for bootstrap. */
  userName: string | null;
  /** An API key caller: when the key expires (epoch ms), or null when it does not; null for others. */
  keyExpiresAt: number | null;
  /** Set when the caller authenticated with a session token. */
  sessionId: number | null;
}

/** The caller of a bootstrap route while no user exists. */
export function bootstrapCaller(): Caller {
  return {
    kind: 'bootstrap',
    id: null,
    name: 'bootstrap',
    roles: [],
    isAdmin: true,
    rules: [],
    userId: null,
    userName: null,
    keyExpiresAt: null,
    sessionId: null,
  };
}

/** How a caller is recorded as a creator or in logs. */
export function describeCaller(caller: Caller): string {
  return caller.kind === 'apiKey' ? `apikey:${caller.name}` : caller.name;
}
