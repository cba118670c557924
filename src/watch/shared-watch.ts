import type { HttpException } from '@nestjs/common';
import type { ClusterClient } from '../clusters/gateway/cluster-client.js';
import { type LabelSelector, matchesLabels } from '../k8s/label-selector.js';
import type { ClusterRefusal, Reflector, ReflectorConsumer } from './reflector.js';
import { expiredStatus, revision, statusObject, WatchEvent, type WatchEventType } from '../k8s/watch-events.js';

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

/**
 * The client streams of one collection (cluster, path, field selector), whatever their label selectors: a consumer of
 * the collection's reflector (the one list-and-watch loop, which a list cache of the same collection shares), fanning
 * its events out. A subscriber arriving with an older resourceVersion is served from the loop's window of recent
 * events (anything older → 410, as the apiserver's own watch cache does); an object relabelled into a subscriber's
 * selector is ADDED for it, out of it DELETED, by the labels the loop stamped on the event. When the loop had to list
 * anew (a 410 of the cluster's), subscribers get a 410 too and list again. It leaves the loop after a short linger
 * once its last subscriber has left.
 */
export class SharedWatch implements ReflectorConsumer {
  readonly snapshot = 'none';
  private readonly subscribers = new Set<WatchSubscriber>();
  private lingerTimer?: NodeJS.Timeout;
  private finalEvent?: WatchEvent;
  private endedFlag = false;
  /** The loop has listed: null; or the cluster's refusal; rejects (502/504) when unreachable. */
  readonly ready: Promise<WatchRefusal | null>;

  constructor(
    readonly key: string,
    private readonly reflector: Reflector,
    fromResourceVersion: string,
    private readonly lingerMs: number,
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
   * Adds a subscriber from `fromResourceVersion`: replays the loop's newer events, then live ones. A version older
   * than the window gets the 410 ERROR event (the client lists again).
   */
  attach(sub: WatchSubscriber, fromResourceVersion: string): void {
    if (this.endedFlag) {
      sub.close(this.finalEvent ?? WatchEvent.of('ERROR', statusObject(503, 'ServiceUnavailable', 'watch ended')));
      return;
    }
    const { floor, resourceVersion: last } = this.reflector;
    const from = revision(fromResourceVersion);
    const comparable = from !== null && floor !== null;
    if (comparable ? from < floor! : fromResourceVersion !== last) {
      sub.close(WatchEvent.of('ERROR', expiredStatus(fromResourceVersion, String(floor ?? last))));
      return;
    }
    sub.cursor = from;
    for (const event of this.reflector.window) this.offer(sub, event);
    this.subscribers.add(sub);
    clearTimeout(this.lingerTimer);
    this.lingerTimer = undefined;
  }

  detach(sub: WatchSubscriber): void {
    if (!this.subscribers.delete(sub) || this.subscribers.size > 0 || this.endedFlag) return;
    if (this.lingerMs === 0) return this.end();
    this.lingerTimer = setTimeout(() => this.end(), this.lingerMs);
    this.lingerTimer.unref();
  }

  /** Leaves the loop; subscribers get `final` (an ERROR event) if given, and their streams end. */
  end(final?: WatchEvent): void {
    if (this.endedFlag) return;
    this.endedFlag = true;
    this.finalEvent = final;
    clearTimeout(this.lingerTimer);
    this.closeAll(final);
    this.reflector.detach(this);
    this.onEnd(this);
  }

  /** After the loop listed anew, everyone lists again: what changed in between is unknown, as to the apiserver's clients. */
  replaced(_items: unknown, resourceVersion: string, relisted: boolean): void {
    if (relisted) this.closeAll(WatchEvent.of('ERROR', expiredStatus('', resourceVersion)));
  }

  changed(event: WatchEvent): void {
    if (this.endedFlag) return;
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
