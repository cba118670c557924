import { BadRequestException, ForbiddenException, HttpException, Injectable, NotFoundException } from '@nestjs/common';
import { setTimeout as sleep } from 'node:timers/promises';
import { Authorizer } from '../access/authorizer.js';
import type { AuditedDocument } from '../common/audit-facts.js';
import type { Caller } from '../access/caller.js';
import { clusterNameOf } from '../clusters/cluster-name.js';
import type { ClusterClient } from '../clusters/gateway/cluster-client.js';
import { ClusterGateway } from '../clusters/gateway/cluster-gateway.js';
import { ResourceDiscovery } from '../resources/discovery.js';
import {
  ALL_NAMESPACES,
  PATCH_CONTENT_TYPES,
  resourceIdOf,
  resourcePath,
  type ResourceType,
  validateName,
  validateNamespace,
} from '../k8s/resource-path.js';
import { jsonChars } from '../common/bounded-yaml.js';
import { sameObjects, scrub, secretValueProblems, secretValuesOf } from './apply-diff.js';
import { type ApplyDocument, documentsOf } from './apply-input.js';
import { bindToRead, boundRefusal, shownVersion } from './apply-preconditions.js';
import { diffOf } from './diff-thread.js';
import { assertOwnFieldManager, defaultFieldManager } from './field-manager.js';
import type { ApplyConflictDto, ApplyQueryDto, ApplyResponseDto, ApplyResultDto } from './dto/apply.dto.js';

/**
 * The most one document may be as JSON: what an API server takes in one write (larger ones it refuses
 * with 413), so that serialising a document never holds the event loop for long.
 */
const MAX_DOCUMENT_CHARS = 3 * 1024 * 1024;

/** Documents applied at once (each is a read and an apply): enough to keep the cluster busy, few enough to share it. */
const CONCURRENCY = 8;
/** How long a document waits for the cluster to serve a kind whose CRD this request applied. */
const CRD_WAIT_MS = 15_000;
const CRD_POLL_MS = 250;
const CRD_TYPE = { group: 'apiextensions.k8s.io', kind: 'CustomResourceDefinition' };

type Obj = Record<string, any>;

/** One apply request under way. */
interface Run {
  caller: Caller;
  cluster: ClusterClient;
  q: ApplyQueryDto;
  fieldManager: string;
  /** Kinds whose CRD an earlier document of this request created or changed: worth waiting for. */
  crds: Array<{ group: string; kind: string }>;
}

/** Where a document goes, once checked. */
interface Target {
  type: ResourceType;
  id: string;
  namespace: string | null;
  name: string;
  path: string;
  object: Obj;
  /** A core Secret, by its type as discovery resolved it (however `apiVersion` was written): its values are hidden. */
  secret: boolean;
}

const REASONS: Record<number, string> = {
  400: 'BadRequest',
  403: 'Forbidden',
  404: 'NotFound',
  409: 'Conflict',
  413: 'RequestEntityTooLarge',
  502: 'InternalError',
  503: 'ServiceUnavailable',
  504: 'Timeout',
};

/** A Kubernetes `Status` for a refusal of the service's own, so every `error` reads alike. */
function serviceStatus(code: number, message: string): Obj {
  return {
    kind: 'Status',
    apiVersion: 'v1',
    metadata: {},
    status: 'Failure',
    message,
    reason: REASONS[code] ?? 'Unknown',
    code,
  };
}

function statusOfException(error: HttpException): Obj {
  const response = error.getResponse() as { message?: unknown } | string;
  const message = typeof response === 'string' ? response : response.message;
  return serviceStatus(
    error.getStatus(),
    Array.isArray(message) ? message.join('; ') : String(message ?? error.message),
  );
}

/** How a result names its document: `document 3 (line 12)`. */
const whereOf = (doc: ApplyDocument) => `document ${doc.index}${doc.line ? ` (line ${doc.line})` : ''}`;

const text = (value: unknown, max = 253) => (typeof value === 'string' && value !== '' ? value.slice(0, max) : null);

/** The manager a conflict cause names: `conflict with "kubectl" using v1` → `kubectl`. */
function managerOf(message: string): string {
  return /conflict with "([^"]*)"/.exec(message)?.[1] ?? '';
}

/**
 * What an apply did: `created` when nothing was read; `unchanged` when the cluster stored nothing (the
 * same resourceVersion; a dry run always keeps it, so there the objects are compared) or nothing that
 * counts changed (see `sameObjects`); `configured` otherwise.
 */
function actionOf(before: Obj | null, after: Obj, dryRun: boolean): ApplyResultDto['action'] {
  if (!before) return 'created';
  const version = before.metadata?.resourceVersion;
  if (!dryRun && typeof version === 'string' && version === after.metadata?.resourceVersion) return 'unchanged';
  return sameObjects(before, after) ? 'unchanged' : 'configured';
}

/** Runs `work` on each item, at most `limit` at a time. */
async function eachLimited<T>(items: T[], limit: number, work: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < items.length) await work(items[next++]);
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
}

/** Namespaces first, then CustomResourceDefinitions, then everything else (each phase in the documents' order). */
function phaseOf(doc: ApplyDocument): number {
  const object = doc.object as Obj | null;
  if (object?.kind === 'Namespace' && object.apiVersion === 'v1') return 0;
  if (object?.kind === CRD_TYPE.kind && String(object.apiVersion).startsWith(`${CRD_TYPE.group}/`)) return 1;
  return 2;
}

/**
 * Server-side apply of one or many documents (docs/APPLY.md): each checked, typed by the cluster's
 * discovery, authorized as `create` or `patch` by the service's rules, read and applied through the
 * gateway as the caller; the result says what changed, with a diff in which a Secret's values never appear.
 */
@Injectable()
export class ApplyService {
  constructor(
    private readonly gateway: ClusterGateway,
    private readonly discovery: ResourceDiscovery,
    private readonly authorizer: Authorizer,
  ) {}

  async apply(
    caller: Caller,
    clusterHeader: unknown,
    body: unknown,
    q: ApplyQueryDto,
  ): Promise<{ response: ApplyResponseDto; audited: AuditedDocument[] }> {
    const clusterName = clusterNameOf(clusterHeader);
    const creates = this.authorizer.mayAttempt(caller, 'create', clusterName);
    const patches = this.authorizer.mayAttempt(caller, 'patch', clusterName);
    if (!creates.allowed && !patches.allowed) throw new ForbiddenException(patches.reason);
    assertOwnFieldManager(caller, q.fieldManager);
    const documents = await documentsOf(body);
    const cluster = await this.gateway.clientFor(caller, clusterName);
    const run: Run = { caller, cluster, q, fieldManager: q.fieldManager ?? defaultFieldManager(caller), crds: [] };

    const results: ApplyResultDto[] = [];
    const audited: AuditedDocument[] = [];
    for (const phase of [0, 1, 2]) {
      const docs = documents.filter((doc) => phaseOf(doc) === phase);
      await eachLimited(docs, CONCURRENCY, async (doc) => {
        const { result, audit } = await this.applyOne(run, doc);
        results[doc.index - 1] = result;
        audited[doc.index - 1] = audit;
      });
    }
    return { response: { results }, audited };
  }

  private async applyOne(run: Run, doc: ApplyDocument): Promise<{ result: ApplyResultDto; audit: AuditedDocument }> {
    const object = (doc.object ?? {}) as Obj;
    /** The document's values to scrub from the cluster's messages, once its type says it is a Secret. */
    let secrets: string[] = [];
    const result: ApplyResultDto = {
      apiVersion: text(object.apiVersion),
      kind: text(object.kind),
      namespace: text(object.metadata?.namespace) ?? run.q.namespace ?? null,
      name: text(object.metadata?.name),
      action: 'error',
      diff: '',
      conflicts: [],
      status: null,
    };
    const audit: AuditedDocument = {
      cluster: run.cluster.name,
      resource: null,
      namespace: result.namespace,
      name: result.name,
      uid: null,
      resourceVersion: null,
      statusCode: 400,
    };
    const fail = (status: Obj) => {
      result.action = 'error';
      result.status = scrub(status, secrets);
      audit.statusCode = typeof status.code === 'number' ? status.code : 500;
      return { result, audit };
    };
    try {
      const target = await this.target(run, doc);
      Object.assign(result, { namespace: target.namespace });
      Object.assign(audit, { resource: target.id, namespace: target.namespace });
      if (target.secret) {
        const problems = secretValueProblems(target.object);
        if (problems.length) return fail(serviceStatus(400, `${whereOf(doc)}: ${problems.join('; ')}`));
        secrets = secretValuesOf(target.object, true);
      }
      if (jsonChars(target.object) > MAX_DOCUMENT_CHARS) {
        const limit = `${MAX_DOCUMENT_CHARS / 1024 / 1024} MiB`;
        return fail(
          serviceStatus(
            413,
            `${whereOf(doc)} is larger than ${limit} as JSON, the most an API server takes in one write`,
          ),
        );
      }
      const access = { cluster: run.cluster.name, resource: target.id, namespace: target.namespace };
      const mayCreate = this.authorizer.can(run.caller, { ...access, verb: 'create' });
      const mayPatch = this.authorizer.can(run.caller, { ...access, verb: 'patch' });
      if (!mayCreate.allowed && !mayPatch.allowed) return fail(serviceStatus(403, mayPatch.reason));

      const live = await run.cluster.send({ method: 'GET', path: target.path });
      const liveBody = await run.cluster.read(live);
      if (live.statusCode !== 200 && live.statusCode !== 404)
        return fail(this.clusterStatus(run, live.statusCode, liveBody));
      const before = live.statusCode === 200 ? (run.cluster.parse(liveBody, `GET ${target.path}`) as Obj) : null;
      const decision = before ? mayPatch : mayCreate;
      if (!decision.allowed) return fail(serviceStatus(403, decision.reason));
      // The cluster decides on its own state, not on the read: an object that appeared or went away in
      // between is refused (409) for a caller that may not take the other path.
      const bound = bindToRead(target.object, before, { create: mayCreate.allowed, patch: mayPatch.allowed });

      const query = new URLSearchParams({ fieldManager: run.fieldManager });
      if (run.q.force) query.set('force', 'true');
      if (run.q.dryRun) query.set('dryRun', run.q.dryRun);
      const res = await run.cluster.send({
        method: 'PATCH',
        path: target.path,
        query,
        body: Buffer.from(JSON.stringify(bound.object), 'utf8'),
        contentType: PATCH_CONTENT_TYPES.apply,
      });
      const answer = await run.cluster.read(res);
      if (res.statusCode === 409) {
        const status = this.clusterStatus(run, res.statusCode, answer);
        const causes: Obj[] = Array.isArray(status.details?.causes) ? status.details.causes : [];
        const conflicts = causes.filter((c) => c?.reason === 'FieldManagerConflict');
        // A create-only caller's apply that met the object is refused whatever else the cluster found
        // (field conflicts come before the version check): forcing would not help.
        if (bound.binding === 'absent' || (bound.binding && conflicts.length === 0)) {
          const refusal = boundRefusal(bound.binding, `${target.id} '${target.name}'`);
          return fail(serviceStatus(409, `${whereOf(doc)}: ${refusal}`));
        }
        if (conflicts.length > 0) {
          fail(status);
          result.action = 'conflict';
          result.conflicts = scrub(
            conflicts.map((c): ApplyConflictDto => ({
              manager: managerOf(String(c.message ?? '')),
              field: String(c.field ?? ''),
              message: String(c.message ?? ''),
            })),
            secrets,
          );
          return { result, audit };
        }
      }
      if (res.statusCode !== 200 && res.statusCode !== 201)
        return fail(this.clusterStatus(run, res.statusCode, answer));
      const after = run.cluster.parse(answer, `PATCH ${target.path}`) as Obj;
      // Read-your-writes: the gateway's write hook marked the applied version for paged lists of this type.
      result.action = actionOf(before, after, Boolean(run.q.dryRun));
      const label = [target.namespace, target.id, target.name].filter(Boolean).join('/');
      result.diff = await diffOf({ label, before, after, secret: target.secret }, liveBody.length + answer.length);
      Object.assign(audit, {
        statusCode: res.statusCode,
        uid: text(after.metadata?.uid, 64),
        resourceVersion: shownVersion(text(after.metadata?.resourceVersion, 64)),
      });
      if (target.type.group === CRD_TYPE.group && target.type.kind === CRD_TYPE.kind && !run.q.dryRun) {
        run.crds.push({ group: String(after.spec?.group ?? ''), kind: String(after.spec?.names?.kind ?? '') });
      }
      return { result, audit };
    } catch (error) {
      if (error instanceof HttpException) return fail(statusOfException(error));
      throw error;
    }
  }

  /** The cluster's `Status` for a failed call (or one in its shape when the answer is not one). */
  private clusterStatus(run: Run, code: number, body: Buffer): Obj {
    try {
      const status = JSON.parse(body.toString('utf8')) as Obj;
      if (status?.kind === 'Status') return status;
    } catch {
      // not JSON: described below
    }
    return serviceStatus(code, `${run.cluster.target} answered ${code}`);
  }

  /** Checks a document and finds where it goes: its type by discovery, its namespace, its name. 400/404 otherwise. */
  private async target(run: Run, doc: ApplyDocument): Promise<Target> {
    const where = whereOf(doc);
    const object = doc.object;
    if (object === null || typeof object !== 'object' || Array.isArray(object)) {
      throw new BadRequestException([`${where} must be an object with apiVersion, kind and metadata`]);
    }
    const { apiVersion, kind, metadata } = object as Obj;
    if (typeof apiVersion !== 'string' || apiVersion === '' || typeof kind !== 'string' || kind === '') {
      throw new BadRequestException([`${where}: apiVersion and kind are required`]);
    }
    if (metadata === null || typeof metadata !== 'object' || Array.isArray(metadata)) {
      throw new BadRequestException([`${where}: metadata with a name is required`]);
    }
    if (typeof metadata.name !== 'string' || metadata.name === '') {
      throw new BadRequestException([`${where}: metadata.name is required (server-side apply cannot generate a name)`]);
    }
    validateName(metadata.name);
    const parts = apiVersion.split('/');
    if (parts.length > 2)
      throw new BadRequestException([`${where}: apiVersion '${apiVersion.slice(0, 100)}' is not <group>/<version>`]);
    const [group, version] = parts.length === 2 ? parts : ['', parts[0]];
    const type = await this.typeOf(run, group, version, kind);

    let namespace: string | null = null;
    const own = metadata.namespace;
    if (own !== undefined && own !== null && typeof own !== 'string') {
      throw new BadRequestException([`${where}: metadata.namespace must be a string`]);
    }
    const body: Obj = { ...object, metadata: { ...metadata } };
    if (type.namespaced) {
      if (own && run.q.namespace && own !== run.q.namespace) {
        throw new BadRequestException([
          `${where}: metadata.namespace '${own.slice(0, 63)}' differs from the request's namespace '${run.q.namespace}'`,
        ]);
      }
      const chosen: string = own || run.q.namespace || 'default';
      if (chosen === ALL_NAMESPACES)
        throw new BadRequestException([`${where}: '${ALL_NAMESPACES}' is not a namespace`]);
      validateNamespace(chosen);
      namespace = body.metadata.namespace = chosen;
    } else {
      // A cluster-scoped object has no namespace: one written in the document is ignored, as kubectl does.
      delete body.metadata.namespace;
    }
    const id = resourceIdOf(type);
    return {
      type,
      id,
      secret: type.group === '' && type.plural === 'secrets',
      namespace,
      name: metadata.name,
      path: resourcePath(type, namespace, metadata.name),
      object: body,
    };
  }

  /** The type of a kind; one whose CRD this request applied is waited for (bounded) until the cluster serves it. */
  private async typeOf(run: Run, group: string, version: string, kind: string): Promise<ResourceType> {
    const deadline = Date.now() + CRD_WAIT_MS;
    for (;;) {
      try {
        return await this.discovery.resolveKind(run.cluster.conn, group, version, kind);
      } catch (error) {
        const pending = run.crds.some((crd) => crd.group === group && crd.kind === kind);
        if (!(error instanceof NotFoundException) || !pending || Date.now() >= deadline) throw error;
        await sleep(CRD_POLL_MS);
      }
    }
  }
}
