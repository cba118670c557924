/**
 * What a caller may do to a resource: the Kubernetes verbs the routes use, `log` for pod logs, and
 * the terminal's `exec`, `attach` and `portforward` on pods.
 */
export const VERBS = [
  'get',
  'list',
  'watch',
  'create',
  'update',
  'patch',
  'delete',
  'log',
  'exec',
  'attach',
  'portforward',
] as const;
export type Verb = (typeof VERBS)[number];

/** Verbs a `*` never covers: running commands in a pod or reaching its ports needs a rule that names them. */
export const NAMED_ONLY_VERBS: ReadonlySet<string> = new Set(['exec', 'attach', 'portforward']);

/** The pseudo-resource of the Helm release routes (`/api/v1/helm/releases/…`). */
export const HELM_RELEASES = 'helmreleases';

/** The verbs the Helm release routes use: list and get to read; create, update and delete to install, upgrade or roll back, and uninstall. */
export const HELM_VERBS: ReadonlySet<string> = new Set(['list', 'get', 'create', 'update', 'delete']);

/** Stands for every value of a rule's list. */
export const ANY = '*';

/**
 * Resources a `*` never covers: a rule grants them only by naming them. Reading Secrets and querying
 * metrics are what the built-in `viewer` role must not do, and a custom role should not get them by
 * accident either. `helmreleases` (the Helm routes) is reading Secrets too: a release holds its
 * rendered Secrets and the values that often carry credentials.
 */
export const NAMED_ONLY_RESOURCES: ReadonlySet<string> = new Set(['secrets', 'metrics', HELM_RELEASES]);

/**
 * The subresource a rule names apart from its resource (`pods/status`, `deployments.apps/status`):
 * writing an object's status is what its controller does, and Kubernetes RBAC keeps it separate
 * from writing the object. Reading status is reading the object.
 */
export const STATUS_SUFFIX = '/status';

/**
 * The debugging grants (docs/TERMINAL.md, debugging): adding an ephemeral container to a pod (verb
 * `update`) and opening a shell on a node (verb `create`). Neither `*` covers them — not in
 * `resources`, not in `verbs`: a rule grants them only by naming both.
 */
export const EPHEMERAL_CONTAINERS = 'pods/ephemeralcontainers';
export const NODE_SHELL = 'nodes/shell';
export const NAMED_ONLY_SUBRESOURCES: ReadonlySet<string> = new Set([EPHEMERAL_CONTAINERS, NODE_SHELL]);

/** Whether only a rule naming the resource grants it: Secrets, metrics, Helm releases, every `<resource>/status`, the debugging grants. */
export function isNamedOnly(resource: string): boolean {
  return (
    NAMED_ONLY_RESOURCES.has(resource) || resource.endsWith(STATUS_SUFFIX) || NAMED_ONLY_SUBRESOURCES.has(resource)
  );
}

/**
 * One grant: every combination of the listed clusters, namespaces, resources and verbs is allowed.
 * Each list holds exact names or `*`; nothing else (no patterns, no negation). A request without a
 * namespace (cluster-scoped objects, lists across all namespaces) needs `namespaces: ['*']`.
 */
export interface AccessRule {
  clusters: string[];
  namespaces: string[];
  resources: string[];
  verbs: string[];
}

/** A rule as a caller holds it: with the role it comes from, to explain decisions. */
export interface GrantedRule extends AccessRule {
  role: string;
}

export function coversName(list: readonly string[], value: string): boolean {
  return list.includes(value) || list.includes(ANY);
}

export function coversResource(list: readonly string[], resource: string): boolean {
  return list.includes(resource) || (list.includes(ANY) && !isNamedOnly(resource));
}

export function coversNamespace(list: readonly string[], namespace: string | null): boolean {
  return namespace === null ? list.includes(ANY) : coversName(list, namespace);
}

/** `resource`, when given: on a debugging grant only the verb named covers it. */
export function coversVerb(list: readonly string[], verb: string, resource?: string): boolean {
  if (resource !== undefined && NAMED_ONLY_SUBRESOURCES.has(resource)) return list.includes(verb);
  return list.includes(verb) || (list.includes(ANY) && !NAMED_ONLY_VERBS.has(verb));
}
