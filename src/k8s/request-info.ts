import { type FieldTerm, FieldSelectorError, parseFieldTerms, requiredValue } from './field-selector-syntax.js';
import { LabelSelectorError, parseLabelSelector } from './label-selector.js';

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

/** `false` under Go's strings.EqualFold, which folds `ſ` (U+017F) to `s`. */
const FOLDS_TO_FALSE = /^[fF][aA][lL][sS\u017f][eE]$/;

/**
 * A boolean query parameter as the apiserver reads it (apimachinery's `Convert_Slice_string_To_bool`):
 * absent is false; otherwise only a first value of `0` or `false` in any case is false, so `watch=f`,
 * `watch=yes` and `watch=` are watches and `follow=yes` is a follow. Every boolean of the Kubernetes
 * path that the service decides on is read with this, never with a stricter or looser spelling.
 */
export function queryBoolean(query: URLSearchParams, name: string): boolean {
  const value = query.get(name);
  return value !== null && value !== '0' && !FOLDS_TO_FALSE.test(value);
}

/** Go's strconv.ParseInt(s, 10, 64) succeeds. */
function isInt64(value: string): boolean {
  if (!/^[+-]?\d+$/.test(value)) return false;
  const n = BigInt(value);
  return n >= -(1n << 63n) && n < 1n << 63n;
}

/**
 * Whether the apiserver decodes the query as ListOptions. Where it cannot (a malformed selector, a
 * `limit` that is no integer), it reads `watch` by a narrower rule and takes no name from the field
 * selector; the request itself then fails with the apiserver's 400.
 */
function listOptionsOf(query: URLSearchParams): { fieldTerms: FieldTerm[] } | undefined {
  try {
    parseLabelSelector(query.get('labelSelector') ?? '');
    const fieldTerms = parseFieldTerms(query.get('fieldSelector') ?? '');
    for (const name of ['limit', 'timeoutSeconds']) {
      const value = query.get(name);
      if (value !== null && !isInt64(value)) return undefined;
    }
    return { fieldTerms };
  } catch (error) {
    if (error instanceof LabelSelectorError || error instanceof FieldSelectorError) return undefined;
    throw error;
  }
}

/** A name the apiserver accepts as one path segment (path.IsValidPathSegmentName). */
function isPathSegmentName(name: string): boolean {
  return name !== '' && name !== '.' && name !== '..' && !name.includes('/') && !name.includes('%');
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

  if (parts[0] === 'namespaces' && parts.length > 1) {
    info.namespace = parts[1];
    if (parts.length > 2 && !NAMESPACE_SUBRESOURCES.has(parts[2])) parts = parts.slice(2);
  }
  info.parts = parts;
  if (parts.length >= 3 && !SPECIAL_VERBS_NO_SUBRESOURCES.has(info.verb)) info.subresource = parts[2];
  if (parts.length >= 2) info.name = parts[1];
  if (parts.length >= 1) info.resource = parts[0];

  if (info.name === '' && info.verb === 'get') {
    const options = listOptionsOf(query);
    if (options) {
      info.verb = queryBoolean(query, 'watch') ? 'watch' : 'list';
      const name = requiredValue(options.fieldTerms, 'metadata.name');
      if (name !== undefined && isPathSegmentName(name)) info.name = name;
    } else {
      const watch = query.get('watch');
      info.verb = watch !== null && !['false', '0'].includes(watch.toLowerCase()) ? 'watch' : 'list';
    }
  }
  if (info.name === '' && info.verb === 'delete') info.verb = 'deletecollection';
  return info;
}
