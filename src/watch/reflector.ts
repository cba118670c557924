import { HttpException, Logger, ServiceUnavailableException } from '@nestjs/common';
import type { ClusterResponse } from '../clusters/gateway/answer.js';
import type { ClusterClient } from '../clusters/gateway/cluster-client.js';
import { type Labels, LineSplitter, revision, WatchEvent } from '../k8s/watch-events.js';

/** What the cluster answered instead of a list or a watch (its status and body, read whole). */
export interface ClusterRefusal {
  statusCode: number;
  contentType: string;
  body: Buffer;
}

/** The cluster refused the reflector's first list: its answer, for a route to pass on or to turn into an error. */
export class ReflectorRefusal extends Error {
  constructor(readonly refusal: ClusterRefusal) {
    super(`the cluster answered ${refusal.statusCode}`);
  }
}

/** Something that hangs off a reflector: a list cache, the shared watch of client streams. */
export interface ReflectorConsumer {
  /**
   * Whether it needs the collection's objects when it attaches (`objects`: a list cache), or only what comes after
   * (`none`: the shared watch, which replays the reflector's window of recent events).
   */
  readonly snapshot: 'objects' | 'none';
  /**
   * The collection as it was at `resourceVersion`: on attaching (`objects` consumers), and to every consumer whenever
   * the reflector had to list anew (a 410, a restart) — then anything known before is replaced, and changes between the
   * two may never be seen.
   */
  replaced(items: Array<Record<string, any>>, resourceVersion: string, relisted: boolean): void;
  /** One change after the snapshot (ADDED, MODIFIED, DELETED, with its object parsed once), or a BOOKMARK. */
  changed(event: WatchEvent, object: Record<string, any>): void;
  /** The watch is current (true) or not (false: broken, resuming, listing). */
  live?(live: boolean): void;
  /** The reflector has ended for good: every later use must start a new one. */
  stopped(failure?: HttpException): void;
}

/** Bytes of recent events every reflector of the process keeps together, and the bound on them. */
export interface WindowBudget {
  used: number;
  readonly limit: number;
}

export interface ReflectorOptions {
  /** The service's own identity: what a reflector serves is authorized per caller by its consumers. */
  cluster: ClusterClient;
  /** The collection, e.g. `/api/v1/configmaps` (all namespaces) or `/api/v1/namespaces/a/events`. */
  path: string;
  /** Part of what the cluster is asked for: the collection as the cluster selects it. */
  fieldSelector?: string;
  /** The cluster ends each watch after this long (plus up to a quarter more); it is then resumed at once. */
  upstreamTimeoutSeconds: number;
  /** Recent events kept, at most, for consumers arriving with an older resourceVersion. */
  windowEvents: number;
  budget: WindowBudget;
  /** Called once when the reflector ends (its last consumer left, or it failed for good). */
  onEnd: (reflector: Reflector) => void;
}

const LIST_PAGE = 250;
const LIST_PAGE_BYTES = 256 * 1024 * 1024;
const METADATA_LIST = 'application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1';
/** Consecutive failed reconnections before the reflector gives up (its consumers then get the last failure). */
const MAX_FAILURES = 5;
const REFUSAL_BODY_LIMIT = 1024 * 1024;
/** Changes held for a consumer while its snapshot is being listed; beyond this it is listed again. */
const MAX_HELD_EVENTS = 50_000;

interface Joining {
  consumer: ReflectorConsumer;
  held: Array<[WatchEvent, Record<string, any>]>;
  overflowed: boolean;
}

const asHttp = (error: unknown): HttpException =>
  error instanceof HttpException ? error : new ServiceUnavailableException(String((error as Error)?.message ?? error));

/**
 * One list-and-watch loop for one collection of one cluster (client-go's reflector): it lists, watches from the list's
 * resourceVersion, resumes from the last version seen when the cluster ends the watch (its time-out) or the connection
 * breaks, lists again after a 410, and gives up after repeated failures. Everything that needs the collection's state
 * hangs off it as a consumer, so a collection is watched once however many list caches and client streams read it.
 *
 * A consumer attaching to a running loop that needs the objects gets its own snapshot: a list of the collection exactly
 * at the loop's position (`resourceVersionMatch=Exact`), the changes since held for it meanwhile, so that the others
 * never see a gap or a relist on its account. For client watches arriving with an older resourceVersion it keeps a
 * bounded window of recent events (anything older than the window → 410, as the apiserver's own watch cache does),
 * each stamped with the object's labels before it (what a label selector matched until then). It keeps running while
 * it has consumers.
 */
export class Reflector {
  private readonly logger = new Logger(Reflector.name);
  private readonly consumers = new Set<ReflectorConsumer>();
  private readonly joining = new Set<Joining>();
  /** The latest resourceVersion the loop holds everything up to (list, events, bookmarks). */
  private rv = '';
  private heard = 0;
  private isLive = false;
  private endedFlag = false;
  private failures = 0;
  /** Bumped by every (re)list: a list or watch of an older one that is still under way is dropped. */
  private epoch = 0;
  private res?: ClusterResponse;
  private retryTimer?: NodeJS.Timeout;
  private listing = false;
  private readonly recent: WatchEvent[] = [];
  private recentBytes = 0;
  /** Every event with a resourceVersion after this one is in the window (or has not happened yet). */
  private windowFloor: bigint | null = null;
  /** The labels of the collection's objects (`namespace/name`) as of the last event; objects without labels are left out. */
  private labels = new Map<string, Labels>();
  /** Whether a first list has been delivered. */
  private started = false;
  /** Whether the next attempt must list (the start, a 410, a failed list); else it watches on from the last version. */
  private needsList = true;
  private failure?: HttpException;

  constructor(
    readonly key: string,
    readonly options: ReflectorOptions,
  ) {}

  get resourceVersion(): string {
    return this.rv;
  }

  /** When the loop last heard from the cluster (an event, a bookmark, a list that began then). */
  get heardAt(): number {
    return this.heard;
  }

  get live(): boolean {
    return this.isLive;
  }

  get ended(): boolean {
    return this.endedFlag;
  }

  get consumerCount(): number {
    return this.consumers.size + this.joining.size;
  }

  get cluster(): ClusterClient {
    return this.options.cluster;
  }

  /** Whether the loop has listed: its position, floor and window mean something. */
  get listed(): boolean {
    return this.started;
  }

  /** Every event with a resourceVersion after this one is in the window (null: versions are not comparable). */
  get floor(): bigint | null {
    return this.windowFloor;
  }

  /** The window of recent events, oldest first. */
  get window(): readonly WatchEvent[] {
    return this.recent;
  }

  /**
   * Adds a consumer; its snapshot follows (`replaced`), then every change. The first consumer starts the loop, listing
   * exactly at `from` when given (a client watch's resourceVersion; latest when the cluster no longer has it).
   * Resolves once the consumer has its snapshot; rejects when the cluster refuses the list (ReflectorRefusal) or cannot
   * be reached (502/504), and the consumer is then detached.
   */
  attach(consumer: ReflectorConsumer, from?: string): Promise<void> {
    if (this.endedFlag) return Promise.reject(this.failure ?? new ServiceUnavailableException('the watch ended'));
    const join: Joining = { consumer, held: [], overflowed: false };
    this.joining.add(join);
    const first = !this.started && !this.listing;
    if (!first && consumer.snapshot === 'none' && !this.listing) {
      this.joining.delete(join);
      this.consumers.add(consumer);
      return Promise.resolve();
    }
    const done = first ? this.relist(from) : this.snapshotFor(join);
    return done.catch((error: unknown) => {
      this.joining.delete(join);
      this.consumers.delete(consumer);
      if (this.consumerCount === 0) this.end(error instanceof ReflectorRefusal ? undefined : asHttp(error));
      throw error;
    });
  }

  /** Removes a consumer; the last one leaving ends the loop. */
  detach(consumer: ReflectorConsumer): void {
    this.consumers.delete(consumer);
    for (const join of this.joining) if (join.consumer === consumer) this.joining.delete(join);
    if (this.consumerCount === 0) this.end();
  }

  /** Drops the watch and lists again for every consumer (one found the loop disagreeing with the cluster). */
  restart(): void {
    if (this.endedFlag) return;
    this.stopWatch();
    this.relist().catch((error: unknown) => this.recover(error));
  }

  /** Ends the loop; every consumer is told why (nothing: its last consumer left). */
  end(failure?: HttpException): void {
    if (this.endedFlag) return;
    this.endedFlag = true;
    this.failure = failure;
    this.epoch++;
    clearTimeout(this.retryTimer);
    this.stopWatch();
    this.clearWindow();
    this.labels = new Map();
    const consumers = [...this.consumers, ...[...this.joining].map((j) => j.consumer)];
    this.consumers.clear();
    this.joining.clear();
    for (const consumer of consumers) consumer.stopped(failure);
    this.options.onEnd(this);
  }

  /** A list of the collection at the loop's position, for a consumer joining a running loop. */
  private async snapshotFor(join: Joining): Promise<void> {
    for (;;) {
      // A list under way (the first, or a relist) delivers to every consumer joining by then.
      while (this.listing || !this.started) {
        await new Promise<void>((resolve) => setTimeout(resolve, 20).unref());
        if (this.endedFlag) throw this.failure ?? new ServiceUnavailableException('the watch ended');
      }
      if (!this.joining.has(join)) return;
      if (join.consumer.snapshot === 'none') {
        this.joining.delete(join);
        this.consumers.add(join.consumer);
        return;
      }
      join.held = [];
      join.overflowed = false;
      let listed: { items: Array<Record<string, any>>; resourceVersion: string };
      try {
        listed = await this.list('objects', this.rv);
      } catch (error) {
        if (!(error instanceof ReflectorRefusal) || error.refusal.statusCode !== 410) throw error;
        // The cluster no longer has the loop's position: everyone lists anew, this consumer with them.
        if (this.joining.has(join) && !this.listing) this.restart();
        continue;
      }
      if (!this.joining.has(join)) return;
      if (join.overflowed) continue;
      this.joining.delete(join);
      this.consumers.add(join.consumer);
      join.consumer.replaced(listed.items, listed.resourceVersion, false);
      const from = revision(listed.resourceVersion);
      for (const [event, object] of join.held) {
        const rev = revision(event.resourceVersion);
        if (from === null || rev === null || rev > from) join.consumer.changed(event, object);
      }
      join.consumer.live?.(this.isLive);
      return;
    }
  }

  /** Lists the whole collection (one snapshot), hands it to every consumer, then watches from its version. */
  private async relist(exactly?: string): Promise<void> {
    this.needsList = true;
    this.setLive(false);
    const epoch = ++this.epoch;
    this.listing = true;
    const listedAt = Date.now();
    const kinds = new Set([...this.consumers, ...[...this.joining].map((j) => j.consumer)].map((c) => c.snapshot));
    let listed: { items: Array<Record<string, any>>; resourceVersion: string };
    try {
      try {
        listed = await this.list(kinds.has('objects') ? 'objects' : 'metadata', exactly);
      } catch (error) {
        // A client's version the cluster no longer has: the latest instead (that client then gets its 410 from the consumer).
        if (!exactly || !(error instanceof ReflectorRefusal) || error.refusal.statusCode !== 410) throw error;
        listed = await this.list(kinds.has('objects') ? 'objects' : 'metadata');
      }
    } finally {
      if (epoch === this.epoch) this.listing = false;
    }
    if (this.endedFlag || epoch !== this.epoch) return;
    this.needsList = false;
    const relisted = this.started;
    this.started = true;
    this.rv = listed.resourceVersion;
    // What happened before the list is no longer told: the window starts over, labels are the list's.
    this.clearWindow();
    this.windowFloor = revision(listed.resourceVersion);
    this.labels = new Map();
    for (const item of listed.items) {
      const m = item.metadata;
      if (m?.labels && Object.keys(m.labels).length > 0) this.labels.set(`${m.namespace ?? ''}/${m.name}`, m.labels);
    }
    this.heard = listedAt; // the list is the cluster as it was when it began
    this.failure = undefined;
    for (const join of [...this.joining]) {
      this.joining.delete(join);
      this.consumers.add(join.consumer);
    }
    for (const consumer of this.consumers) consumer.replaced(listed.items, listed.resourceVersion, relisted);
    await this.watch(epoch);
  }

  private async list(
    snapshot: 'objects' | 'metadata',
    exactly?: string,
  ): Promise<{ items: Array<Record<string, any>>; resourceVersion: string }> {
    const { cluster, path } = this.options;
    const items: Array<Record<string, any>> = [];
    let token: string | undefined;
    let rv: string;
    do {
      const query = new URLSearchParams({ limit: String(LIST_PAGE) });
      if (this.options.fieldSelector) query.set('fieldSelector', this.options.fieldSelector);
      if (token) query.set('continue', token);
      else if (exactly !== undefined && revision(exactly) !== null) {
        query.set('resourceVersion', exactly);
        query.set('resourceVersionMatch', 'Exact');
      }
      const res = await cluster.send({
        method: 'GET',
        path,
        query,
        accept: snapshot === 'metadata' ? METADATA_LIST : undefined,
      });
      if (res.statusCode !== 200) throw new ReflectorRefusal(await readRefusal(res));
      const body = await cluster.read(res, LIST_PAGE_BYTES);
      const page = cluster.parse(body, `GET ${path}`);
      rv = String(page?.metadata?.resourceVersion ?? '');
      for (const item of (page?.items ?? []) as Array<Record<string, any>>) items.push(item);
      token = page?.metadata?.continue || undefined;
    } while (token && !this.endedFlag);
    return { items, resourceVersion: rv };
  }

  /** Opens the watch from the loop's version; live once the cluster accepts it. */
  private async watch(epoch = this.epoch): Promise<void> {
    const { cluster, path, upstreamTimeoutSeconds } = this.options;
    // Spread, so that the watches of many collections do not all end and resume at the same moment.
    const timeoutSeconds = upstreamTimeoutSeconds + Math.floor((Math.random() * upstreamTimeoutSeconds) / 4);
    const query = new URLSearchParams({
      watch: 'true',
      resourceVersion: this.rv,
      allowWatchBookmarks: 'true',
      timeoutSeconds: String(timeoutSeconds),
    });
    if (this.options.fieldSelector) query.set('fieldSelector', this.options.fieldSelector);
    // The cluster ends the watch itself after timeoutSeconds (and sends bookmarks meanwhile): silence well beyond
    // that means the connection is dead.
    const res = await cluster.send({ method: 'GET', path, query, bodyTimeoutMs: (timeoutSeconds + 60) * 1000 });
    if (this.endedFlag || epoch !== this.epoch) {
      res.destroy();
      return;
    }
    if (res.statusCode === 410) {
      // The version is gone: list again, through the back-off, so that a cluster that keeps answering so is not asked
      // in a tight loop.
      res.destroy();
      this.needsList = true;
      throw new Error(`the cluster no longer has version ${this.rv}`);
    }
    if (res.statusCode !== 200) throw new ReflectorRefusal(await readRefusal(res));
    this.res = res;
    this.failures = 0;
    this.setLive(true);
    const splitter = new LineSplitter();
    res.on('data', (chunk: Buffer) => {
      if (this.res !== res) return;
      try {
        for (const line of splitter.push(chunk)) this.receive(line);
      } catch (error) {
        this.logger.warn(`${this.describe()}: unusable watch data: ${(error as Error).message}`);
        this.restart();
      }
    });
    let complete = false;
    const over = (error?: Error) => {
      if (this.res !== res) return;
      this.res = undefined;
      this.setLive(false);
      if (this.endedFlag) return;
      if (!error) return this.resume();
      this.logger.debug(`${this.describe()}: watch broke: ${error.message}`);
      this.recover(error);
    };
    res.on('end', () => {
      complete = true;
      over();
    });
    res.on('error', (error) => over(error));
    res.on('close', () => over(complete ? undefined : new Error('connection closed')));
  }

  private receive(line: Buffer): void {
    if (this.endedFlag) return;
    const { event, object } = WatchEvent.parseWithObject(line);
    if (event.type === 'ERROR') {
      // 410: the cluster no longer has the version: list again. Anything else: resume with back-off.
      if (event.status?.code === 410) this.restart();
      else {
        this.stopWatch();
        this.recover(new Error(event.status?.message ?? 'the cluster ended the watch with an error'));
      }
      return;
    }
    this.rv = event.resourceVersion;
    this.heard = Date.now();
    if (event.type !== 'BOOKMARK') this.remember(event);
    for (const consumer of this.consumers) consumer.changed(event, object);
    for (const join of this.joining) {
      if (join.held.length >= MAX_HELD_EVENTS) join.overflowed = true;
      else join.held.push([event, object]);
    }
  }

  /** The cluster ended the watch (its time-out): watch again from the loop's version at once; nothing was missed. */
  private resume(): void {
    this.watch().catch((error: unknown) => this.recover(error));
  }

  /**
   * After a broken watch or a failed list, with back-off: the watch resumes from the last version seen (nothing is
   * missed: the cluster replays what came after it, or answers 410 and the loop lists anew); a failed list is tried
   * again. After MAX_FAILURES the reflector ends: its consumers get the failure (502 naming the cluster); the next use
   * starts anew.
   */
  private recover(error: unknown): void {
    if (this.endedFlag) return;
    this.setLive(false);
    this.failures++;
    if (this.failures > MAX_FAILURES) {
      this.end(error instanceof ReflectorRefusal ? refusalException(this, error.refusal) : asHttp(error));
      return;
    }
    const delay = Math.min(250 * 2 ** (this.failures - 1), 4000);
    clearTimeout(this.retryTimer);
    this.retryTimer = setTimeout(
      () => (this.needsList ? this.relist() : this.watch()).catch((e: unknown) => this.recover(e)),
      delay,
    );
    this.retryTimer.unref();
  }

  /** Stamps the event with the object's labels before it, keeps its labels after it, and keeps it in the window. */
  private remember(event: WatchEvent): void {
    event.previousLabels = event.type === 'ADDED' ? null : (this.labels.get(event.key) ?? null);
    if (event.type === 'DELETED' || event.labels === null) this.labels.delete(event.key);
    else this.labels.set(event.key, event.labels);
    const { budget, windowEvents } = this.options;
    this.recent.push(event);
    this.recentBytes += event.size;
    budget.used += event.size;
    // Past the process's budget every loop gives up its oldest events: late subscribers from before them get 410
    // and list again, as from the apiserver's own watch cache.
    while (this.recent.length > windowEvents || (budget.used > budget.limit && this.recent.length > 0)) {
      const evicted = this.recent.shift()!;
      this.recentBytes -= evicted.size;
      budget.used -= evicted.size;
      this.windowFloor = revision(evicted.resourceVersion);
    }
  }

  private clearWindow(): void {
    this.options.budget.used -= this.recentBytes;
    this.recentBytes = 0;
    this.recent.length = 0;
  }

  private stopWatch(): void {
    const res = this.res;
    this.res = undefined;
    res?.destroy();
    this.setLive(false);
  }

  private setLive(live: boolean): void {
    if (this.isLive === live) return;
    this.isLive = live;
    for (const consumer of this.consumers) consumer.live?.(live);
  }

  describe(): string {
    return `watch of ${this.options.path} on ${this.options.cluster.target}`;
  }
}

/** A cluster's refusal as the error a consumer's callers get: 502 for the service's own credentials refused. */
export function refusalException(reflector: Reflector, refusal: ClusterRefusal): HttpException {
  let message = `${reflector.cluster.target} answered ${refusal.statusCode} to the list of ${reflector.options.path}`;
  try {
    const status = JSON.parse(refusal.body.toString('utf8'));
    if (typeof status?.message === 'string') message += `: ${status.message.slice(0, 300)}`;
  } catch {
    /* not a Status */
  }
  const code = refusal.statusCode;
  return new HttpException(message, code === 401 || code === 403 || code >= 500 ? 502 : code);
}

export async function readRefusal(res: ClusterResponse): Promise<ClusterRefusal> {
  const chunks: Buffer[] = [];
  let size = 0;
  try {
    for await (const chunk of res) {
      size += (chunk as Buffer).length;
      if (size > REFUSAL_BODY_LIMIT) break;
      chunks.push(chunk as Buffer);
    }
  } catch {
    /* what arrived is enough */
  }
  res.destroy();
  return {
    statusCode: res.statusCode,
    contentType: String(res.headers['content-type'] ?? 'application/json'),
    body: Buffer.concat(chunks),
  };
}
