import type { Caller } from '../auth/caller.js';

/** Who a cluster with `impersonate: true` is told the caller is. */
export interface Impersonation {
  /** `cas:<username>`, or `cas:key:<key name>` for an API key. */
  user: string;
  /** `cas:role:<role>` for each role the caller acts with. */
  groups: string[];
}

/**
 * The identity sent to an impersonating cluster. Usernames (`[A-Za-z0-9._@-]`), key names
 * (printable ASCII) and role names (`[a-z0-9._-]`) are restricted at creation; the request builder
 * checks the values again before they become headers.
 */
export function impersonationFor(caller: Caller): Impersonation {
  const user = caller.kind === 'apiKey' ? `cas:key:${caller.name}` : `cas:${caller.name}`;
  return { user, groups: caller.roles.map((role) => `cas:role:${role}`) };
}
