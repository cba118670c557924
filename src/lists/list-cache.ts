import { HttpException, Logger, ServiceUnavailableException } from '@nestjs/common';
import { type Reflector, type ReflectorConsumer, ReflectorRefusal, refusalException } from '../watch/reflector.js';
import { revision, type WatchEvent } from '../k8s/watch-events.js';
import { type Entry, type EntryType, own, toEntry } from './entries.js';
import { SortIndexes } from './sort-index.js';

export type { Entry } from './entries.js';

export interface CacheOptions {
  /** The list-and-watch loop of the collection across all namespaces (or cluster-scoped), e.g. `/api/v1/configmaps`. */
  reflector: Reflector;
  resourceId: string;
  apiVersion: string;
  kind: string;
  /** Called as the objects held and their bytes change (the registry's bounds). */
  onSize: (cache: ListCache, objects: number, bytes: number) => void;
  /** A list holding this much on its own is too large: why (its queries get it), or null. */
  tooLarge: (cache: ListCache, objects: number, bytes: number) => HttpException | null;
  /** Called once when the cache ends for good (its cluster went away, or it was dropped). */
  onEnd: (cache: ListCache) => void;
  /**
   * What is kept of each object, when not the object's JSON (the Helm release cache keeps a release's gzip and its
   * decoded revision instead of the Secret): its `bytes` are what the caches' byte bound counts.
   */
  toEntry?: (object: Record<string, any>, type: EntryType) => Entry;
}

const MAX_MEMOS = 16;
/** How long a query waits for a cache that is (re)listing or reconnecting before it is refused. */
const CATCH_UP_MS = 5_000;
/** A query is answered without a probe when the cache heard from its watch (or confirmed itself) this recently. */
const FRESH_MS = 1_000;

const asHttp = (error: unknown): HttpException =>
  error instanceof HttpException ? error : new ServiceUnavailableException(String((error as Error)?.message ?? error));

const key = (namespace: string, name: string) => (namespace ? `${namespace}/${name}` : name);

/**
 * The objects of one resource type on one cluster (all namespaces), a consumer of the collection's reflector (the one
 * list-and-watch loop, read with the service's own identity, which the shared watch of client streams of the same
 * collection shares): filled by its snapshot, kept current by its changes. What a caller may see of it is decided per
 * query. Pages are cut from sort indexes kept in order as events arrive.
 *
 * Freshness: the cache knows when it last heard from its watch. A query finding it silent for more
 * than a second confirms it against the cluster first (see `confirm`); a write made through this
 * replica is waited for by its resourceVersion (`waitFor`). While the loop relists (start, 410) or
 * reconnects, queries wait for it, and are refused rather than answered from it after CATCH_UP_MS.
 */
export class ListCache implements ReflectorConsumer {
  readonly snapshot = 'objects';
  private readonly logger = new Logger(ListCache.name);
  private entries = new Map<string, Entry>();
  private readonly namespaceNames = new Map<string, string>();
  private indexes = new SortIndexes();
  /** The latest resourceVersion the cache holds everything up to (list, events, bookmarks). */
  private rv = '';
  /** When a probe last confirmed the cache (besides what the loop heard). */
  private confirmedAt = 0;
  private isLive = false;
  private endedFlag = false;
  private failure?: HttpException;
  private waiters: Array<() => void> = [];
  private confirming?: Promise<void>;
  private keeper?: NodeJS.Timeout;
  private readonly memos = new Map<string, Entry[]>();
  private memoVersion = -1;
  /** UTF-8 bytes of the entries' JSON. */
  private held = 0;
  /** The version of the last change (an object added, modified or deleted; a list): what a paged watch starts after. */
  private changedAt = 0n;
  private readonly entryType: EntryType;
  /** Bumped on every change: the `CHANGED` notices and the memo compare it. */
  version = 0;
  usedAt = Date.now();
  readonly started: Promise<void>;

  constructor(readonly options: CacheOptions) {
    const { resourceId, apiVersion, kind } = options;
    this.entryType = { resourceId, apiVersion, kind, intern: (namespace) => this.intern(namespace) };
    this.started = options.reflector.attach(this).then(
      () => {
        if (this.endedFlag) throw this.behind();
        this.keepConfirmed();
      },
      (error: unknown) => {
        const failure =
          error instanceof ReflectorRefusal ? refusalException(options.reflector, error.refusal) : asHttp(error);
        this.end(failure);
        throw failure;
      },
    );
    this.started.catch(() => undefined);
  }

  private get reflector(): Reflector {
    return this.options.reflector;
  }

  /** When the cache last heard from the cluster: its loop's events and bookmarks, or a probe that confirmed it. */
  private get heardAt(): number {
    return Math.max(this.reflector.heardAt, this.confirmedAt);
  }

  get size(): number {
    return this.entries.size;
  }

  get resourceVersion(): string {
    return this.rv;
  }

  /** UTF-8 bytes of the stored objects' JSON. */
  get bytes(): number {
    return this.held;
  }

  /** Whether the cache holds a change made after `version` (a resourceVersion of the cluster). */
  changedAfter(version: bigint): boolean {
    return this.changedAt > version;
  }

  get ended(): boolean {
    return this.endedFlag;
  }

  get clusterName(): string {
    return this.reflector.cluster.name;
  }

  /** The entry of one object, if the cache holds it. */
  get(namespace: string, name: string): Entry | undefined {
    return this.entries.get(key(namespace, name));
  }

  /** Every stored entry, in no order (for `search`). */
  all(): IterableIterator<Entry> {
    return this.entries.values();
  }

  /** The namespaces that hold at least one object. */
  namespaces(): Set<string> {
    const found = new Set<string>();
    for (const entry of this.entries.values()) found.add(entry.namespace);
    return found;
  }

  /**
   * The matches of a query, computed once per version of the cache: a few recent queries are kept
   * (references to entries, 8 bytes each), and any change to the cache drops them all.
   */
  memo(key: string, compute: () => Entry[]): Entry[] {
    if (this.memoVersion !== this.version) {
      this.memos.clear();
      this.memoVersion = this.version;
    }
    let found = this.memos.get(key);
    if (!found) {
      found = compute();
      if (this.memos.size >= MAX_MEMOS) this.memos.delete(this.memos.keys().next().value!);
      this.memos.set(key, found);
    }
    return found;
  }

  /** Entries in the order asked (kept from then on); ties by namespace, then name. */
  ordered(path: string, desc: boolean): readonly Entry[] {
    return this.indexes.ordered(this.entries.values(), path, desc);
  }

  /**
   * Resolves when a query may be answered from the cache: it is live and heard from its watch within
   * the last second (else confirmed against the cluster), and it holds `atLeast` (a write's version).
   */
  async fresh(atLeast?: bigint, recount = false): Promise<void> {
    this.usedAt = Date.now();
    const deadline = Date.now() + CATCH_UP_MS;
    await this.started;
    if (!(await this.until(() => this.isLive, deadline))) throw this.behind();
    if (atLeast !== undefined) {
      if (!(await this.until(() => (revision(this.rv) ?? 0n) >= atLeast, deadline))) throw this.behind();
    }
    if (recount) {
      // A deletion through this replica: a probe made after it.
      await this.confirm(deadline);
      return;
    }
    const asked = Date.now();
    while (this.heardAt < asked - FRESH_MS) {
      this.confirming ??= this.confirm(deadline).finally(() => (this.confirming = undefined));
      await this.confirming;
    }
  }

  /**
   * While queries come, the cache confirms itself in the background whenever its watch has been silent
   * for half a second, so that a query seldom waits for a probe.
   */
  private keepConfirmed(): void {
    this.keeper ??= setInterval(() => {
      const now = Date.now();
      if (!this.isLive || this.confirming || now - this.usedAt > 5_000 || now - this.heardAt < FRESH_MS / 2) return;
      this.confirming = this.confirm(now + CATCH_UP_MS)
        .catch(() => undefined)
        .finally(() => (this.confirming = undefined));
    }, 100);
    this.keeper.unref();
  }

  /** Ends the cache for good: it leaves its loop; queries waiting for it are refused. */
  end(reason?: HttpException): void {
    if (this.endedFlag) return;
    this.endedFlag = true;
    this.failure ??= reason;
    this.isLive = false;
    clearInterval(this.keeper);
    this.reflector.detach(this);
    this.options.onSize(this, -this.entries.size, -this.held);
    this.held = 0;
    this.entries = new Map();
    this.indexes = new SortIndexes();
    this.wake();
    this.options.onEnd(this);
  }

  /**
   * The cache has been silent for more than a second: nothing changed, or its watch is stuck. A
   * `limit=1` list of the collection (a quorum read, cheap at any size) settles it: its version is no
   * older than any change made before it. If the cache already holds that version, it is current.
   * Otherwise (the cluster's versions count every type, so this one's seldom reaches it) the count
   * (`remainingItemCount` + 1) and the first object's version must agree with the cache: a create or
   * delete the watch has not delivered shows at once. If they do not agree within the catch-up time,
   * the watch is restarted with a fresh list. What this cannot see is a modification of another object
   * on a watch connection that is silently stuck; the cluster's own time-out (CAS_WATCH_UPSTREAM_TIMEOUT_SECONDS)
   * and the body time-out bound that.
   */
  private async confirm(deadline: number): Promise<void> {
    const asked = Date.now();
    const probe = await this.probe();
    const target = revision(probe.resourceVersion) ?? 0n;
    const agrees = () => {
      if ((revision(this.rv) ?? 0n) >= target) return true;
      if (probe.count !== undefined && this.entries.size !== probe.count) return false;
      if (!probe.first) return true;
      return this.entries.get(key(probe.first.namespace, probe.first.name))?.resourceVersion === probe.first.rv;
    };
    if (await this.until(agrees, deadline)) {
      this.confirmedAt = Math.max(this.confirmedAt, asked);
      return;
    }
    this.logger.warn(`${this.describe()} disagrees with the cluster; listing again`);
    this.isLive = false;
    this.reflector.restart();
    throw this.behind();
  }

  private async probe(): Promise<{
    resourceVersion: string;
    count: number | undefined;
    first?: { namespace: string; name: string; rv: string };
  }> {
    const { cluster } = this.reflector;
    const { path, fieldSelector } = this.reflector.options;
    const query = new URLSearchParams({ limit: '1' });
    if (fieldSelector) query.set('fieldSelector', fieldSelector);
    const res = await cluster.send({ method: 'GET', path, query });
    const body = await cluster.read(res);
    if (res.statusCode !== 200) {
      throw refusalException(this.reflector, { statusCode: res.statusCode, contentType: '', body });
    }
    const list = cluster.parse(body, `GET ${path}`);
    const item = list?.items?.[0];
    return {
      resourceVersion: String(list?.metadata?.resourceVersion ?? ''),
      // With a selector (the Helm view) the cluster counts nothing beyond the page: only the first object is compared.
      count:
        list?.metadata?.continue && list?.metadata?.remainingItemCount === undefined
          ? undefined
          : (list?.items?.length ?? 0) + Number(list?.metadata?.remainingItemCount ?? 0),
      first: item && {
        namespace: item.metadata?.namespace ?? '',
        name: item.metadata?.name,
        rv: item.metadata?.resourceVersion,
      },
    };
  }

  private behind(): HttpException {
    if (this.failure) return this.failure;
    return new ServiceUnavailableException(
      `the list cache of ${this.options.resourceId} on ${this.reflector.cluster.target} is catching up with the cluster; try again`,
    );
  }

  private async until(ok: () => boolean, deadline: number): Promise<boolean> {
    while (!ok()) {
      if (this.endedFlag) throw this.behind();
      const left = deadline - Date.now();
      if (left <= 0) return false;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, Math.min(left, 50));
        this.waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
    return true;
  }

  private wake(): void {
    for (const wake of this.waiters.splice(0)) wake();
  }

  /** The collection at `resourceVersion` (the loop's snapshot for this cache, or its list anew): swapped in whole. */
  replaced(items: Array<Record<string, any>>, resourceVersion: string): void {
    if (this.endedFlag) return;
    const fresh = new Map<string, Entry>();
    let bytes = 0;
    for (const item of items) {
      const entry = this.toEntry(item);
      const k = key(entry.namespace, entry.name);
      bytes += entry.bytes - (fresh.get(k)?.bytes ?? 0);
      fresh.set(k, entry);
    }
    const refusal = this.options.tooLarge(this, fresh.size, bytes);
    if (refusal) return this.end(refusal);
    const before = { objects: this.entries.size, bytes: this.held };
    this.entries = fresh;
    this.held = bytes;
    this.indexes = new SortIndexes();
    this.rv = resourceVersion;
    this.changedAt = revision(resourceVersion) ?? this.changedAt;
    this.version++;
    this.failure = undefined;
    // May end the cache (too large for the caches' bounds): its failure is then what queries get.
    this.options.onSize(this, fresh.size - before.objects, bytes - before.bytes);
    this.wake();
  }

  changed(event: WatchEvent, object: Record<string, any>): void {
    if (this.endedFlag) return;
    this.rv = event.resourceVersion;
    if (event.type !== 'BOOKMARK') this.changedAt = revision(this.rv) ?? this.changedAt;
    if (event.type === 'ADDED' || event.type === 'MODIFIED') this.put(this.toEntry(object), object);
    else if (event.type === 'DELETED') this.remove(key(object.metadata?.namespace ?? '', object.metadata?.name));
    this.wake();
  }

  live(live: boolean): void {
    this.isLive = live && !this.endedFlag;
    this.wake();
  }

  /** The loop ended for good (its cluster failed, or it was dropped): queries get why. */
  stopped(failure?: HttpException): void {
    this.end(failure);
  }

  private toEntry(object: Record<string, any>): Entry {
    return (this.options.toEntry ?? toEntry)(object, this.entryType);
  }

  /** One string per namespace name, however many objects it holds. */
  private intern(namespace: string): string {
    let kept = this.namespaceNames.get(namespace);
    if (kept === undefined) {
      kept = own(namespace);
      if (this.namespaceNames.size < 100_000) this.namespaceNames.set(namespace, kept);
    }
    return kept;
  }

  private put(entry: Entry, object: Record<string, any>): void {
    const k = key(entry.namespace, entry.name);
    const old = this.entries.get(k);
    if (old) this.indexes.remove(old);
    this.entries.set(k, entry);
    this.held += entry.bytes - (old?.bytes ?? 0);
    this.indexes.add(entry, object);
    this.version++;
    // Last: the bounds may end this very cache.
    this.options.onSize(this, old ? 0 : 1, entry.bytes - (old?.bytes ?? 0));
  }

  private remove(k: string): void {
    const old = this.entries.get(k);
    if (!old) return;
    this.indexes.remove(old);
    this.entries.delete(k);
    this.held -= old.bytes;
    this.version++;
    this.options.onSize(this, -1, -old.bytes);
  }

  private describe(): string {
    return `list cache of ${this.options.resourceId} on ${this.reflector.cluster.target}`;
  }
}
