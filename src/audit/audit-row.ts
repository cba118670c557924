import { CLUSTER_NAME_PATTERN } from '../clusters/cluster-name.js';
import type { FastifyRequest } from 'fastify';
import type { Caller } from '../access/caller.js';
import { auditFactsOf, isWriteMethod } from '../common/audit-facts.js';
import type { AuditEventEntity } from './audit-event.entity.js';

/** A row to store; `detail`: terminal sessions, and `{ dryRun: true }` on a dry-run write; `recording`: terminal sessions. */
export type AuditRow = Omit<AuditEventEntity, 'id' | 'detail' | 'recording'> & {
  detail?: string | null;
  recording?: string | null;
};

/** The kinds of object an admin route's `:id` (or a create's new `id`) names, by the path segment before it. */
const TARGET_KINDS: Record<string, string> = {
  users: 'user',
  clusters: 'cluster',
  apikeys: 'apiKey',
  roles: 'role',
};
const MAX_CREATED_RESPONSE = 64 * 1024;

/**
 * Which calls become a row: every call that may change state (any method but GET/HEAD/OPTIONS), and
 * every refused one (403; 401 when a username is known, e.g. a failed login). Anonymous calls are
 * recorded only when they succeed (first-time setup): an unauthenticated flood cannot fill the table.
 */
export function shouldAudit(call: {
  method: string;
  statusCode: number;
  anonymous: boolean;
  changesState?: boolean;
}): boolean {
  if (call.statusCode === 401) return !call.anonymous;
  if (call.statusCode === 403) return true;
  if (!(call.changesState ?? isWriteMethod(call.method))) return false;
  return !call.anonymous || call.statusCode < 400;
}

function clip(value: unknown, max: number): string | null {
  if (typeof value !== 'string' || value === '') return null;
  return value.length > max ? value.slice(0, max) : value;
}

/**
 * The kind of object a route's `:id` names: the segment before it (`/admin/users/:id/roles` → `user`);
 * without an `:id` (a create), the last known segment (`/admin/apikeys` → `apiKey`).
 */
function targetKindOf(url: string): string | null {
  const segments = url.split('/');
  const id = segments.indexOf(':id');
  if (id > 0) return TARGET_KINDS[segments[id - 1]] ?? null;
  let kind: string | null = null;
  for (const segment of segments) kind = TARGET_KINDS[segment] ?? kind;
  return kind;
}

/** The new object's `id` in a create's response (never anything else of it). */
function createdId(payload: string | undefined): string | null {
  if (!payload || payload.length > MAX_CREATED_RESPONSE) return null;
  try {
    const id = (JSON.parse(payload) as { id?: unknown }).id;
    return typeof id === 'number' || typeof id === 'string' ? clip(String(id), 64) : null;
  } catch {
    return null;
  }
}

/** uid and resourceVersion of the object in the cluster's answer to a write (a delete's `Status` names the uid in `details`). */
function objectVersion(answer: Buffer | undefined): { uid: string | null; resourceVersion: string | null } {
  if (!answer || answer.length === 0) return { uid: null, resourceVersion: null };
  try {
    const object = JSON.parse(answer.toString('utf8')) as {
      metadata?: { uid?: unknown; resourceVersion?: unknown };
      details?: { uid?: unknown };
    };
    return {
      uid: clip(object?.metadata?.uid ?? object?.details?.uid, 64),
      resourceVersion: clip(object?.metadata?.resourceVersion, 64),
    };
  } catch {
    return { uid: null, resourceVersion: null };
  }
}

/**
 * The audit row of a finished request, or null when it is not audited. Reads only the route, its
 * path parameters, the `x-cluster-name` header, the caller and the facts the route noted: never a body.
 */
export function auditRowFor(request: FastifyRequest, statusCode: number, at: Date): AuditRow | null {
  const config = request.routeOptions.config as { operationId?: unknown } | undefined;
  const operation = config?.operationId;
  if (typeof operation !== 'string') return null; // no route matched: nothing ran
  const caller = (request as FastifyRequest & { caller?: Caller }).caller;
  const facts = auditFactsOf(request);
  const actor = caller
    ? { kind: caller.kind, id: caller.id, name: caller.kind === 'bootstrap' ? null : caller.name }
    : (facts.actor ?? { kind: 'anonymous', id: null, name: null });
  const anonymous = actor.name === null && !caller;
  if (!shouldAudit({ method: request.method, statusCode, anonymous, changesState: facts.changesState })) return null;

  const params = (request.params ?? {}) as Record<string, unknown>;
  const url = request.routeOptions.url ?? '';
  const helm = facts.helm;
  const kube =
    facts.kube ??
    facts.object ??
    (helm && { cluster: helm.cluster, verb: '', resource: 'helmreleases', namespace: helm.namespace, name: helm.name });
  const isResourceRoute = typeof params.resource === 'string' || kube !== undefined;
  const header = request.headers['x-cluster-name'];
  const ok = statusCode >= 200 && statusCode < 300;
  const version = isResourceRoute && ok ? objectVersion(facts.answer) : { uid: null, resourceVersion: null };
  const targetKind = isResourceRoute ? null : (facts.target?.kind ?? targetKindOf(url));
  let targetId: string | null = null;
  if (facts.target) targetId = facts.target.id;
  else if (targetKind) targetId = clip(params.id, 64) ?? (ok ? createdId(facts.created) : null);
  const name = clip(actor.name, 256);
  return {
    at,
    actorKind: actor.kind,
    actorId: actor.id,
    actorName: name,
    actorKey: name?.toLowerCase() ?? null,
    clientAddress: clip(request.ip, 64),
    operation: (facts.kube?.verb ? kubeOperation(facts.kube.verb) : operation).slice(0, 64),
    method: request.method.slice(0, 8),
    statusCode,
    requestId: String(request.id).slice(0, 128),
    targetKind,
    targetId,
    cluster: kube
      ? clip(kube.cluster, 253)
      : isResourceRoute && typeof header === 'string' && CLUSTER_NAME_PATTERN.test(header)
        ? header
        : null,
    resource: isResourceRoute ? clip(kube ? kube.resource : params.resource, 253) : null,
    namespace: isResourceRoute ? clip(kube ? kube.namespace : params.namespace, 253) : null,
    name: isResourceRoute ? clip(kube ? kube.name : params.name, 253) : null,
    uid: version.uid,
    resourceVersion: version.resourceVersion,
    count: 1,
    detail: facts.detail ? JSON.stringify(facts.detail) : isDryRun(request) || helm?.dryRun ? DRY_RUN_DETAIL : null,
  };
}

const DRY_RUN_DETAIL = JSON.stringify({ dryRun: true });

/** A write the cluster was asked to check only (`dryRun=All`, as the resource routes, apply and the Kubernetes path take it). */
function isDryRun(request: FastifyRequest): boolean {
  const value = (request.query as Record<string, unknown> | undefined)?.dryRun;
  return value === 'All' || (Array.isArray(value) && value.includes('All'));
}

/** The rows of a finished request: its one row, or one per document it applied (src/apply/). */
export function auditRowsFor(request: FastifyRequest, statusCode: number, at: Date): AuditRow[] {
  const row = auditRowFor(request, statusCode, at);
  if (!row) return [];
  const documents = auditFactsOf(request).documents;
  if (!documents?.length) return [row];
  return documents.map((d) => ({
    ...row,
    statusCode: d.statusCode,
    cluster: clip(d.cluster, 253),
    resource: clip(d.resource, 253),
    namespace: clip(d.namespace, 253),
    name: clip(d.name, 253),
    uid: clip(d.uid, 64),
    resourceVersion: clip(d.resourceVersion, 64),
  }));
}

/**
 * A login refused before any password was checked: by the throttle (429) or because the hashing
 * queue was full (503). It costs the caller nothing and names whatever username the caller chose,
 * so these are tallied rather than stored one by one (refused-logins.ts).
 */
export function isRefusedLogin(row: AuditRow): boolean {
  return row.operation === 'login' && row.actorId === null && (row.statusCode === 429 || row.statusCode === 503);
}

/** A call on the Kubernetes API path is recorded as its verb: `kubernetesDeletecollection`, `kubernetesPatch`. */
function kubeOperation(verb: string): string {
  return /^[a-z]{1,32}$/.test(verb) ? `kubernetes${verb[0].toUpperCase()}${verb.slice(1)}` : 'kubernetesApi';
}

/** Whether a create's response should be kept (until the row is built) for the new object's id. */
export function wantsCreatedId(request: FastifyRequest, statusCode: number): boolean {
  if (request.method !== 'POST' || statusCode < 200 || statusCode >= 300) return false;
  const params = (request.params ?? {}) as Record<string, unknown>;
  if (params.id !== undefined || params.resource !== undefined) return false;
  return targetKindOf(request.routeOptions.url ?? '') !== null;
}
