import { BadRequestException, ForbiddenException, Injectable } from '@nestjs/common';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { Readable } from 'node:stream';
import { type AccessRequest, Authorizer } from '../access/authorizer.js';
import { ANY, coversName, coversResource, coversVerb } from '../access/rules.js';
import type { Caller } from '../auth/caller.js';
import { ClusterAccessReview } from '../clusters/gateway/access-review.js';
import type { ClusterClient } from '../clusters/gateway/cluster-client.js';
import { LabelSelectorError, matchesLabels, parseLabelSelector, type LabelSelector } from '../common/label-selector.js';
import { type ListResourcesQueryDto } from '../resources/dto/resource-query.dto.js';
import { apiVersionOf, resourceIdOf, type ResourceType } from '../resources/resource-path.js';
import type { OwnedStream, StreamOwner, StreamTicket } from '../streams/stream-owner.js';
import { statusObject } from '../watch/watch-events.js';
import type { WatchFormat } from '../watch/watch-stream.js';
import { FieldSelectorError, type FieldTerm, matchesFields, parseFieldSelector } from './field-selector.js';
import type { Entry, ListCache } from './list-cache.js';
import { ListCaches } from './list-caches.js';
import { WriteMarks } from './write-marks.js';

/** A list route's target after the resource routes resolved it (the cluster as the caller). */
export interface PageTarget {
  cluster: ClusterClient;
  type: ResourceType;
  /** null: `_all` (or a cluster-scoped type). */
  namespace: string | null;
}

/** One paged query, validated. */
export interface PageQuery {
  /** What decides the matches and their order (not the page): the key of the cache's memo. */
  key: string;
  page: number;
  size: number;
  sortBy: string;
  desc: boolean;
  search?: string;
  labels?: LabelSelector;
  fields: FieldTerm[];
}

export interface PageResult {
  total: number;
  items: Entry[];
  resourceVersion: string;
}

const DEFAULT_SIZE = 50;
/** Query parameters of the pass-through list that mean nothing to a page from the cache. */
const PASS_THROUGH_ONLY = [
  'limit',
  'continue',
  'resourceVersion',
  'resourceVersionMatch',
  'timeoutSeconds',
  'allowWatchBookmarks',
] as const;
/** How often a paged watch looks at its cache, and the least time between two CHANGED notices. */
const NOTICE_TICK_MS = 100;
const NOTICE_MIN_MS = 1_000;

/**
 * Paged, sorted, searched lists from the list caches (CONTRACT.md §13): what a caller may list (the
 * service's rules, and on an impersonating cluster the cluster's own answer for the person), the
 * freshness and read-your-writes waits, the page envelope, the `CHANGED` notices.
 */
@Injectable()
export class ListsService {
  constructor(
    private readonly caches: ListCaches,
    private readonly marks: WriteMarks,
    private readonly authorizer: Authorizer,
    private readonly review: ClusterAccessReview,
  ) {}

  /** The validated paged query, or a 400 naming what is wrong. */
  parse(q: ListResourcesQueryDto, type: ResourceType): PageQuery {
    const problems: string[] = [];
    for (const name of PASS_THROUGH_ONLY) {
      if (q[name] !== undefined)
        problems.push(`${name} cannot be used with a paged query (page, size, sortBy, sortOrder, search)`);
    }
    let labels: LabelSelector | undefined;
    let fields: FieldTerm[] = [];
    try {
      if (q.labelSelector) labels = parseLabelSelector(q.labelSelector);
    } catch (error) {
      if (!(error instanceof LabelSelectorError)) throw error;
      problems.push(`labelSelector: ${error.message}`);
    }
    try {
      if (q.fieldSelector) fields = parseFieldSelector(q.fieldSelector, resourceIdOf(type));
    } catch (error) {
      if (!(error instanceof FieldSelectorError)) throw error;
      problems.push(`fieldSelector: ${error.message}`);
    }
    if (problems.length) throw new BadRequestException(problems);
    const sortBy = q.sortBy ?? 'metadata.name';
    return {
      key: JSON.stringify([sortBy, q.sortOrder === 'desc', q.search?.toLowerCase(), q.labelSelector, q.fieldSelector]),
      page: q.page ?? 1,
      size: q.size ?? DEFAULT_SIZE,
      sortBy,
      desc: q.sortOrder === 'desc',
      search: q.search ? q.search.toLowerCase() : undefined,
      labels,
      fields,
    };
  }

  /** The page envelope, as JSON text (the stored items are JSON already). */
  async page(caller: Caller, target: PageTarget, query: PageQuery): Promise<string> {
    const { cache, allowed } = await this.prepare(caller, target);
    const result = this.run(cache, query, allowed);
    return this.envelope(target.type, query, result);
  }

  /** A paged query with `watch=true`: `{type: "CHANGED", total, resourceVersion}` at most once a second. */
  async watch(
    caller: Caller,
    target: PageTarget,
    query: PageQuery,
    client: NoticeClient,
    owner: StreamOwner,
  ): Promise<void> {
    const ticket = owner.admit(caller, 'watch');
    let prepared: Awaited<ReturnType<ListsService['prepare']>>;
    try {
      prepared = await this.prepare(caller, target);
    } catch (error) {
      ticket.release();
      throw error;
    }
    const { cache } = prepared;
    const cluster = target.cluster;
    const access: AccessRequest[] = [
      { verb: 'list', cluster: cluster.name, resource: resourceIdOf(target.type), namespace: target.namespace },
    ];
    // Namespace-scoped callers on `_all` are re-checked on what they could list when the stream began.
    const checkAccess = target.namespace === null && !this.authorizer.can(caller, access[0]).allowed ? [] : access;
    const stream = new NoticeStream(client, ticket, owner, caller, cluster, checkAccess, async (c) => {
      try {
        await this.allowedNamespaces(c, target, cache);
        return null;
      } catch (error) {
        return (error as Error).message;
      }
    });
    owner.own(stream, ticket);
    stream.begin();
    let seen = cache.version;
    let last = this.run(cache, query, prepared.allowed);
    let sentAt = 0;
    const tick = setInterval(() => {
      if (stream.closed) return clearInterval(tick);
      // An open stream uses its cache as a query does: it is not idle while a console listens.
      cache.usedAt = Date.now();
      if (cache.ended) {
        clearInterval(tick);
        return stream.end(
          502,
          'ServiceUnavailable',
          `the list cache of ${resourceIdOf(target.type)} on ${cluster.target} ended`,
        );
      }
      if (cache.version === seen || Date.now() - sentAt < NOTICE_MIN_MS) return;
      seen = cache.version;
      const now = this.run(cache, query, prepared.allowed);
      const changed =
        now.total !== last.total ||
        now.items.length !== last.items.length ||
        now.items.some((item, i) => item !== last.items[i]);
      last = now;
      if (!changed) return;
      sentAt = Date.now();
      stream.send({ type: 'CHANGED', total: now.total, resourceVersion: now.resourceVersion });
    }, NOTICE_TICK_MS);
    tick.unref();
    stream.onClose(() => clearInterval(tick));
  }

  /** The cache to answer from, caught up, and the namespaces the caller may see in it (null: all). */
  private async prepare(
    caller: Caller,
    target: PageTarget,
  ): Promise<{ cache: ListCache; allowed: Set<string> | null }> {
    const cache = this.caches.cacheFor(target.cluster.conn, target.type);
    const mark = this.marks.take(target.cluster.name, resourceIdOf(target.type));
    await cache.fresh(mark.rv, mark.recount);
    const allowed = await this.allowedNamespaces(caller, target, cache);
    return { cache, allowed };
  }

  /**
   * The namespaces whose objects the caller may list (null: every one). The route already required the
   * list permission for a named namespace; for `_all` a caller whose rules cover some namespaces sees
   * those. On an impersonating cluster the cluster must allow the person too (reviews cached 5 s).
   */
  async allowedNamespaces(caller: Caller, target: PageTarget, cache: ListCache): Promise<Set<string> | null> {
    const { cluster, type, namespace } = target;
    const id = resourceIdOf(type);
    const question = (ns: string | undefined) => ({
      verb: 'list',
      group: type.group,
      resource: type.plural,
      namespace: ns,
    });
    if (namespace !== null) {
      this.authorizer.require(caller, { verb: 'list', cluster: cluster.name, resource: id, namespace });
      const refused = await this.review.check(cluster, question(namespace));
      if (refused) throw new ForbiddenException(refused);
      return new Set([namespace]);
    }
    let byRules: Set<string> | null = null;
    if (!this.authorizer.can(caller, { verb: 'list', cluster: cluster.name, resource: id, namespace: null }).allowed) {
      if (!type.namespaced)
        this.authorizer.require(caller, { verb: 'list', cluster: cluster.name, resource: id, namespace: null });
      byRules = new Set(
        (caller.rules ?? [])
          .filter(
            (r) =>
              coversName(r.clusters, cluster.name) && coversVerb(r.verbs, 'list') && coversResource(r.resources, id),
          )
          .flatMap((r) => r.namespaces)
          .filter((ns) => ns !== ANY),
      );
      if (byRules.size === 0)
        this.authorizer.require(caller, { verb: 'list', cluster: cluster.name, resource: id, namespace: null });
    }
    if (!cluster.identity) return byRules;
    if (byRules === null && !(await this.review.check(cluster, question(undefined)))) return null;
    if (!type.namespaced) {
      const refused = await this.review.check(cluster, question(undefined));
      if (refused) throw new ForbiddenException(refused);
      return null;
    }
    const candidates = byRules ?? cache.namespaces();
    const allowed = new Set<string>();
    await Promise.all(
      [...candidates].map(async (ns) => {
        if (!(await this.review.check(cluster, question(ns)))) allowed.add(ns);
      }),
    );
    return allowed;
  }

  /**
   * The page: every match in the order asked (kept by the cache until it changes, so the next page of
   * the same query, or the same query of another caller with the same view, is a slice), then its slice.
   */
  run(cache: ListCache, query: PageQuery, allowed: Set<string> | null): PageResult {
    const start = (query.page - 1) * query.size;
    const end = start + query.size;
    const { search, labels, fields } = query;
    if (allowed === null && !search && !labels && fields.length === 0) {
      const ordered = cache.ordered(query.sortBy, query.desc);
      return { total: ordered.length, items: ordered.slice(start, end), resourceVersion: cache.resourceVersion };
    }
    const view = allowed === null ? '*' : [...allowed].sort().join(',');
    const matches = cache.memo(`${query.key}\0${view}`, () => {
      const found: Entry[] = [];
      for (const entry of cache.ordered(query.sortBy, query.desc)) {
        if (allowed !== null && !allowed.has(entry.namespace)) continue;
        if (search !== undefined && !entry.haystack.includes(search)) continue;
        if (labels && !matchesLabels(labels, entry.labels)) continue;
        if (fields.length && !matchesFields(fields, entry)) continue;
        found.push(entry);
      }
      return found;
    });
    return { total: matches.length, items: matches.slice(start, end), resourceVersion: cache.resourceVersion };
  }

  envelope(type: ResourceType, query: PageQuery, result: PageResult): string {
    const head = JSON.stringify({
      apiVersion: apiVersionOf(type),
      kind: `${type.kind}List`,
      metadata: { resourceVersion: result.resourceVersion },
    });
    const tail = `,"total":${result.total},"page":${query.page},"size":${query.size}}`;
    return `${head.slice(0, -1)},"items":[${result.items.map((e) => e.json).join(',')}]${tail}`;
  }
}

/** Who a paged watch streams to, and for how long (`timeoutSeconds`; absent: until the client leaves). */
export interface NoticeClient {
  request: FastifyRequest;
  reply: FastifyReply;
  format: WatchFormat;
  secret: string;
  timeoutSeconds?: number;
}

const CONTENT_TYPES: Record<WatchFormat, string> = {
  json: 'application/json',
  ndjson: 'application/x-ndjson',
  sse: 'text/event-stream; charset=utf-8',
};

/** The stream of `CHANGED` notices of one paged watch, owned (limits, re-checks, heartbeats, drain) by the StreamOwner. */
class NoticeStream implements OwnedStream {
  readonly kind = 'watch';
  readonly secret: string;
  readonly cluster;
  private readonly body = new Readable({ read: () => undefined });
  private closedFlag = false;
  private readonly closers: Array<() => void> = [];

  constructor(
    private readonly client: NoticeClient,
    private readonly ticket: StreamTicket,
    private readonly owner: StreamOwner,
    readonly caller: Caller,
    clusterClient: ClusterClient,
    readonly access: readonly AccessRequest[],
    readonly clusterCheck: (caller: Caller) => Promise<string | null>,
  ) {
    this.secret = client.secret;
    this.cluster = clusterClient.conn;
  }

  get closed(): boolean {
    return this.closedFlag;
  }

  begin(): void {
    const { reply, request } = this.client;
    const socket = request.raw.socket as { setTimeout?: (ms: number) => void } | undefined;
    if (typeof socket?.setTimeout === 'function') socket.setTimeout(0);
    reply.raw.once('close', () => this.finish());
    reply
      .status(200)
      .header('content-type', CONTENT_TYPES[this.client.format])
      .header('cache-control', 'no-cache, no-store')
      .header('x-accel-buffering', 'no');
    reply.raw.once('pipe', () => {
      if (typeof reply.raw.flushHeaders === 'function') reply.raw.flushHeaders();
    });
    void reply.send(this.body);
    if (this.client.timeoutSeconds !== undefined) {
      const timer = setTimeout(() => this.close(), this.client.timeoutSeconds * 1000);
      timer.unref();
      this.closers.push(() => clearTimeout(timer));
    }
  }

  /** Ends the stream cleanly (its time-out). */
  close(): void {
    if (this.closedFlag) return;
    this.body.push(null);
    this.finish();
  }

  onClose(fn: () => void): void {
    this.closers.push(fn);
  }

  send(event: Record<string, unknown>): void {
    if (this.closedFlag) return;
    const json = JSON.stringify(event);
    this.body.push(this.client.format === 'sse' ? `event: ${String(event.type)}\ndata: ${json}\n\n` : `${json}\n`);
  }

  heartbeat(): void {
    if (this.client.format === 'sse' && !this.closedFlag) this.body.push(': heartbeat\n\n');
  }

  end(code: number, reason: string, message: string): void {
    if (this.closedFlag) return;
    this.send({ type: 'ERROR', object: statusObject(code, reason, message) });
    this.body.push(null);
    this.finish();
  }

  private finish(): void {
    if (this.closedFlag) return;
    this.closedFlag = true;
    for (const fn of this.closers.splice(0)) fn();
    this.owner.release(this);
    this.ticket.release();
  }
}
