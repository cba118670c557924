import { BadRequestException, ForbiddenException, Injectable } from '@nestjs/common';
import { type AccessRequest, Authorizer } from '../access/authorizer.js';
import type { Caller } from '../access/caller.js';
import { ClusterAccessReview } from '../clusters/gateway/access-review.js';
import type { ClusterClient } from '../clusters/gateway/cluster-client.js';
import { ClusterGateway } from '../clusters/gateway/cluster-gateway.js';
import { LabelSelectorError, matchesLabels, parseLabelSelector, type LabelSelector } from '../k8s/label-selector.js';
import { apiVersionOf, resourceIdOf, type ResourceType } from '../k8s/resource-path.js';
import type { StreamOwner } from '../streams/stream-owner.js';
import { itemJson } from './entries.js';
import { FieldSelectorError, type FieldTerm, matchesFields, parseFieldSelector } from '../k8s/field-selector.js';
import type { Entry, ListCache } from './list-cache.js';
import { ListCaches } from './list-caches.js';
import { type NoticeClient, NoticeStream, noticesSince } from './notice-stream.js';
import { WriteMarks } from '../clusters/gateway/write-marks.js';

export type { NoticeClient } from './notice-stream.js';

/** A list route's target after the resource routes resolved it (the cluster as the caller). */
export interface PageTarget {
  cluster: ClusterClient;
  type: ResourceType;
  /** null: `_all` (or a cluster-scoped type). */
  namespace: string | null;
}

/** What a paged query reads of a list route's query (the resource routes' query DTO, validated). */
export interface PagedQueryInput {
  limit?: unknown;
  continue?: unknown;
  resourceVersionMatch?: unknown;
  allowWatchBookmarks?: unknown;
  resourceVersion?: unknown;
  timeoutSeconds?: unknown;
  watch?: boolean;
  labelSelector?: string;
  fieldSelector?: string;
  page?: number;
  size?: number;
  sortBy?: string;
  sortOrder?: 'asc' | 'desc';
  search?: string;
  showManagedFields?: boolean;
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
  /** `showManagedFields=true`: items with their `metadata.managedFields`. */
  managedFields: boolean;
}

export interface PageResult {
  total: number;
  items: Entry[];
  resourceVersion: string;
}

const DEFAULT_SIZE = 50;
/** Query parameters of the pass-through list that mean nothing to a page from the cache. */
const PASS_THROUGH_ONLY = ['limit', 'continue', 'resourceVersionMatch', 'allowWatchBookmarks'] as const;
/** Query parameters a paged query takes with `watch=true` only (the page's version; the stream's end). */
const WATCH_ONLY = ['resourceVersion', 'timeoutSeconds'] as const;
/** How often a paged watch looks at its cache, and the least time between two CHANGED notices. */
const NOTICE_TICK_MS = 100;
const NOTICE_MIN_MS = 1_000;

/**
 * Paged, sorted, searched lists from the list caches (docs/LISTS.md): what a caller may list (the
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
    private readonly gateway: ClusterGateway,
  ) {}

  /** The validated paged query, or a 400 naming what is wrong. */
  parse(q: PagedQueryInput, type: ResourceType): PageQuery {
    const problems: string[] = [];
    for (const name of PASS_THROUGH_ONLY) {
      if (q[name] !== undefined)
        problems.push(`${name} cannot be used with a paged query (page, size, sortBy, sortOrder, search)`);
    }
    for (const name of WATCH_ONLY) {
      if (q[name] !== undefined && q.watch !== true) problems.push(`${name} on a paged query needs watch=true`);
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
      managedFields: q.showManagedFields === true,
    };
  }

  /** The page envelope, as JSON text (the stored items are JSON already). */
  async page(caller: Caller, target: PageTarget, query: PageQuery): Promise<string> {
    const { cache, allowed } = await this.prepare(caller, target);
    const result = this.run(cache, query, allowed);
    return this.envelope(target.type, query, result);
  }

  /**
   * A paged query with `watch=true`: `{type: "CHANGED", total, resourceVersion}` at most once a second
   * while the result may have changed, and at once when the cache already holds a change made after the
   * page's version (`resourceVersion`, or SSE's `Last-Event-ID`). Every re-check of the stream works out
   * again what the caller may see (the service's rules, an impersonating cluster's answer): the notices
   * follow that view, and the stream ends once the query itself would be refused.
   */
  async watch(
    caller: Caller,
    target: PageTarget,
    query: PageQuery,
    client: NoticeClient,
    owner: StreamOwner,
  ): Promise<void> {
    const since = noticesSince(client);
    const ticket = owner.admit(caller, 'watch');
    let prepared: Awaited<ReturnType<ListsService['prepare']>>;
    try {
      prepared = await this.prepare(caller, target);
    } catch (error) {
      ticket.release();
      throw error;
    }
    const { cache } = prepared;
    let allowed = prepared.allowed;
    let seen = cache.version;
    const cluster = target.cluster;
    // `_all` follows the caller's view however it changes; a named namespace must stay listable.
    const access: AccessRequest[] =
      target.namespace === null
        ? []
        : [{ verb: 'list', cluster: cluster.name, resource: resourceIdOf(target.type), namespace: target.namespace }];
    const recheck = async (now: Caller): Promise<string | null> => {
      try {
        const asNow = { ...target, cluster: this.gateway.asCaller(cluster.conn, now) };
        const view = await this.allowedNamespaces(now, asNow, cache);
        if (!sameView(view, allowed)) {
          allowed = view;
          seen = -1; // the result is worked out again on the next tick
        }
        return null;
      } catch (error) {
        return (error as Error).message;
      }
    };
    const start = since === undefined ? cache.resourceVersion : String(since);
    const stream = new NoticeStream(client, ticket, owner, caller, cluster.conn, access, recheck, start);
    owner.own(stream, ticket);
    stream.begin();
    let last = this.run(cache, query, allowed);
    let sentAt = 0;
    if (since !== undefined && cache.changedAfter(since)) {
      sentAt = Date.now();
      stream.changed(last.total, last.resourceVersion);
    }
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
      const now = this.run(cache, query, allowed);
      const changed =
        now.total !== last.total ||
        now.items.length !== last.items.length ||
        now.items.some((item, i) => item !== last.items[i]);
      last = now;
      if (!changed) return;
      sentAt = Date.now();
      stream.changed(now.total, now.resourceVersion);
    }, NOTICE_TICK_MS);
    tick.unref();
    stream.onClose(() => clearInterval(tick));
  }

  /**
   * The cache to answer from, caught up, and the namespaces the caller may see in it (null: all). The
   * service's rules are asked first: a caller who may list none of it never starts a cache (which holds
   * every object of the type, Secrets included, read as the service).
   */
  private async prepare(
    caller: Caller,
    target: PageTarget,
  ): Promise<{ cache: ListCache; allowed: Set<string> | null }> {
    const scope = this.ruleScope(caller, target);
    const cache = this.caches.cacheFor(target.cluster.conn, target.type);
    const mark = this.marks.take(target.cluster.name, resourceIdOf(target.type));
    await cache.fresh(mark.rv, mark.recount);
    const allowed = await this.allowedNamespaces(caller, target, cache, scope);
    return { cache, allowed };
  }

  /**
   * The namespaces the service's rules let the caller list the target's type in (null: every one), or a
   * 403. A named namespace must be covered; for `_all` a caller whose rules cover some namespaces sees
   * those. Asked before any cache is used.
   */
  ruleScope(caller: Caller, target: PageTarget): Set<string> | null {
    const { cluster, type, namespace } = target;
    const id = resourceIdOf(type);
    const request = { verb: 'list' as const, cluster: cluster.name, resource: id, namespace };
    if (namespace !== null) {
      this.authorizer.require(caller, request);
      return new Set([namespace]);
    }
    const scope = this.authorizer.grantedNamespaces(caller, { verb: 'list', cluster: cluster.name, resource: id });
    if (scope === null) return null;
    if (!type.namespaced) this.authorizer.require(caller, request);
    if (scope.size === 0) this.authorizer.require(caller, request);
    return scope;
  }

  /**
   * The namespaces whose objects the caller may list (null: every one): the service's rules, and on an
   * impersonating cluster the cluster's answer for the person too (reviews cached 5 s).
   */
  async allowedNamespaces(
    caller: Caller,
    target: PageTarget,
    cache: ListCache,
    byRules = this.ruleScope(caller, target),
  ): Promise<Set<string> | null> {
    const { cluster, type, namespace } = target;
    const question = (ns: string | undefined) => ({
      verb: 'list',
      group: type.group,
      resource: type.plural,
      namespace: ns,
    });
    if (namespace !== null) {
      const refused = await this.review.check(cluster, question(namespace));
      if (refused) throw new ForbiddenException(refused);
      return byRules;
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
    const items = result.items.map((e) => itemJson(e, query.managedFields)).join(',');
    return `${head.slice(0, -1)},"items":[${items}]${tail}`;
  }
}

/** Whether two views (namespaces; null: all) are the same. */
function sameView(a: Set<string> | null, b: Set<string> | null): boolean {
  if (a === null || b === null) return a === b;
  return a.size === b.size && [...a].every((ns) => b.has(ns));
}
