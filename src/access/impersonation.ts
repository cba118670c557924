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

/** Printable ASCII, no leading or trailing space, bounded: nothing that could end a header or start another. */
const SAFE_HEADER_VALUE = /^[\x21-\x7e](?:[\x20-\x7e]{0,510}[\x21-\x7e])?$/;

/** The Impersonate-* headers of an identity; each value is checked again before it becomes a header. */
export function impersonationHeaders(impersonate: Impersonation): Record<string, string | string[]> {
  for (const value of [impersonate.user, ...impersonate.groups]) {
    if (!SAFE_HEADER_VALUE.test(value))
      throw new Error(`refusing to impersonate with an unsafe value ${JSON.stringify(value)}`);
  }
  const headers: Record<string, string | string[]> = { 'impersonate-user': impersonate.user };
  if (impersonate.groups.length) headers['impersonate-group'] = impersonate.groups;
  return headers;
}
