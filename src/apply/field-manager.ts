// Who the fields a caller writes belong to in `managedFields`. The service writes as `cas:<username>`
// (`cas:key:<name>` for an API key), so that prefix names a person or a key of the service: a caller may
// write as any manager of its own choosing except another one's. Pure: no I/O.
import { ForbiddenException } from '@nestjs/common';
import type { Caller } from '../access/caller.js';

/** Kubernetes accepts field managers up to this length. */
const MAX_FIELD_MANAGER = 128;
/** The prefix of the managers the service writes as (compared ignoring case and surrounding spaces). */
const SERVICE_PREFIX = 'cas:';

/** `cas:<username>`, or `cas:key:<name>` for an API key: who the fields belong to in `managedFields`. */
export function defaultFieldManager(caller: Caller): string {
  const name = caller.kind === 'apiKey' ? `cas:key:${caller.name}` : `cas:${caller.name}`;
  return name.slice(0, MAX_FIELD_MANAGER);
}

/**
 * The managers with the service's prefix a caller may write as: its default, and for an API key also
 * the user it acts for (a key of alice, such as a minted kubeconfig's, may apply as `cas:alice`).
 */
function ownFieldManagers(caller: Caller): string[] {
  const own = [defaultFieldManager(caller)];
  if (caller.kind === 'apiKey' && caller.userName)
    own.push(`${SERVICE_PREFIX}${caller.userName}`.slice(0, MAX_FIELD_MANAGER));
  return own;
}

/**
 * Why the caller may not write as one of `values` (each `fieldManager` a request carries), or undefined:
 * a manager with the service's prefix that is not the caller's own names another user or key.
 */
export function foreignFieldManager(caller: Caller, values: Iterable<string | null | undefined>): string | undefined {
  const own = ownFieldManagers(caller);
  for (const value of values) {
    if (typeof value !== 'string' || own.includes(value)) continue;
    if (!value.trim().toLowerCase().startsWith(SERVICE_PREFIX)) continue;
    const yours = own.map((manager) => `'${manager}'`).join(' or ');
    return `fieldManager '${value.slice(0, MAX_FIELD_MANAGER)}' is not yours: managers starting with '${SERVICE_PREFIX}' are the service's users and keys, and you may write only as ${yours} (the default is the first) or as a manager without that prefix`;
  }
  return undefined;
}

/** Throws 403 naming the manager when the caller may not write as `fieldManager` (see foreignFieldManager). */
export function assertOwnFieldManager(caller: Caller, fieldManager: string | null | undefined): void {
  const problem = foreignFieldManager(caller, [fieldManager]);
  if (problem) throw new ForbiddenException(problem);
}
