import {
  BadGatewayException,
  BadRequestException,
  ForbiddenException,
  GatewayTimeoutException,
  Injectable,
  NotFoundException,
} from '@nestjs/common';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { setTimeout as sleep } from 'node:timers/promises';
import { Authorizer, type Verb } from '../access/authorizer.js';
import { presentedSecret } from '../auth/auth.guard.js';
import type { Caller } from '../access/caller.js';
import { clusterNameOf } from '../clusters/cluster-name.js';
import { ClusterAccessReview } from '../clusters/gateway/access-review.js';
import type { ClusterAnswer, SettledAnswer } from '../clusters/gateway/answer.js';
import type { ClusterClient } from '../clusters/gateway/cluster-client.js';
import { ClusterGateway } from '../clusters/gateway/cluster-gateway.js';
import { patchRequest } from '../apply/apply-input.js';
import { scrub, secretValueProblems, secretValuesOf } from '../apply/apply-diff.js';
import { diffOf } from '../apply/diff-thread.js';
import type { ClusterCall } from '../clusters/gateway/cluster-client.js';
import { assertOwnFieldManager } from '../apply/field-manager.js';
import { ResourceDiscovery } from './discovery.js';
import { JSON_TYPE, YAML_TYPE, yamlAnswer } from './yaml-answer.js';
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
import { ListsService } from '../lists/lists.service.js';
import { WriteMarks } from '../clusters/gateway/write-marks.js';
import { StreamOwner } from '../streams/stream-owner.js';
import type { WatchFormat } from '../watch/watch-stream.js';
import {
  ALL_NAMESPACES,
  apiVersionOf,
  deleteOptions,
  parseResourceId,
  patchContentType,
  resourceIdOf,
  resourcePath,
  type ResourceType,
  validateName,
  validateNamespace,
} from '../k8s/resource-path.js';

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

export type { ClusterAnswer };

export interface Resolved {
  /** The cluster as the caller: every request of this call goes with the caller's identity. */
  cluster: ClusterClient;
  type: ResourceType;
  /** null: cluster-scoped, or all namespaces on list. */
  namespace: string | null;
  name: string | null;
  path: string;
}

/** The service's own top-level path names: a path under them that no route matched is simply unknown. */
const OWN_PATHS = new Set(['admin', 'auth', 'metrics', 'apply', 'helm']);
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
    private readonly gateway: ClusterGateway,
    private readonly review: ClusterAccessReview,
    private readonly discovery: ResourceDiscovery,
    private readonly authorizer: Authorizer,
    private readonly watches: WatchService,
    private readonly lists: ListsService,
    private readonly marks: WriteMarks,
    private readonly owner: StreamOwner,
  ) {}

  /**
   * A paged query on a list route (docs/LISTS.md): a page from the list cache, or with `watch=true` its
   * CHANGED notices (resolves null once the stream owns the reply). `_all` lists what the caller may list.
   */
  async pagedList(
    caller: Caller,
    target: ResourceTarget,
    q: ListResourcesQueryDto,
    client: StreamClient,
    mediaType: string = JSON_TYPE,
  ): Promise<ClusterAnswer | null> {
    const r = await this.resolve(caller, target, 'list', true);
    const query = this.lists.parse(q, r.type);
    const pageTarget = { cluster: r.cluster, type: r.type, namespace: r.namespace };
    if (q.watch === true) {
      // timeoutSeconds ends a paged watch, as it ends any watch; resourceVersion is the page's it follows.
      const { timeoutSeconds, resourceVersion } = q;
      const stream = { ...client, secret: secretOf(client.request), timeoutSeconds, resourceVersion };
      await this.lists.watch(caller, pageTarget, query, stream, this.owner);
      return null;
    }
    const body = await this.lists.page(caller, pageTarget, query);
    const answer = { statusCode: 200, contentType: JSON_TYPE, body: Buffer.from(body, 'utf8') };
    return mediaType === YAML_TYPE ? yamlAnswer(r.cluster, answer) : answer;
  }

  /** `mediaType`: what the caller accepts (READ_TYPES); YAML is written from the cluster's JSON. */
  async listResources(
    caller: Caller,
    target: ResourceTarget,
    q: ListResourcesQueryDto,
    mediaType: string = JSON_TYPE,
  ): Promise<ClusterAnswer> {
    const problems = watchQueryProblems(q);
    if (problems.length) throw new BadRequestException(problems);
    const r = await this.resolve(caller, target, 'list');
    const { watch: _watch, ...passThrough } = q;
    const answer = await r.cluster.sendList({ method: 'GET', path: r.path, query: query(passThrough) });
    return mediaType === YAML_TYPE ? yamlAnswer(r.cluster, answer) : answer;
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
    const review = { verb: 'watch', group: r.type.group, resource: r.type.plural, namespace: r.namespace ?? undefined };
    return this.watches.open({
      caller,
      secret: secretOf(client.request),
      request: client.request,
      reply: client.reply,
      format: client.format,
      source: this.sharedSource(r.cluster, r.path, q.labelSelector, q.fieldSelector),
      asCaller: r.cluster,
      clusterCheck: this.clusterCheck(r.cluster, [review]),
      apiVersion: apiVersionOf(r.type),
      kind: r.type.kind,
      access: [{ verb: 'watch', cluster: r.cluster.name, resource: resourceIdOf(r.type), namespace: r.namespace }],
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
    const { cluster } = r;
    const eventsAccess = { verb: 'list' as const, cluster: cluster.name, resource: 'events', namespace: r.namespace };
    this.authorizer.require(caller, eventsAccess);
    if (q.watch === true) {
      this.authorizer.require(caller, { ...eventsAccess, verb: 'watch' });
    }

    const res = await cluster.send({ method: 'GET', path: r.path });
    const body = await cluster.read(res);
    if (res.statusCode !== 200) {
      return { statusCode: res.statusCode, contentType: contentTypeOf(res.headers), body };
    }
    const uid = cluster.parse(body, `GET ${r.path}`)?.metadata?.uid as string | undefined;
    if (typeof uid !== 'string' || !/^[A-Za-z0-9-]{1,64}$/.test(uid)) {
      throw new BadGatewayException(`${cluster.target} returned ${resourceIdOf(r.type)} '${r.name}' without a uid`);
    }
    const coreEvents = await this.discovery.resolve(cluster.conn, 'events', '');
    const corePath = resourcePath(coreEvents, r.namespace, null);

    if (q.watch === true) {
      const namespace = r.namespace ?? undefined;
      return this.watches.open({
        caller,
        secret: secretOf(client.request),
        request: client.request,
        reply: client.reply,
        format: client.format,
        source: this.sharedSource(cluster, corePath, undefined, `involvedObject.uid=${uid}`),
        asCaller: cluster,
        clusterCheck: this.clusterCheck(cluster, [
          { verb: 'get', group: r.type.group, resource: r.type.plural, namespace, name: r.name ?? undefined },
          { verb: 'watch', group: '', resource: 'events', namespace },
        ]),
        apiVersion: apiVersionOf(coreEvents),
        kind: coreEvents.kind,
        access: [
          { verb: 'get', cluster: cluster.name, resource: resourceIdOf(r.type), namespace: r.namespace },
          eventsAccess,
          { ...eventsAccess, verb: 'watch' },
        ],
        resourceVersion: q.resourceVersion,
        bookmarks: q.allowWatchBookmarks === true,
        timeoutSeconds: q.timeoutSeconds,
      });
    }

    const core = await this.eventList(cluster, corePath, `involvedObject.uid=${uid}`);
    if ('statusCode' in core) return core;
    const items = [...core.items];
    const seen = new Set(items.map((e) => e.metadata?.uid));
    // Served by every Kubernetes this service supports; a cluster without it simply has none to add.
    const newer = await this.discovery.resolve(cluster.conn, 'events', 'events.k8s.io').catch(() => undefined);
    if (newer && this.authorizer.can(caller, { ...eventsAccess, resource: 'events.events.k8s.io' }).allowed) {
      const list = await this.eventList(cluster, resourcePath(newer, r.namespace, null), `regarding.uid=${uid}`);
      // The same stored events as core/v1's, which the person may read: an impersonating cluster that does not
      // let the person list events.k8s.io (the built-in `view` of v1.20) leaves nothing out, so its 403 refuses nothing.
      if ('statusCode' in list && list.statusCode !== 403) return list;
      for (const event of 'items' in list ? list.items : []) {
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

  /** A shared watch is read with the service's own identity: every subscriber is authorized on its own. */
  private sharedSource(cluster: ClusterClient, path: string, labelSelector?: string, fieldSelector?: string) {
    return { cluster: this.gateway.asService(cluster.conn), path, labelSelector, fieldSelector };
  }

  /** On an impersonating cluster, what the cluster says of the person for each question (asked again on every re-check). */
  private clusterCheck(cluster: ClusterClient, questions: Parameters<ClusterAccessReview['check']>[1][]) {
    if (!cluster.identity) return undefined;
    return async (caller: Caller): Promise<string | null> => {
      const asCaller = this.gateway.asCaller(cluster.conn, caller);
      for (const question of questions) {
        const refused = await this.review.check(asCaller, question);
        if (refused) return refused;
      }
      return null;
    };
  }

  private async eventList(
    cluster: ClusterClient,
    path: string,
    fieldSelector: string,
  ): Promise<{ resourceVersion: string; items: Array<Record<string, any>> } | SettledAnswer> {
    const res = await cluster.send({ method: 'GET', path, query: new URLSearchParams({ fieldSelector }) });
    const body = await cluster.read(res);
    if (res.statusCode !== 200) return { statusCode: res.statusCode, contentType: contentTypeOf(res.headers), body };
    const list = cluster.parse(body, `GET ${path}`);
    return {
      resourceVersion: list?.metadata?.resourceVersion ?? '',
      items: Array.isArray(list?.items) ? list.items : [],
    };
  }

  async getResource(
    caller: Caller,
    target: ResourceTarget,
    q: GetResourceQueryDto,
    mediaType: string = JSON_TYPE,
  ): Promise<ClusterAnswer> {
    const r = await this.resolve(caller, target, 'get');
    const answer = await r.cluster.sendObject({ method: 'GET', path: r.path, query: query(q) });
    return mediaType === YAML_TYPE ? yamlAnswer(r.cluster, answer) : answer;
  }

  async createResource(caller: Caller, target: ResourceTarget, body: unknown, q: WriteResourceQueryDto) {
    assertOwnFieldManager(caller, q.fieldManager);
    const r = await this.resolve(caller, target, 'create');
    const object = this.withScope(r, objectBody(body));
    return r.cluster.sendObject({ method: 'POST', path: r.path, query: query(q), body: json(object) });
  }

  /** `diff`: a dry run (`dryRun=All`) answered with the diff of the object before and after, as apply shows it. */
  async replaceResource(
    caller: Caller,
    target: ResourceTarget,
    body: unknown,
    q: WriteResourceQueryDto,
    diff = false,
  ): Promise<ClusterAnswer> {
    assertOwnFieldManager(caller, q.fieldManager);
    const r = await this.resolve(caller, target, 'update');
    const object = this.withScope(r, objectBody(body));
    const metadata = object.metadata ?? {};
    const problems: string[] = [];
    if (metadata.name !== r.name) problems.push(`metadata.name must be '${r.name}', the name in the path`);
    if (typeof metadata.resourceVersion !== 'string' || metadata.resourceVersion === '') {
      problems.push('metadata.resourceVersion is required: send the resourceVersion of the object you read');
    }
    if (problems.length) throw new BadRequestException(problems);
    const call = { method: 'PUT', path: r.path, query: query(q), body: json(object) } as const;
    if (diff) return this.dryRunDiff(r, call, object);
    return r.cluster.sendObject(call);
  }

  /** `contentType`: the request's Content-Type, which names the patch kind when `patchType` does not. */
  async patchResource(
    caller: Caller,
    target: ResourceTarget,
    body: unknown,
    q: PatchResourceQueryDto,
    contentType: string | undefined,
    diff = false,
  ): Promise<ClusterAnswer> {
    patchContentType(q.patchType, contentType); // a bad patch kind is a 400 before any work
    const r = await this.resolve(caller, target, 'patch');
    const patch = await patchRequest(caller, body, q, contentType);
    const call = {
      method: 'PATCH',
      path: r.path,
      query: query(patch.query),
      body: patch.body,
      contentType: patch.contentType,
    } as const;
    if (diff) return this.dryRunDiff(r, call, body);
    return r.cluster.sendObject(call);
  }

  /**
   * A dry-run write (its query carries `dryRun=All`) answered as apply answers a document: the unified
   * diff of the object as read before (as the caller) and as the cluster would store it, by apply's own
   * diff code, so without the metadata every write rewrites and with a Secret's values hidden. A refusal
   * of the cluster passes through as its `Status`, a Secret's values (as sent in `sent`) scrubbed from it.
   */
  private async dryRunDiff(r: Resolved, call: ClusterCall, sent: unknown): Promise<ClusterAnswer> {
    const secret = r.type.group === '' && r.type.plural === 'secrets';
    let secrets: string[] = [];
    if (secret && Array.isArray(sent)) {
      // A JSON patch: each operation's value is (part of) the Secret.
      const values = sent.map((op: { value?: unknown }) => op?.value).filter((v) => typeof v === 'string');
      secrets = secretValuesOf({ data: { ...values } }, true);
    } else if (secret && sent && typeof sent === 'object') {
      // A full Secret is refused as apply refuses it (a patch may hold nulls, which delete keys).
      const problems = call.method === 'PUT' ? secretValueProblems(sent as Record<string, unknown>) : [];
      if (problems.length) throw new BadRequestException(problems);
      secrets = secretValuesOf(sent as Record<string, unknown>, true);
    }
    const settled = (statusCode: number, headers: Record<string, unknown>, body: Buffer): SettledAnswer => ({
      statusCode,
      contentType: contentTypeOf(headers),
      body: secrets.length ? scrubbedAnswer(body, secrets) : body,
    });
    const live = await r.cluster.send({ method: 'GET', path: r.path });
    const liveBody = await r.cluster.read(live);
    if (live.statusCode !== 200 && live.statusCode !== 404) return settled(live.statusCode, live.headers, liveBody);
    const before = live.statusCode === 200 ? r.cluster.parse(liveBody, `GET ${r.path}`) : null;
    const res = await r.cluster.send(call);
    const answer = await r.cluster.read(res);
    if (res.statusCode >= 300) return settled(res.statusCode, res.headers, answer);
    const after = r.cluster.parse(answer, `${call.method} ${r.path}`);
    const label = [r.namespace, resourceIdOf(r.type), r.name].filter(Boolean).join('/');
    const diff = await diffOf({ label, before, after, secret }, liveBody.length + answer.length);
    return { statusCode: 200, contentType: DIFF_TYPE, body: Buffer.from(diff, 'utf8') };
  }

  async deleteResource(caller: Caller, target: ResourceTarget, q: DeleteResourceQueryDto): Promise<ClusterAnswer> {
    const r = await this.resolve(caller, target, 'delete');
    const options = deleteOptions({
      force: q.force === true,
      cascade: q.cascade !== false,
      dryRun: q.dryRun === 'All',
    });
    const res = await r.cluster.send({ method: 'DELETE', path: r.path, body: json(options) });
    // The gateway's write hook has marked the deletion for read-your-writes.
    if (q.wait === false || q.dryRun === 'All' || res.statusCode >= 300) return res;

    const body = await r.cluster.read(res);
    const answer = { statusCode: 200, contentType: contentTypeOf(res.headers), body };
    const uid = r.cluster.parse(body, 'the delete')?.metadata?.uid as string | undefined;
    if (!uid) return answer; // a Status: the object is already gone
    await this.waitUntilGone(r, uid, (q.timeoutSeconds ?? DEFAULT_DELETE_WAIT_SECONDS) * 1000);
    // The deletion finished after its answer (finalizers, a foreground delete): the next page recounts once more.
    this.marks.note(r.cluster.name, resourceIdOf(r.type), undefined, true);
    return answer;
  }

  /** Polls the cluster itself (never a cache) until the object with this uid is gone; finalizers are left alone. */
  private async waitUntilGone(r: Resolved, uid: string, timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    for (let pause = 100; ; pause = Math.min(pause * 2, 500)) {
      const res = await r.cluster.send({ method: 'GET', path: r.path });
      const body = await r.cluster.read(res);
      if (res.statusCode === 404) return;
      if (res.statusCode === 200 && r.cluster.parse(body, 'a read')?.metadata?.uid !== uid) return; // replaced by a new one
      const left = deadline - Date.now();
      if (left <= 0) {
        throw new GatewayTimeoutException(
          `${r.type.plural} '${r.name}' was not gone after ${Math.round(timeoutMs / 1000)} s; it stays marked for deletion on ${r.cluster.target}`,
        );
      }
      await sleep(Math.min(pause, left));
    }
  }

  /**
   * Checks everything that can be checked before the cluster is asked: the caller's role, the
   * header, the path segments; then finds the cluster (as the caller), the resource type and the scope.
   */
  async resolve(caller: Caller, target: ResourceTarget, verb: Verb, partitioned = false): Promise<Resolved> {
    if (OWN_PATHS.has(target.resource)) {
      throw new NotFoundException(`no such route under /api/v1/${target.resource}/`);
    }
    const clusterName = clusterNameOf(target.cluster);
    const { plural, group } = parseResourceId(target.resource);
    validateNamespace(target.namespace);
    if (target.name !== undefined) validateName(target.name);
    const attempt = this.authorizer.mayAttempt(caller, verb, clusterName, {
      resource: target.resource,
      namespace: target.namespace === ALL_NAMESPACES ? null : target.namespace,
    });
    if (!attempt.allowed) throw new ForbiddenException(attempt.reason);

    const cluster = await this.gateway.clientFor(caller, clusterName);
    const type = await this.discovery.resolve(cluster.conn, plural, group);
    const id = resourceIdOf(type);
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
    // A paged `_all` query lists what the caller may list (lists/ decides), never a 403 for the rest.
    if (!(partitioned && namespace === null)) {
      this.authorizer.require(caller, { verb, cluster: cluster.name, resource: id, namespace });
    }
    const name = target.name ?? null;
    return { cluster, type, namespace, name, path: resourcePath(type, namespace, name) };
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
    return { apiVersion: apiVersionOf(r.type), kind: r.type.kind, ...object, metadata };
  }
}

/** The credential the caller presented, kept by a stream to check it again while it runs. */
function secretOf(request: FastifyRequest): string {
  return presentedSecret(request) ?? '';
}

function contentTypeOf(headers: Record<string, unknown>): string {
  return String(headers['content-type'] ?? 'application/json');
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

/** What a dry run answers with `Accept: text/x-diff`: apply's unified diff of the object. */
export const DIFF_MEDIA_TYPE = 'text/x-diff';
const DIFF_TYPE = `${DIFF_MEDIA_TYPE}; charset=utf-8`;

/** A cluster's refusal with a Secret's values scrubbed out (as apply scrubs them); an answer that is not JSON, as it came. */
function scrubbedAnswer(body: Buffer, secrets: string[]): Buffer {
  try {
    return json(scrub(JSON.parse(body.toString('utf8')), secrets));
  } catch {
    return body;
  }
}

function json(value: unknown): Buffer {
  return Buffer.from(JSON.stringify(value), 'utf8');
}
