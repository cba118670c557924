import { BadRequestException } from '@nestjs/common';

/** The literal namespace segment for cluster-scoped resources (and "all namespaces" on list). */
export const ALL_NAMESPACES = '_all';

/** A resource as the cluster's discovery describes it. */
export interface ResourceType {
  group: string; // '' for the core group
  version: string;
  plural: string;
  kind: string;
  namespaced: boolean;
  verbs: string[];
  /** From discovery: `kubectl get` abbreviations (`cm`), groupings (`all`), and subresources (`scale`, `status`). */
  shortNames?: string[];
  categories?: string[];
  subresources?: string[];
}

const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const RESOURCE_ID = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
/**
 * Object names: what Kubernetes accepts as a path segment name, narrowed to printable ASCII
 * without `/`, `%`, `?`, `#`, `\` or white space (RBAC names such as `system:node:x` stay valid).
 */
const OBJECT_NAME = /^[A-Za-z0-9._:@+=~!$&'()*,;-]+$/;

function refuse(message: string): never {
  throw new BadRequestException([message]);
}

/** `<plural>` or `<plural>.<group>` → its parts; 400 when it cannot be a resource name. */
export function parseResourceId(value: string): { plural: string; group: string | undefined } {
  if (value.length > 253 || !RESOURCE_ID.test(value)) {
    refuse(`resource must be a plural resource name like 'configmaps' or '<plural>.<group>' like 'deployments.apps'`);
  }
  const dot = value.indexOf('.');
  return dot < 0 ? { plural: value, group: undefined } : { plural: value.slice(0, dot), group: value.slice(dot + 1) };
}

export function validateNamespace(value: string): void {
  if (value === ALL_NAMESPACES) return;
  if (value.length > 63 || !DNS_LABEL.test(value)) {
    refuse(
      `namespace must be a DNS label (lower-case letters, digits, '-', at most 63 characters) or '${ALL_NAMESPACES}'`,
    );
  }
}

export function validateName(value: string): void {
  if (value.length === 0 || value.length > 253 || value === '.' || value === '..' || !OBJECT_NAME.test(value)) {
    refuse(
      `name must be a single path segment of at most 253 printable characters, without '/', '%', '?', '#' or spaces`,
    );
  }
}

/**
 * The upstream API path of a collection or object, built only from discovery data and validated,
 * percent-encoded segments. `namespace` null means cluster-scoped, or all namespaces on list.
 */
export function resourcePath(type: ResourceType, namespace: string | null, name: string | null): string {
  const base = type.group === '' ? `/api/${type.version}` : `/apis/${type.group}/${type.version}`;
  const ns = type.namespaced && namespace !== null ? `/namespaces/${encodeURIComponent(namespace)}` : '';
  const object = name !== null ? `/${encodeURIComponent(name)}` : '';
  return `${base}${ns}/${type.plural}${object}`;
}

export const PATCH_CONTENT_TYPES = {
  strategic: 'application/strategic-merge-patch+json',
  merge: 'application/merge-patch+json',
  json: 'application/json-patch+json',
  apply: 'application/apply-patch+yaml',
} as const;

export type PatchType = keyof typeof PATCH_CONTENT_TYPES;
const PATCH_TYPE_OF_MEDIA = new Map<string, PatchType>(
  Object.entries(PATCH_CONTENT_TYPES).map(([kind, media]) => [media, kind as PatchType]),
);

/**
 * The patch's content type toward the cluster: from `patchType`, or, when it is absent, from a
 * Kubernetes patch `Content-Type` the caller sent; plain `application/json` means strategic merge.
 * A `patchType` that contradicts the Content-Type is a 400.
 */
export function patchContentType(patchType: string | undefined, requestContentType: string | undefined): string {
  const media = requestContentType?.split(';', 1)[0]!.trim().toLowerCase() ?? '';
  const fromMedia = PATCH_TYPE_OF_MEDIA.get(media);
  if (patchType === undefined) return PATCH_CONTENT_TYPES[fromMedia ?? 'strategic'];
  if (!PATCH_TYPE_OF_MEDIA.has(PATCH_CONTENT_TYPES[patchType as PatchType] ?? '')) {
    return refuse(`patchType must be 'strategic', 'merge', 'json' or 'apply', got '${patchType}'`);
  }
  if (fromMedia !== undefined && fromMedia !== patchType) {
    return refuse(`patchType '${patchType}' contradicts Content-Type '${media}': send one, or both alike`);
  }
  return PATCH_CONTENT_TYPES[patchType as PatchType];
}

/** The id the routes and roles name a type by: `<plural>` in the core group, `<plural>.<group>` otherwise. */
export function resourceIdOf(type: Pick<ResourceType, 'plural' | 'group'>): string {
  return type.group ? `${type.plural}.${type.group}` : type.plural;
}

/** `<group>/<version>`, or `<version>` in the core group. */
export function apiVersionOf(type: Pick<ResourceType, 'group' | 'version'>): string {
  return type.group ? `${type.group}/${type.version}` : type.version;
}

/** DELETE query → the cluster's DeleteOptions: Foreground unless cascade=false (Orphan); force → grace period 0. */
export function deleteOptions(options: { force?: boolean; cascade?: boolean; dryRun?: boolean }) {
  return {
    kind: 'DeleteOptions',
    apiVersion: 'v1',
    propagationPolicy: options.cascade === false ? 'Orphan' : 'Foreground',
    ...(options.force ? { gracePeriodSeconds: 0 } : {}),
    ...(options.dryRun ? { dryRun: ['All'] } : {}),
  };
}
