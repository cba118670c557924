import type { HttpException } from '@nestjs/common';
import type { ClusterClient } from '../clusters/gateway/cluster-client.js';
import { type LabelSelector, matchesLabels } from '../common/label-selector.js';
import type { ClusterRefusal, Reflector, ReflectorConsumer } from './reflector.js';
import { expiredStatus, type Labels, revision, statusObject, WatchEvent, type WatchEventType } from './watch-events.js';

/** What the cluster answered instead of a watch stream (its status and body, read whole). */
export type WatchRefusal = ClusterRefusal;

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
}

/**
 * The events of one collection (cluster, path, field selector) for every client stream of it, whatever their label
 * selectors: one parse and one window per collection. It hangs off the collection's reflector (the one list-and-watch
 * loop, which a list cache of the same collection shares), which lists the collection's labels when it attaches. To
 * filter as the apiserver's watch cache does — an object relabelled into a selector is ADDED for it, out of it DELETED —
 * it follows each object's labels from that list through the events.
 * It keeps a bounded window of recent events so a subscriber arriving later with an older resourceVersion is served
 * from memory (anything older than the window → 410, as the apiserver's own watch cache does); when the loop had to
 * list anew (a 410 of the cluster's), its subscribers get a 410 too and list again. It leaves its loop after a short
 * linger once its last subscriber has left.
 */
export class SharedWatch implements ReflectorConsumer {
  readonly snapshot = 'metadata';
  private readonly subscribers = new Set<WatchSubscriber>();
  private readonly window: WatchEvent[] = [];
  /**
   * The labels of the collection's objects (`namespace/name`) as of the last event; objects without labels are left
   * out. Null until the first list is in.
   */
  private labels: Map<string, Labels> | null = null;
  private windowBytes = 0;
  /** Every event with a resourceVersion after this one is in the window (or has not happened yet). */
  private floor: bigint | null = null;
  /** The latest resourceVersion seen (list, events and bookmarks). */
  private last = '';
  private lingerTimer?: NodeJS.Timeout;
  private finalEvent?: WatchEvent;
  private endedFlag = false;
  /** The first list: null when it is in, the cluster's refusal otherwise; rejects (502/504) when unreachable. */
  readonly ready: Promise<WatchRefusal | null>;

  constructor(
    readonly key: string,
    private readonly reflector: Reflector,
    fromResourceVersion: string,
    private readonly options: SharedWatchOptions,
    private readonly onEnd: (watch: SharedWatch) => void,
  ) {
    this.ready = reflector.attach(this, fromResourceVersion).then(
      () => null,
      (error: unknown) => {
        this.end();
        const refusal = (error as { refusal?: WatchRefusal }).refusal;
        if (refusal) return refusal;
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

  /** Leaves the loop; subscribers get `final` (an ERROR event) if given, and their streams end. */
  end(final?: WatchEvent): void {
    if (this.endedFlag) return;
    this.endedFlag = true;
    this.finalEvent = final;
    clearTimeout(this.lingerTimer);
    this.clearWindow();
    this.closeAll(final);
    this.reflector.detach(this);
    this.onEnd(this);
  }

  /** The labels of every object at `resourceVersion`; after a relist, everyone lists again (changes were missed). */
  replaced(items: Array<Record<string, any>>, resourceVersion: string, relisted: boolean): void {
    const labels = new Map<string, Labels>();
    for (const item of items) {
      const m = item.metadata;
      if (m?.labels && Object.keys(m.labels).length > 0) labels.set(`${m.namespace ?? ''}/${m.name}`, m.labels);
    }
    this.labels = labels;
    if (relisted) {
      // The cluster no longer had the loop's version: what happened in between is unknown, as it is to the apiserver's
      // own clients, who get the same 410 and list again.
      this.clearWindow();
      this.closeAll(WatchEvent.of('ERROR', expiredStatus(this.last, resourceVersion)));
    }
    this.floor = revision(resourceVersion);
    this.last = resourceVersion;
  }

  changed(event: WatchEvent): void {
    if (this.endedFlag) return;
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

  /** The loop ended for good (its cluster failed, or it was dropped): subscribers are told why. */
  stopped(failure?: HttpException): void {
    if (this.endedFlag) return;
    const code = failure?.getStatus() ?? 503;
    this.end(
      WatchEvent.of(
        'ERROR',
        statusObject(code, code === 504 ? 'Timeout' : 'ServiceUnavailable', failure?.message ?? 'the watch ended'),
      ),
    );
  }

  private closeAll(final?: WatchEvent): void {
    const subscribers = [...this.subscribers];
    this.subscribers.clear();
    for (const sub of subscribers) sub.close(final);
  }

  private clearWindow(): void {
    this.options.budget.used -= this.windowBytes;
    this.windowBytes = 0;
    this.window.length = 0;
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

  /** Stamps the event with the object's labels before it, and keeps its labels after it. */
  private followLabels(event: WatchEvent): void {
    const { labels } = this;
    if (labels === null) return;
    event.previousLabels = event.type === 'ADDED' ? null : (labels.get(event.key) ?? null);
    if (event.type === 'DELETED' || event.labels === null) labels.delete(event.key);
    else labels.set(event.key, event.labels);
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

export type { WatchEventType };
