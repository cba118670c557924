/**
 * A Kubernetes API request as the apiserver reads it: k8s.io/apiserver's RequestInfo rules
 * (`pkg/endpoints/request/requestinfo.go`), so that the service decides on exactly what the cluster
 * will do. `verb` is the apiserver's: `get list watch create update patch delete deletecollection`,
 * `proxy` (the legacy `/api/v1/proxy/...` form), or the lower-cased method of a non-resource request.
 */
export interface RequestInfo {
  isResourceRequest: boolean;
  /** The decoded path, `/`-separated, as the cluster will see it. */
  path: string;
  verb: string;
  /** `api` or `apis`; '' for a non-resource request. */
  apiPrefix: string;
  /** '' for the core group. */
  apiGroup: string;
  apiVersion: string;
  /** '' when the request names none (cluster-scoped objects, lists across all namespaces). */
  namespace: string;
  resource: string;
  subresource: string;
  name: string;
  /** What follows the namespace: resource, name, subresource and anything after it. */
  parts: string[];
}

/** The path cannot be placed: the apiserver itself refuses it ("unable to determine kind and namespace"). */
export class UnplaceableRequestError extends Error {}

/** Verbs that may stand first after the version: `/api/v1/watch/pods`, `/api/v1/proxy/nodes/n1`. */
const SPECIAL_VERBS = new Set(['proxy', 'watch']);
/** After `proxy` the rest is a path on the target, never a subresource. */
const SPECIAL_VERBS_NO_SUBRESOURCES = new Set(['proxy']);
/** `/api/v1/namespaces/<ns>/status` and `/finalize` are subresources of the namespace, not resources in it. */
const NAMESPACE_SUBRESOURCES = new Set(['status', 'finalize']);

const METHOD_VERBS: Record<string, string> = {
  POST: 'create',
  GET: 'get',
  HEAD: 'get',
  PUT: 'update',
  PATCH: 'patch',
  DELETE: 'delete',
};

function splitPath(path: string): string[] {
  const trimmed = path.replace(/^\/+|\/+$/g, '');
  return trimmed === '' ? [] : trimmed.split('/');
}

/** Go's strconv.ParseBool, or undefined when the value is none of its spellings. */
function parseBool(value: string): boolean | undefined {
  if (['1', 't', 'T', 'TRUE', 'true', 'True'].includes(value)) return true;
  if (['0', 'f', 'F', 'FALSE', 'false', 'False'].includes(value)) return false;
  return undefined;
}

/**
 * `?watch=`: the parameter codec's bool; a value it cannot read still counts as a watch unless it is
 * `false` or `0` (the apiserver's fallback, so that a malformed value never turns a watch into a list).
 */
function isWatch(query: URLSearchParams): boolean {
  const values = query.getAll('watch');
  if (values.length === 0) return false;
  const parsed = parseBool(values[0]);
  if (parsed !== undefined) return parsed;
  return !['false', '0'].includes(values[0].toLowerCase());
}

/** A name the apiserver accepts as one path segment (path.IsValidPathSegmentName). */
function isPathSegmentName(name: string): boolean {
  return name !== '' && name !== '.' && name !== '..' && !name.includes('/') && !name.includes('%');
}

/**
 * The value a field selector requires `metadata.name` to equal (`metadata.name=x` or `==x`), as
 * fields.Selector.RequiresExactMatch; undefined when it requires none, or the selector is malformed.
 */
export function exactNameOf(selector: string | null): string | undefined {
  if (selector === null || selector === '') return undefined;
  const terms: string[] = [];
  let current = '';
  for (let i = 0; i < selector.length; i++) {
    const c = selector[i];
    if (c === '\\' && i + 1 < selector.length) {
      current += c + selector[++i];
    } else if (c === ',') {
      terms.push(current);
      current = '';
    } else current += c;
  }
  terms.push(current);
  let name: string | undefined;
  for (const term of terms) {
    const match = /^([^=!]+?)\s*(==|=|!=)\s*(.*)$/.exec(term.trim());
    if (!match || match[1].trim() === '') return undefined;
    if (match[1].trim() === 'metadata.name' && match[2] !== '!=' && name === undefined) {
      name = match[3].replace(/\\(.)/g, '$1');
    }
  }
  return name;
}

/** A request for a path that names no resource (`/version`, `/apis`, a non-resource review). */
export function nonResourceInfo(verb: string, path: string): RequestInfo {
  return {
    isResourceRequest: false,
    path,
    verb,
    apiPrefix: '',
    apiGroup: '',
    apiVersion: '',
    namespace: '',
    resource: '',
    subresource: '',
    name: '',
    parts: [],
  };
}

/**
 * Parses a request as the apiserver's RequestInfoFactory does (API prefixes `api` and `apis`, `api`
 * without a group). `path` is the decoded path below the server URL, e.g. `/api/v1/namespaces/a/pods`.
 */
export function parseRequestInfo(method: string, path: string, query: URLSearchParams): RequestInfo {
  const info = nonResourceInfo(method.toLowerCase(), path);
  let parts = splitPath(path);
  if (parts.length < 3 || (parts[0] !== 'api' && parts[0] !== 'apis')) return info;
  const apiPrefix = parts[0];
  parts = parts.slice(1);
  let apiGroup = '';
  if (apiPrefix === 'apis') {
    if (parts.length < 3) return info;
    apiGroup = parts[0];
    parts = parts.slice(1);
  }
  Object.assign(info, { isResourceRequest: true, apiPrefix, apiGroup, apiVersion: parts[0] });
  parts = parts.slice(1);

  if (SPECIAL_VERBS.has(parts[0])) {
    if (parts.length < 2) throw new UnplaceableRequestError(`unable to determine kind and namespace from ${path}`);
    info.verb = parts[0];
    parts = parts.slice(1);
  } else {
    info.verb = METHOD_VERBS[method.toUpperCase()] ?? '';
  }

  if (parts[0] === 'namespaces') {
    // Server-side apply of a new namespace is a PATCH of /namespaces/<name>: that is not "in" the namespace.
    if (parts.length === 2 && info.verb === 'patch') info.namespace = '';
    else if (parts.length > 1) {
      info.namespace = parts[1];
      if (parts.length > 2 && !NAMESPACE_SUBRESOURCES.has(parts[2])) parts = parts.slice(2);
    }
  }
  info.parts = parts;
  if (parts.length >= 3 && !SPECIAL_VERBS_NO_SUBRESOURCES.has(info.verb)) info.subresource = parts[2];
  if (parts.length >= 2) info.name = parts[1];
  if (parts.length >= 1) info.resource = parts[0];

  if (info.name === '' && info.verb === 'get') {
    info.verb = isWatch(query) ? 'watch' : 'list';
    const name = exactNameOf(query.get('fieldSelector'));
    if (name !== undefined && isPathSegmentName(name)) info.name = name;
  }
  if (info.name === '' && info.verb === 'delete') info.verb = 'deletecollection';
  return info;
}
