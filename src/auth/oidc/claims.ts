import { ForbiddenException } from '@nestjs/common';
import { USERNAME_PATTERN } from '../../common/validation.js';
import type { OidcProviderConfig } from '../../config/config.js';
import type { ExternalSignIn } from '../../users/users.service.js';

const MAX_GROUPS = 1000;
const AVATAR = /^https?:\/\/[^\s/?#]+[^\s]*$/i;

export function providerName(provider: Pick<OidcProviderConfig, 'id'>): string {
  return `oidc:${provider.id}`;
}

function shown(value: unknown): string {
  const text = typeof value === 'string' ? value : JSON.stringify(value);
  return (text ?? String(value)).slice(0, 80);
}

/** The groups claim: an array of strings (or one string); anything else is no group. */
export function groupsFrom(value: unknown): string[] {
  const list = typeof value === 'string' ? [value] : Array.isArray(value) ? value : [];
  return list.filter((g): g is string => typeof g === 'string').slice(0, MAX_GROUPS);
}

/** The role names a person's groups map to (sorted, no repeats), or null when the provider does not manage roles. */
export function rolesFor(provider: Pick<OidcProviderConfig, 'roleMap'>, groups: string[]): string[] | null {
  if (!provider.roleMap) return null;
  const roles = new Set<string>();
  for (const group of groups) for (const role of provider.roleMap.get(group) ?? []) roles.add(role);
  return [...roles].sort();
}

/**
 * Turns the verified claims of an ID token (merged with user info) into the user to create or
 * update. A claim the service cannot use as a username is a 403 naming it: the provider's
 * configuration (or CAS_OIDC_<ID>_USERNAME_CLAIM) must change, the person can do nothing.
 */
export function externalUserFrom(provider: OidcProviderConfig, claims: Record<string, unknown>): ExternalSignIn {
  const subject = claims.sub;
  if (typeof subject !== 'string' || subject.length === 0 || subject.length > 255) {
    throw new ForbiddenException(`provider '${provider.id}' sent no usable subject (sub)`);
  }
  const username = claims[provider.usernameClaim];
  if (typeof username !== 'string') {
    throw new ForbiddenException(
      `provider '${provider.id}' sent no '${provider.usernameClaim}' claim to use as the username (see CAS_OIDC_${provider.id.toUpperCase()}_USERNAME_CLAIM)`,
    );
  }
  if (username.length < 3 || username.length > 64 || !USERNAME_PATTERN.test(username)) {
    throw new ForbiddenException(
      `provider '${provider.id}' sent ${provider.usernameClaim} '${shown(username)}', which is not a valid username here (3–64 letters, digits and . _ @ -, starting with a letter or digit)`,
    );
  }
  const rawName = typeof claims.name === 'string' ? claims.name.trim() : '';
  const picture = claims.picture;
  return {
    provider: providerName(provider),
    subject,
    username,
    name: rawName ? [...rawName].slice(0, 128).join('') : username,
    avatarUrl: typeof picture === 'string' && picture.length <= 2048 && AVATAR.test(picture) ? picture : null,
    roleNames: rolesFor(provider, groupsFrom(claims[provider.groupsClaim])),
  };
}
