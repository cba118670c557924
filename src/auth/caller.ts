import type { RoleName } from '../users/role.entity.js';

/** Who is calling: a signed-in user, an API key, or (only on bootstrap routes before any user exists) nobody yet. */
export interface Caller {
  kind: 'user' | 'apiKey' | 'bootstrap';
  /** User id or API key id; null for bootstrap. */
  id: number | null;
  /** Username, or the API key's name. */
  name: string;
  roles: RoleName[];
  isAdmin: boolean;
  /** Set when the caller authenticated with a session token. */
  sessionId: number | null;
}

/** How a caller is recorded as a creator or in logs. */
export function describeCaller(caller: Caller): string {
  return caller.kind === 'apiKey' ? `apikey:${caller.name}` : caller.name;
}
