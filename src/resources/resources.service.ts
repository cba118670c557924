import {
  BadGatewayException,
  BadRequestException,
  ForbiddenException,
  GatewayTimeoutException,
  Inject,
  Injectable,
  NotFoundException,
  UnauthorizedException,
} from '@nestjs/common';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { ClusterResponse, SettledAnswer } from '../clusters/cluster-request.js';
import { setTimeout as sleep } from 'node:timers/promises';
import { Authorizer, type Verb } from '../access/authorizer.js';
import { type Impersonation, impersonationFor } from '../access/impersonation.js';
import { presentedSecret } from '../auth/auth.guard.js';
import type { Caller } from '../auth/caller.js';
import {
  CLUSTER_CONNECTIONS,
  type ClusterConnection,
  type ClusterConnections,
} from '../clusters/cluster-connection.js';
import { ResourceDiscovery } from './discovery.js';
import {
  type DeleteResourceQueryDto,
  type GetResourceQueryDto,
  type ListResourcesQueryDto,
  type ObjectEventsQueryDto,
  type PatchResourceQueryDto,
  watchQueryProblems,
  type WriteResourceQueryDto,
} from './dto/resource-query.dto.js';
import { WatchService } from '../watch/watch.service.js';
import type { WatchFormat } from '../watch/watch-stream.js';
import {
  ALL_NAMESPACES,
  deleteOptions,
  parseResourceId,
  patchContentType,
  resourcePath,
  type ResourceType,
  validateName,
  validateNamespace,
} from './resource-path.js';
import { UpstreamClient } from './upstream.js';

/** Where a resource call goes, as the route named it. */
export interface ResourceTarget {
  /** The `x-cluster-name` header. */
  cluster: string | string[] | undefined;
  resource: string;
  namespace: string;
  name?: string;
}

/** The request and reply a watch stream takes over, and the format the caller asked for. */
export interface StreamClient {
  request: FastifyRequest;
  reply: FastifyReply;
  format: WatchFormat;
}

/** The cluster's answer: read whole when small (most object answers, waited deletes), or streamed as it arrives. */
export type ClusterAnswer = ClusterResponse | SettledAnswer;

export interface Resolved {
  conn: ClusterConnection;
  type: ResourceType;
  /** null: cluster-scoped, or all namespaces on list. */
  namespace: string | null;
  name: string | null;
  path: string;
  /** Set when the cluster impersonates callers: every request of this call goes as the caller. */
  impersonate: Impersonation | undefined;
}

const CLUSTER_NAME = /^[\x21-\x7e]{1,253}$/;
/** The service's own top-level path names: a path under them that no route matched is simply unknown. */
const OWN_PATHS = new Set(['admin', 'auth', 'metrics']);
const DEFAULT_DELETE_WAIT_SECONDS = 60;

function query(values: object): URLSearchParams | undefined {
  let params: URLSearchParams | undefined;
  for (const key in values) {
    const value = (values as Record<string, unknown>)[key];
    if (value !== undefined) (params ??= new URLSearchParams()).set(key, String(value));
  }
  return params;
}

function objectBody(body: unknown): Record<string, any> {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) {
    throw new BadRequestException(['body must be a JSON object: the full Kubernetes object']);
  }
  const metadata = (body as { metadata?: unknown }).metadata;
  if (metadata !== undefined && (metadata === null || typeof metadata !== 'object' || Array.isArray(metadata))) {
    throw new BadRequestException(['metadata must be an object']);
  }
  return body as Record<string, any>;
}

@Injectable()
export class ResourcesService {
  constructor(
    @Inject(CLUSTER_CONNECTIONS) private readonly clusters: ClusterConnections,
    private readonly discovery: ResourceDiscovery,
    private readonly upstream: UpstreamClient,
    private readonly authorizer: Authorizer,
    private readonly watches: WatchService,
  ) {}

  async listResources(caller: Caller, target: ResourceTarget, q: ListResourcesQueryDto): Promise<ClusterAnswer> {
    const problems = watchQueryProblems(q);
    if (problems.length) throw new BadRequestException(problems);
    const resolved = this.resolve(caller, target, 'list');
    const r = resolved instanceof Promise ? await resolved : resolved;
    const { watch: _watch, ...passThrough } = q;
    return this.upstream.sendListSettled(r.conn, {
      impersonate: r.impersonate,
      method: 'GET',
      path: r.path,
      query: query(passThrough),
    });
  }

  /**
   * `?watch=true` on a list route: a stream fed by the shared watch of this collection and
   * selectors. Resolves null once the stream owns the reply, or to the cluster's refusal.
   */
  async watchResources(
    caller: Caller,
    target: ResourceTarget,
    q: ListResourcesQueryDto,
    client: StreamClient,
  ): Promise<ClusterAnswer | null> {
    const problems = watchQueryProblems(q);
    if (problems.length) throw new BadRequestException(problems);
    const r = await this.resolve(caller, target, 'watch');
    return this.watches.open({
      caller,
      secret: this.secretOf(client.request),
      request: client.request,
      reply: client.reply,
      format: client.format,
      source: { conn: r.conn, path: r.path, labelSelector: q.labelSelector, fieldSelector: q.fieldSelector },
      apiVersion: apiVersionOf(r.type),
      kind: r.type.kind,
      access: [{ verb: 'watch', cluster: r.conn.clusterName, resource: idOf(r.type), namespace: r.namespace }],
      resourceVersion: q.resourceVersion,
      bookmarks: q.allowWatchBookmarks === true,
      timeoutSeconds: q.timeoutSeconds,
    });
  }

  /**
   * The events of one object, built-in or custom: core/v1 Events and events.k8s.io Events whose
   * involved object (`regarding`) has the object's uid, deduplicated by the event's uid, newest
   * first. Needs `get` on the object's resource and `list` on events. `?watch=true` streams the
   * object's core/v1 Events (the same stored events both APIs serve) like a watch of a list.
   */
  async objectEvents(
    caller: Caller,
    target: ResourceTarget,
    q: ObjectEventsQueryDto,
    client: StreamClient,
  ): Promise<ClusterAnswer | null> {
    if (q.watch !== true && (q.allowWatchBookmarks !== undefined || q.resourceVersion !== undefined)) {
      throw new BadRequestException(['allowWatchBookmarks and resourceVersion need watch=true']);
    }
    const r = await this.resolve(caller, target, 'get');
    const clusterName = r.conn.clusterName;
    const eventsAccess = { verb: 'list' as const, cluster: clusterName, resource: 'events', namespace: r.namespace };
    this.authorizer.require(caller, eventsAccess);
    if (q.watch === true) {
      this.authorizer.require(caller, { ...eventsAccess, verb: 'watch' });
    }

    const res = await this.upstream.send(r.conn, { method: 'GET', path: r.path });
    const body = await this.upstream.readAll(r.conn, res);
    if (res.statusCode !== 200) {
      return { statusCode: res.statusCode, contentType: contentTypeOf(res), body };
    }
    const uid = JSON.parse(body.toString('utf8'))?.metadata?.uid as string | undefined;
    if (typeof uid !== 'string' || !/^[A-Za-z0-9-]{1,64}$/.test(uid)) {
      throw new BadGatewayException(`cluster '${clusterName}' returned ${idOf(r.type)} '${r.name}' without a uid`);
    }
    const coreEvents = await this.discovery.resolve(r.conn, 'events', '');
    const corePath = resourcePath(coreEvents, r.namespace, null);

    if (q.watch === true) {
      return this.watches.open({
        caller,
        secret: this.secretOf(client.request),
        request: client.request,
        reply: client.reply,
        format: client.format,
        source: { conn: r.conn, path: corePath, fieldSelector: `involvedObject.uid=${uid}` },
        apiVersion: apiVersionOf(coreEvents),
        kind: coreEvents.kind,
        access: [
          { verb: 'get', cluster: clusterName, resource: idOf(r.type), namespace: r.namespace },
          eventsAccess,
          { ...eventsAccess, verb: 'watch' },
        ],
        resourceVersion: q.resourceVersion,
        bookmarks: q.allowWatchBookmarks === true,
        timeoutSeconds: q.timeoutSeconds,
      });
    }

    const core = await this.eventList(r.conn, corePath, `involvedObject.uid=${uid}`);
    if ('statusCode' in core) return core;
    const items = [...core.items];
    const seen = new Set(items.map((e) => e.metadata?.uid));
    // Served by every Kubernetes this service supports; a cluster without it simply has none to add.
    const newer = await this.discovery.resolve(r.conn, 'events', 'events.k8s.io').catch(() => undefined);
    if (newer && this.authorizer.can(caller, { ...eventsAccess, resource: 'events.events.k8s.io' }).allowed) {
      const list = await this.eventList(r.conn, resourcePath(newer, r.namespace, null), `regarding.uid=${uid}`);
      if ('statusCode' in list) return list;
      for (const event of list.items) {
        if (seen.has(event.metadata?.uid)) continue;
        seen.add(event.metadata?.uid);
        items.push(asCoreEvent(event));
      }
    }
    items.sort(newestFirst);
    const answer = {
      apiVersion: 'v1',
      kind: 'EventList',
      metadata: { resourceVersion: core.resourceVersion },
      items: items.map((e) => ({ apiVersion: 'v1', kind: 'Event', ...e })),
    };
    return { statusCode: 200, contentType: 'application/json', body: json(answer) };
  }

  private async eventList(
    conn: ClusterConnection,
    path: string,
    fieldSelector: string,
  ): Promise<{ resourceVersion: string; items: Array<Record<string, any>> } | SettledAnswer> {
    const res = await this.upstream.send(conn, { method: 'GET', path, query: new URLSearchParams({ fieldSelector }) });
    const body = await this.upstream.readAll(conn, res);
    if (res.statusCode !== 200) return { statusCode: res.statusCode, contentType: contentTypeOf(res), body };
    const list = JSON.parse(body.toString('utf8'));
    return {
      resourceVersion: list?.metadata?.resourceVersion ?? '',
      items: Array.isArray(list?.items) ? list.items : [],
    };
  }

  private secretOf(request: FastifyRequest): string {
    const secret = presentedSecret(request);
    if (!secret) throw new UnauthorizedException('authentication required');
    return secret;
  }

  async getResource(caller: Caller, target: ResourceTarget, q: GetResourceQueryDto): Promise<ClusterAnswer> {
    const resolved = this.resolve(caller, target, 'get');
    const r = resolved instanceof Promise ? await resolved : resolved;
    return this.upstream.sendSettled(r.conn, {
      impersonate: r.impersonate,
      method: 'GET',
      path: r.path,
      query: query(q),
    });
  }

  async createResource(caller: Caller, target: ResourceTarget, body: unknown, q: WriteResourceQueryDto) {
    const r = await this.resolve(caller, target, 'create');
    const object = this.withScope(r, objectBody(body));
    return this.upstream.sendSettled(r.conn, {
      impersonate: r.impersonate,
      method: 'POST',
      path: r.path,
      query: query(q),
      body: json(object),
    });
  }

  async replaceResource(caller: Caller, target: ResourceTarget, body: unknown, q: WriteResourceQueryDto) {
    const r = await this.resolve(caller, target, 'update');
    const object = this.withScope(r, objectBody(body));
    const metadata = object.metadata ?? {};
    const problems: string[] = [];
    if (metadata.name !== r.name) problems.push(`metadata.name must be '${r.name}', the name in the path`);
    if (typeof metadata.resourceVersion !== 'string' || metadata.resourceVersion === '') {
      problems.push('metadata.resourceVersion is required: send the resourceVersion of the object you read');
    }
    if (problems.length) throw new BadRequestException(problems);
    return this.upstream.sendSettled(r.conn, {
      impersonate: r.impersonate,
      method: 'PUT',
      path: r.path,
      query: query(q),
      body: json(object),
    });
  }

  async patchResource(caller: Caller, target: ResourceTarget, body: unknown, q: PatchResourceQueryDto) {
    const contentType = patchContentType(q.patchType);
    const r = await this.resolve(caller, target, 'patch');
    if (body === undefined || body === null || typeof body !== 'object') {
      throw new BadRequestException([
        'body must be the patch: a JSON object, or an array of operations with patchType=json',
      ]);
    }
    const { patchType: _patchType, ...passThrough } = q;
    return this.upstream.sendSettled(r.conn, {
      impersonate: r.impersonate,
      method: 'PATCH',
      path: r.path,
      query: query(passThrough),
      body: json(body),
      contentType,
    });
  }

  async deleteResource(caller: Caller, target: ResourceTarget, q: DeleteResourceQueryDto): Promise<ClusterAnswer> {
    const r = await this.resolve(caller, target, 'delete');
    const options = deleteOptions({
      force: q.force === true,
      cascade: q.cascade !== false,
      dryRun: q.dryRun === 'All',
    });
    const res = await this.upstream.send(r.conn, {
      impersonate: r.impersonate,
      method: 'DELETE',
      path: r.path,
      body: json(options),
    });
    if (q.wait === false || q.dryRun === 'All' || res.statusCode >= 300) return res;

    const body = await this.upstream.readAll(r.conn, res);
    const answer = { statusCode: 200, contentType: String(res.headers['content-type'] ?? 'application/json'), body };
    const uid = this.upstream.parseJson(r.conn, body, 'the delete')?.metadata?.uid as string | undefined;
    if (!uid) return answer; // a Status: the object is already gone
    await this.waitUntilGone(r, uid, (q.timeoutSeconds ?? DEFAULT_DELETE_WAIT_SECONDS) * 1000);
    return answer;
  }

  /** Polls the cluster itself (never a cache) until the object with this uid is gone; finalizers are left alone. */
  private async waitUntilGone(r: Resolved, uid: string, timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    for (let pause = 100; ; pause = Math.min(pause * 2, 500)) {
      const res = await this.upstream.send(r.conn, { impersonate: r.impersonate, method: 'GET', path: r.path });
      const body = await this.upstream.readAll(r.conn, res);
      if (res.statusCode === 404) return;
      if (res.statusCode === 200 && this.upstream.parseJson(r.conn, body, 'a read')?.metadata?.uid !== uid) return; // replaced by a new one
      const left = deadline - Date.now();
      if (left <= 0) {
        throw new GatewayTimeoutException(
          `${r.type.plural} '${r.name}' was not gone after ${Math.round(timeoutMs / 1000)} s; it stays marked for deletion on cluster '${r.conn.clusterName}'`,
        );
      }
      await sleep(Math.min(pause, left));
    }
  }

  /**
   * Checks everything that can be checked before the cluster is asked: the caller's role, the
   * header, the path segments; then resolves the cluster, the resource type and the scope. When the
   * cluster's connection and its discovery are at hand (nearly always), without waiting for anything.
   */
  resolve(caller: Caller, target: ResourceTarget, verb: Verb): Resolved | Promise<Resolved> {
    if (OWN_PATHS.has(target.resource)) {
      throw new NotFoundException(`no such route under /api/v1/${target.resource}/`);
    }
    const clusterName = target.cluster;
    if (clusterName === undefined || clusterName === '') {
      throw new BadRequestException(['x-cluster-name header is required: name the target cluster']);
    }
    if (typeof clusterName !== 'string' || !CLUSTER_NAME.test(clusterName)) {
      throw new BadRequestException([
        'x-cluster-name must be one cluster name: 1–253 printable characters without spaces',
      ]);
    }
    const attempt = this.authorizer.mayAttempt(caller, verb, clusterName);
    if (!attempt.allowed) throw new ForbiddenException(attempt.reason);
    const { plural, group } = parseResourceId(target.resource);
    validateNamespace(target.namespace);
    if (target.name !== undefined) validateName(target.name);

    const conn = this.clusters.forNameNow(clusterName);
    const type = conn && this.discovery.resolveNow(conn, plural, group);
    if (type) return this.scoped(caller, target, verb, conn, type);
    return (async () => {
      const waited = await this.clusters.forName(clusterName);
      return this.scoped(caller, target, verb, waited, await this.discovery.resolve(waited, plural, group));
    })();
  }

  /** The scope the type allows for the path's namespace, checked against the caller's access. */
  private scoped(
    caller: Caller,
    target: ResourceTarget,
    verb: Verb,
    conn: ClusterConnection,
    type: ResourceType,
  ): Resolved {
    const id = idOf(type);
    const all = target.namespace === ALL_NAMESPACES;
    if (!type.namespaced && !all) {
      throw new BadRequestException([`${id} is cluster-scoped: use '${ALL_NAMESPACES}' in place of the namespace`]);
    }
    if (type.namespaced && all && verb !== 'list' && verb !== 'watch') {
      throw new BadRequestException([
        `${id} is namespaced: name a namespace ('${ALL_NAMESPACES}' only lists across all of them)`,
      ]);
    }
    const namespace = type.namespaced && !all ? target.namespace : null;
    this.authorizer.require(caller, { verb, cluster: conn.clusterName, resource: id, namespace });
    const name = target.name ?? null;
    const impersonate = conn.impersonate ? impersonationFor(caller) : undefined;
    return { conn, type, namespace, name, path: resourcePath(type, namespace, name), impersonate };
  }

  /** Create and replace: the namespace comes from the path; apiVersion and kind default to the resource's. */
  private withScope(r: Resolved, object: Record<string, any>): Record<string, any> {
    const metadata = { ...(object.metadata ?? {}) };
    if (r.namespace !== null) {
      if (metadata.namespace === undefined || metadata.namespace === '') metadata.namespace = r.namespace;
      else if (metadata.namespace !== r.namespace) {
        throw new BadRequestException([
          `metadata.namespace '${metadata.namespace}' differs from the namespace in the path '${r.namespace}'`,
        ]);
      }
    } else if (metadata.namespace) {
      throw new BadRequestException([`${r.type.plural} is cluster-scoped: metadata.namespace must be empty`]);
    }
    const apiVersion = r.type.group ? `${r.type.group}/${r.type.version}` : r.type.version;
    return { apiVersion, kind: r.type.kind, ...object, metadata };
  }
}

function idOf(type: ResourceType): string {
  return type.group ? `${type.plural}.${type.group}` : type.plural;
}

function apiVersionOf(type: ResourceType): string {
  return type.group ? `${type.group}/${type.version}` : type.version;
}

function contentTypeOf(res: ClusterResponse): string {
  return String(res.headers['content-type'] ?? 'application/json');
}

/**
 * An events.k8s.io/v1 Event in the core/v1 shape (the apiserver's own field mapping), so that a
 * client reads one shape; only events that one API listed and the other did not need it.
 */
function asCoreEvent(event: Record<string, any>): Record<string, any> {
  const {
    apiVersion: _apiVersion,
    kind: _kind,
    regarding,
    note,
    deprecatedSource,
    deprecatedFirstTimestamp,
    deprecatedLastTimestamp,
    deprecatedCount,
    reportingController,
    ...rest
  } = event;
  return {
    ...rest,
    involvedObject: regarding ?? {},
    message: note,
    source: deprecatedSource ?? {},
    firstTimestamp: deprecatedFirstTimestamp ?? null,
    lastTimestamp: deprecatedLastTimestamp ?? null,
    count: deprecatedCount,
    reportingComponent: reportingController ?? '',
  };
}

/** When an event (core/v1 or events.k8s.io) last happened. */
function eventTime(event: Record<string, any>): number {
  const candidates = [
    event.series?.lastObservedTime,
    event.lastTimestamp,
    event.deprecatedLastTimestamp,
    event.eventTime,
    event.firstTimestamp,
    event.metadata?.creationTimestamp,
  ];
  for (const value of candidates) {
    if (typeof value === 'string' && value !== '') {
      const time = Date.parse(value);
      if (!Number.isNaN(time)) return time;
    }
  }
  return 0;
}

function newestFirst(a: Record<string, any>, b: Record<string, any>): number {
  const byTime = eventTime(b) - eventTime(a);
  if (byTime !== 0) return byTime;
  const ra = Number(a.metadata?.resourceVersion ?? 0);
  const rb = Number(b.metadata?.resourceVersion ?? 0);
  return rb - ra;
}

function json(value: unknown): Buffer {
  return Buffer.from(JSON.stringify(value), 'utf8');
}
