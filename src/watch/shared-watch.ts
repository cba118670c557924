import { Logger } from '@nestjs/common';
import type { ClusterResponse } from '../clusters/gateway/answer.js';
import type { ClusterClient } from '../clusters/gateway/cluster-client.js';
import { type LabelSelector, matchesLabels } from '../common/label-selector.js';
import {
  expiredStatus,
  type Labels,
  LineSplitter,
  revision,
  statusObject,
  WatchEvent,
  type WatchEventType,
} from './watch-events.js';

/** What the cluster answered instead of a watch stream (its status and body, read whole). */
export interface WatchRefusal {
  statusCode: number;
  contentType: string;
  body: Buffer;
}

/**
 * One upstream watch: the collection path (built by resources/ from discovery data) and its field
 * selector, read with the service's own identity (`ClusterGateway.asService`) because every subscriber
 * shares it; each subscriber is authorized on its own (the service's rules, and on an impersonating
 * cluster the cluster's answer for the person) and has its own label selector. `labelSelector` is the
 * client's, for its initial list; the shared watch itself never sends one.
 */
export interface WatchSource {
  cluster: ClusterClient;
  path: string;
  labelSelector?: string;
  fieldSelector?: string;
}

/** Someone receiving the events of a shared watch: one client stream. */
export interface WatchSubscriber {
  /** Events with a resourceVersion after this one are delivered (null: not comparable, deliver all). */
  cursor: bigint | null;
  /** Whether BOOKMARK events are wanted. */
  readonly bookmarks: boolean;
  /** Only objects whose labels this selects (absent: all), with ADDED/DELETED as they enter or leave it. */
  readonly selector?: LabelSelector;
  deliver(event: WatchEvent): void;
  /** The shared watch is over: deliver `final` (an ERROR event) if given, then end the stream. */
  close(final?: WatchEvent): void;
}

/** Bytes of recent events every shared watch of the process keeps together, and the bound on them. */
export interface WindowBudget {
  used: number;
  readonly limit: number;
}

export interface SharedWatchOptions {
  windowEvents: number;
  budget: WindowBudget;
  lingerMs: number;
  /** The cluster ends each upstream watch after this long (plus up to a quarter more); it is then resumed at once. */
  upstreamTimeoutSeconds: number;
}
/** Consecutive failed reconnections before subscribers are told the watch is lost. */
const MAX_RECONNECT_FAILURES = 5;
const REFUSAL_BODY_LIMIT = 1024 * 1024;
/** Objects per page of the metadata list that tells which labels the collection's objects have at the start. */
const LABELS_PAGE_SIZE = 500;
const LABELS_PAGE_BYTES = 32 * 1024 * 1024;
const METADATA_LIST = 'application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1';

/**
 * One upstream watch shared by every subscriber to the same (cluster, collection, field selector),
 * whatever their label selectors: one parse and one window per collection, however many selectors
 * (a watch per selector multiplied both). To filter as the apiserver's watch cache does — an object
 * relabelled into a selector is ADDED for it, out of it DELETED — it knows each object's labels: listed
 * (metadata only) at the version the watch starts from, then followed through the events.
 * It keeps a bounded window of recent events so a subscriber arriving later with an older
 * resourceVersion is served from memory (anything older than the window → 410, as the
 * apiserver's own watch cache does); it resumes from the last resourceVersion seen when the
 * cluster ends the watch (its time-out) or the connection breaks; and it closes after a short
 * linger once its last subscriber has left.
 */
export class SharedWatch {
  private readonly logger = new Logger(SharedWatch.name);
  private readonly subscribers = new Set<WatchSubscriber>();
  private readonly window: WatchEvent[] = [];
  /**
   * The labels of the collection's objects (`namespace/name`) as of the last event; objects without
   * labels are left out. Null when they could not be listed at the start (then an object not seen since
   * counts by its new labels only).
   */
  private labels: Map<string, Labels> | null = new Map();
  private windowBytes = 0;
  /** Every event with a resourceVersion after this one is in the window (or has not happened yet). */
  private floor: bigint | null;
  /** The latest resourceVersion seen (events and bookmarks): where a reconnection resumes. */
  private last: string;
  private res?: ClusterResponse;
  private lingerTimer?: NodeJS.Timeout;
  private retryTimer?: NodeJS.Timeout;
  private failures = 0;
  private finalEvent?: WatchEvent;
  private endedFlag = false;
  /** The first connection: null when streaming, the cluster's refusal otherwise; rejects (502/504) when unreachable. */
  readonly ready: Promise<WatchRefusal | null>;

  constructor(
    readonly key: string,
    private readonly source: WatchSource,
    fromResourceVersion: string,
    private readonly options: SharedWatchOptions,
    private readonly onEnd: (watch: SharedWatch) => void,
  ) {
    this.floor = revision(fromResourceVersion);
    this.last = fromResourceVersion;
    this.ready = this.listLabels(fromResourceVersion)
      .then((refusal) => refusal ?? this.connect(fromResourceVersion))
      .then(
        (refusal) => {
          if (refusal) this.end();
          return refusal;
        },
        (error: unknown) => {
          this.end();
          throw error;
        },
      );
    this.ready.catch(() => undefined);
  }

  get ended(): boolean {
    return this.endedFlag;
  }

  get subscriberCount(): number {
    return this.subscribers.size;
  }

  /**
   * Adds a subscriber from `fromResourceVersion`: replays the window's newer events, then live
   * ones. A version older than the window gets the 410 ERROR event (the client lists again).
   */
  attach(sub: WatchSubscriber, fromResourceVersion: string): void {
    if (this.endedFlag) {
      sub.close(this.finalEvent ?? WatchEvent.of('ERROR', statusObject(503, 'ServiceUnavailable', 'watch ended')));
      return;
    }
    const from = revision(fromResourceVersion);
    const comparable = from !== null && this.floor !== null;
    if (comparable ? from < this.floor! : fromResourceVersion !== this.last) {
      sub.close(WatchEvent.of('ERROR', expiredStatus(fromResourceVersion, String(this.floor ?? this.last))));
      return;
    }
    sub.cursor = from;
    for (const event of this.window) this.offer(sub, event);
    this.subscribers.add(sub);
    clearTimeout(this.lingerTimer);
    this.lingerTimer = undefined;
  }

  detach(sub: WatchSubscriber): void {
    if (!this.subscribers.delete(sub) || this.subscribers.size > 0 || this.endedFlag) return;
    if (this.options.lingerMs === 0) return this.end();
    this.lingerTimer = setTimeout(() => this.end(), this.options.lingerMs);
    this.lingerTimer.unref();
  }

  /** Ends the upstream watch; subscribers get `final` (an ERROR event) if given, and their streams end. */
  end(final?: WatchEvent): void {
    if (this.endedFlag) return;
    this.endedFlag = true;
    this.finalEvent = final;
    clearTimeout(this.lingerTimer);
    clearTimeout(this.retryTimer);
    this.res?.destroy();
    this.options.budget.used -= this.windowBytes;
    this.windowBytes = 0;
    this.window.length = 0;
    const subscribers = [...this.subscribers];
    this.subscribers.clear();
    for (const sub of subscribers) sub.close(final);
    this.onEnd(this);
  }

  private offer(sub: WatchSubscriber, event: WatchEvent): void {
    if (event.type === 'BOOKMARK' && !sub.bookmarks) {
      const rev = revision(event.resourceVersion);
      if (rev !== null && sub.cursor !== null && rev > sub.cursor) sub.cursor = rev;
      return;
    }
    const rev = revision(event.resourceVersion);
    if (rev !== null && sub.cursor !== null) {
      if (rev <= sub.cursor) return;
      sub.cursor = rev;
    }
    const selected = sub.selector ? selectedFor(sub.selector, event) : event;
    if (selected) sub.deliver(selected);
  }

  /**
   * The labels of every object as of `resourceVersion` (exactly: the watch starts there), from a
   * metadata-only list. The cluster's 410 for a version it no longer has is the watch's own answer;
   * any other failure leaves the labels unknown (filtering by new labels only), never the watch unstarted.
   */
  private async listLabels(resourceVersion: string): Promise<WatchRefusal | null> {
    if (revision(resourceVersion) === null) {
      this.labels = null;
      return null;
    }
    const labels = new Map<string, Labels>();
    const { cluster } = this.source;
    let token: string | undefined;
    try {
      do {
        const query = new URLSearchParams({ limit: String(LABELS_PAGE_SIZE) });
        if (token) query.set('continue', token);
        else {
          query.set('resourceVersion', resourceVersion);
          query.set('resourceVersionMatch', 'Exact');
        }
        if (this.source.fieldSelector) query.set('fieldSelector', this.source.fieldSelector);
        const res = await cluster.send({ method: 'GET', path: this.source.path, query, accept: METADATA_LIST });
        if (res.statusCode === 410) return readRefusal(res);
        const body = await cluster.read(res, LABELS_PAGE_BYTES);
        if (res.statusCode !== 200) throw new Error(`the cluster answered ${res.statusCode}`);
        const page = cluster.parse(body, 'the labels of a collection') as {
          metadata?: { continue?: string };
          items?: Array<{ metadata?: { namespace?: string; name?: string; labels?: Labels } }>;
        };
        for (const item of page.items ?? []) {
          const m = item.metadata;
          if (m?.labels && Object.keys(m.labels).length > 0) labels.set(`${m.namespace ?? ''}/${m.name}`, m.labels);
        }
        token = page.metadata?.continue || undefined;
      } while (token && !this.endedFlag);
      this.labels = labels;
    } catch (error) {
      this.logger.debug(`watch ${this.describe()}: labels not listed: ${describeError(error)}`);
      this.labels = null;
    }
    return null;
  }

  private async connect(fromResourceVersion: string): Promise<WatchRefusal | null> {
    // Spread, so that the watches of many lists do not all end and resume at the same moment.
    const timeoutSeconds =
      this.options.upstreamTimeoutSeconds + Math.floor((Math.random() * this.options.upstreamTimeoutSeconds) / 4);
    const query = new URLSearchParams({
      watch: 'true',
      resourceVersion: fromResourceVersion,
      allowWatchBookmarks: 'true',
      timeoutSeconds: String(timeoutSeconds),
    });
    if (this.source.fieldSelector) query.set('fieldSelector', this.source.fieldSelector);
    const res = await this.source.cluster.send({
      method: 'GET',
      path: this.source.path,
      query,
      // The cluster ends the watch itself after timeoutSeconds (and sends bookmarks meanwhile):
      // silence well beyond that means the connection is dead.
      bodyTimeoutMs: (timeoutSeconds + 60) * 1000,
    });
    if (this.endedFlag) {
      res.destroy();
      return null;
    }
    if (res.statusCode !== 200) return readRefusal(res);
    this.failures = 0;
    this.res = res;
    const splitter = new LineSplitter();
    res.on('data', (chunk: Buffer) => {
      if (this.res !== res) return;
      try {
        for (const line of splitter.push(chunk)) this.receive(WatchEvent.parse(line));
      } catch (error) {
        this.logger.warn(`watch ${this.describe()}: unusable data from the cluster: ${(error as Error).message}`);
        res.destroy();
      }
    });
    const over = (error?: Error) => {
      if (this.res !== res) return;
      this.res = undefined;
      if (this.endedFlag) return;
      if (error) this.logger.debug(`watch ${this.describe()} broke: ${error.message}`);
      this.reconnect(error ? 1 : 0);
    };
    let complete = false;
    res.on('end', () => {
      complete = true;
      over();
    });
    res.on('error', (error) => over(error));
    res.on('close', () => over(complete ? undefined : new Error('connection closed')));
    return null;
  }

  private receive(event: WatchEvent): void {
    if (this.endedFlag) return;
    if (event.type === 'ERROR') {
      // The cluster gave up on this watch (410 when the version is gone): every subscriber must list again.
      this.end(event);
      return;
    }
    this.last = event.resourceVersion;
    if (event.type !== 'BOOKMARK') {
      this.followLabels(event);
      const { budget } = this.options;
      this.window.push(event);
      this.windowBytes += event.size;
      budget.used += event.size;
      // Past the process's budget every watch gives up its oldest events: late subscribers from before
      // them get 410 and list again, as from the apiserver's own watch cache.
      while (this.window.length > this.options.windowEvents || (budget.used > budget.limit && this.window.length > 0)) {
        const evicted = this.window.shift()!;
        this.windowBytes -= evicted.size;
        budget.used -= evicted.size;
        this.floor = revision(evicted.resourceVersion);
      }
    }
    for (const sub of this.subscribers) this.offer(sub, event);
  }

  /** Stamps the event with the object's labels before it, and keeps its labels after it. */
  private followLabels(event: WatchEvent): void {
    const { labels } = this;
    if (labels === null) return;
    event.previousLabels = event.type === 'ADDED' ? null : (labels.get(event.key) ?? null);
    if (event.type === 'DELETED' || event.labels === null) labels.delete(event.key);
    else labels.set(event.key, event.labels);
  }

  /** Resumes from the last resourceVersion seen: at once after a clean end, with back-off after failures. */
  private reconnect(failed: number): void {
    this.failures = failed ? this.failures + 1 : 0;
    if (this.failures > MAX_RECONNECT_FAILURES) {
      this.end(this.lost(502, 'the watch on the cluster could not be resumed'));
      return;
    }
    const delay = this.failures === 0 ? 0 : Math.min(500 * 2 ** (this.failures - 1), 8000);
    this.retryTimer = setTimeout(() => {
      this.connect(this.last).then(
        (refusal) => {
          if (!refusal) return;
          const status = parseStatus(refusal);
          this.end(WatchEvent.of('ERROR', status));
        },
        (error: unknown) => {
          this.logger.debug(`watch ${this.describe()}: resuming failed: ${describeError(error)}`);
          if (!this.endedFlag) this.reconnect(1);
        },
      );
    }, delay);
    this.retryTimer.unref();
  }

  private lost(code: number, message: string): WatchEvent {
    return WatchEvent.of('ERROR', statusObject(code, 'ServiceUnavailable', message));
  }

  private describe(): string {
    return `${this.source.cluster.name}:${this.source.path}`;
  }
}

/**
 * What a subscriber with a label selector receives for an event, as the apiserver's watch cache decides:
 * by whether the object matched before (`previousLabels`; unknown: as it matches now) and matches now.
 */
function selectedFor(selector: LabelSelector, event: WatchEvent): WatchEvent | null {
  if (event.type === 'BOOKMARK' || event.type === 'ERROR') return event;
  if (event.type === 'ADDED') return matchesLabels(selector, event.labels ?? undefined) ? event : null;
  // A deleted object is matched as it was last stored: the event's object.
  if (event.type === 'DELETED') return matchesLabels(selector, event.labels ?? undefined) ? event : null;
  const now = matchesLabels(selector, event.labels ?? undefined);
  const before = event.previousLabels === undefined ? now : matchesLabels(selector, event.previousLabels ?? undefined);
  if (now) return before ? event : event.as('ADDED');
  return before ? event.as('DELETED') : null;
}

async function readRefusal(res: ClusterResponse): Promise<WatchRefusal> {
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

/** The cluster's Status in a refusal, or one built from its status code. */
export function parseStatus(refusal: WatchRefusal): Record<string, unknown> {
  try {
    const body = JSON.parse(refusal.body.toString('utf8'));
    if (body && body.kind === 'Status') return body;
  } catch {
    /* not JSON */
  }
  return statusObject(refusal.statusCode, 'Unknown', `the cluster answered ${refusal.statusCode}`);
}

function describeError(error: unknown): string {
  return (error as Error)?.message ?? String(error);
}

export type { WatchEventType };
