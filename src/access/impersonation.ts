import type { Caller } from './caller.js';

/** Who a cluster with `impersonate: true` is told the caller is. */
export interface Impersonation {
  /** `cas:<username>`: the user, or for an API key its owner. */
  user: string;
  /** `cas:role:<role>` for each role the caller acts with (for an API key: its effective roles). */
  groups: string[];
  /** Sent as `Impersonate-Extra-<key>`: an API key's id as `cas-key`, so the cluster's audit log names the key. */
  extra?: Record<string, string[]>;
}

/** The extra key an API key's id is sent under (`Impersonate-Extra-cas-key`). */
export const KEY_EXTRA = 'cas-key';

/**
 * The identity sent to an impersonating cluster. An API key acts as its owner (`cas:<owner>`, with
 * the key's effective roles as groups and its id as extra `cas-key`), never under its name: a name is
 * free again once its key is deleted, and whoever took it next would inherit the cluster bindings made
 * for it. A username that is deleted and created again does inherit its bindings, as in Kubernetes.
 * Usernames (`[A-Za-z0-9._@-]`) and role names (`[a-z0-9._-]`) are restricted at creation;
 * `impersonationHeaders` checks every value again before it becomes a header.
 */
export function impersonationFor(caller: Caller): Impersonation {
  const groups = caller.roles.map((role) => `cas:role:${role}`);
  if (caller.kind === 'apiKey') {
    return { user: `cas:${caller.userName ?? caller.name}`, groups, extra: { [KEY_EXTRA]: [String(caller.id)] } };
  }
  return { user: `cas:${caller.name}`, groups };
}

/** Printable ASCII, no leading or trailing space, bounded: nothing that could end a header or start another. */
const SAFE_HEADER_VALUE = /^[\x21-\x7e](?:[\x20-\x7e]{0,510}[\x21-\x7e])?$/;
/** Lower-case token characters only: the key becomes part of a header name. */
const SAFE_EXTRA_KEY = /^[a-z0-9](?:[a-z0-9.-]{0,61}[a-z0-9])?$/;

/** The `Impersonate-*` headers of an identity; an unsafe value or extra key is refused (never sent). */
export function impersonationHeaders(impersonate: Impersonation): Record<string, string | string[]> {
  const extra = Object.entries(impersonate.extra ?? {});
  for (const value of [impersonate.user, ...impersonate.groups, ...extra.flatMap(([, values]) => values)]) {
    if (!SAFE_HEADER_VALUE.test(value))
      throw new Error(`refusing to impersonate with an unsafe value ${JSON.stringify(value)}`);
  }
  const headers: Record<string, string | string[]> = { 'impersonate-user': impersonate.user };
  if (impersonate.groups.length) headers['impersonate-group'] = impersonate.groups;
  for (const [key, values] of extra) {
    if (!SAFE_EXTRA_KEY.test(key))
      throw new Error(`refusing to impersonate with an unsafe extra key ${JSON.stringify(key)}`);
    if (values.length) headers[`impersonate-extra-${key}`] = values;
  }
  return headers;
}
