/** Watch event types, as the cluster sends them. */
export type WatchEventType = 'ADDED' | 'MODIFIED' | 'DELETED' | 'BOOKMARK' | 'ERROR';
const TYPES: ReadonlySet<string> = new Set(['ADDED', 'MODIFIED', 'DELETED', 'BOOKMARK', 'ERROR']);

/** The longest event line accepted from a cluster (etcd caps objects at 1.5 MiB; JSON of one stays far below). */
export const MAX_EVENT_BYTES = 16 * 1024 * 1024;

/**
 * One watch event, parsed once per shared watch and sent to every subscriber as the same bytes:
 * `line` is the cluster's JSON exactly, newline-terminated; the SSE frame is built on first use.
 */
export class WatchEvent {
  private sseFrame?: Buffer;
  private retypedAs?: Partial<Record<'ADDED' | 'DELETED', WatchEvent>>;
  /**
   * The object's labels before this event, set by the shared watch that received it: what a
   * subscriber's label selector matched until now. Undefined when not known (then only the new labels count).
   */
  previousLabels?: Labels | null;

  constructor(
    readonly type: WatchEventType,
    /** `object.metadata.resourceVersion`; '' for ERROR events. */
    readonly resourceVersion: string,
    readonly line: Buffer,
    /** The Status of an ERROR event. */
    readonly status?: { code?: number; reason?: string; message?: string },
    /** `namespace/name` of the object (ADDED, MODIFIED, DELETED). */
    readonly key = '',
    /** `object.metadata.labels` (null when it has none). */
    readonly labels: Labels | null = null,
  ) {}

  /**
   * The same object as another event type, for a subscriber whose label selector the object entered
   * (ADDED) or left (DELETED), as the apiserver's watch cache reports it; built once, shared by every
   * such subscriber. The apiserver's DELETED then carries the object as it was before; this one carries
   * it as it is now (the service keeps labels of the objects, not the objects): only its identity counts.
   */
  as(type: 'ADDED' | 'DELETED'): WatchEvent {
    if (this.type === type) return this;
    this.retypedAs ??= {};
    let event = this.retypedAs[type];
    if (!event) {
      const prefix = `{"type":"${this.type}","object":`;
      const line =
        this.line.subarray(0, prefix.length).toString('latin1') === prefix
          ? Buffer.concat([Buffer.from(`{"type":"${type}","object":`), this.line.subarray(prefix.length)])
          : Buffer.from(JSON.stringify({ type, object: JSON.parse(this.line.toString('utf8')).object }) + '\n');
      event = new WatchEvent(type, this.resourceVersion, line, undefined, this.key, this.labels);
      this.retypedAs[type] = event;
    }
    return event;
  }

  get size(): number {
    return this.line.length;
  }

  /**
   * `event: <type>`, `id: <resourceVersion>` (not for ERROR, nor with `withId` false: the initial
   * objects of a stream, whose versions are no position to resume from), `data: <the event JSON>`.
   */
  sse(withId = true): Buffer {
    if (!withId) return this.frame(false);
    this.sseFrame ??= this.frame(this.type !== 'ERROR');
    return this.sseFrame;
  }

  private frame(withId: boolean): Buffer {
    return Buffer.concat([
      Buffer.from(`event: ${this.type}\n${withId ? `id: ${this.resourceVersion}\n` : ''}data: `),
      this.line.subarray(0, this.line.length - 1),
      Buffer.from('\n\n'),
    ]);
  }

  /** Parses one line of a cluster's watch stream; throws on anything that is not a watch event. */
  static parse(line: Buffer): WatchEvent {
    return WatchEvent.parseWithObject(line).event;
  }

  /** The event of one line and its object, parsed once: the object is for the reader's use, not kept by the event. */
  static parseWithObject(line: Buffer): { event: WatchEvent; object: Record<string, any> } {
    const value = JSON.parse(line.toString('utf8')) as { type?: unknown; object?: any };
    if (typeof value !== 'object' || value === null || typeof value.type !== 'string' || !TYPES.has(value.type)) {
      throw new Error('not a watch event');
    }
    const object = value.object;
    if (typeof object !== 'object' || object === null) throw new Error('watch event without an object');
    const type = value.type as WatchEventType;
    const terminated = line[line.length - 1] === 0x0a ? line : Buffer.concat([line, Buffer.from('\n')]);
    if (type === 'ERROR') {
      const status = {
        code: typeof object.code === 'number' ? object.code : undefined,
        reason: typeof object.reason === 'string' ? object.reason : undefined,
        message: typeof object.message === 'string' ? object.message : undefined,
      };
      return { event: new WatchEvent(type, '', terminated, status), object };
    }
    const metadata = object.metadata;
    const rv = metadata?.resourceVersion;
    if (typeof rv !== 'string' || rv === '') throw new Error('watch event without metadata.resourceVersion');
    if (type === 'BOOKMARK') return { event: new WatchEvent(type, rv, terminated), object };
    const event = new WatchEvent(type, rv, terminated, undefined, objectKey(metadata), labelsOf(metadata));
    return { event, object };
  }

  /** An event built by the service (an initial ADDED from a list, or an ERROR with a Status). */
  static of(type: WatchEventType, object: Record<string, unknown>): WatchEvent {
    const line = Buffer.from(JSON.stringify({ type, object }) + '\n');
    if (type === 'ERROR') return new WatchEvent(type, '', line, object as WatchEvent['status']);
    const rv = (object.metadata as { resourceVersion?: unknown } | undefined)?.resourceVersion;
    return new WatchEvent(type, typeof rv === 'string' ? rv : '', line);
  }
}

/** An object's labels: label name to value. */
export type Labels = Readonly<Record<string, string>>;

function objectKey(metadata: { namespace?: unknown; name?: unknown }): string {
  return `${typeof metadata.namespace === 'string' ? metadata.namespace : ''}/${String(metadata.name ?? '')}`;
}

function labelsOf(metadata: { labels?: unknown }): Labels | null {
  const labels = metadata.labels;
  return typeof labels === 'object' && labels !== null && Object.keys(labels).length > 0 ? (labels as Labels) : null;
}

/** A Kubernetes `Status`, as the cluster itself would put it in an ERROR event. */
export function statusObject(code: number, reason: string, message: string): Record<string, unknown> {
  return { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message, reason, code };
}

/** The cluster's own answer to a watch from a resourceVersion it no longer has. */
export function expiredStatus(resourceVersion: string, oldest: string): Record<string, unknown> {
  return statusObject(410, 'Expired', `too old resource version: ${resourceVersion} (${oldest})`);
}

/**
 * resourceVersions are opaque to clients, but every cluster this service talks to stores in etcd,
 * whose revisions are increasing integers; the apiserver's own watch cache compares them the same
 * way. Anything else is not comparable (null).
 */
export function revision(resourceVersion: string | undefined): bigint | null {
  if (resourceVersion === undefined || !/^\d{1,20}$/.test(resourceVersion)) return null;
  return BigInt(resourceVersion);
}

/**
 * Splits a byte stream into newline-terminated lines without copying more than needed; a line
 * longer than `maxBytes` is an error (the stream is then abandoned), so memory stays bounded.
 */
export class LineSplitter {
  private pending: Buffer[] = [];
  private pendingBytes = 0;

  constructor(private readonly maxBytes = MAX_EVENT_BYTES) {}

  /** The complete lines in this chunk (each with its newline); empty lines are skipped. */
  push(chunk: Buffer): Buffer[] {
    const lines: Buffer[] = [];
    let start = 0;
    for (let nl = chunk.indexOf(0x0a); nl >= 0; nl = chunk.indexOf(0x0a, start)) {
      // A copy, so that an event kept in a window does not pin the whole chunk it arrived in.
      let line = Buffer.from(chunk.subarray(start, nl + 1));
      if (this.pendingBytes > 0) {
        line = Buffer.concat([...this.pending, line]);
        this.pending = [];
        this.pendingBytes = 0;
      }
      if (line.length > this.maxBytes) throw new Error(`a watch event is larger than ${this.maxBytes} bytes`);
      if (line.length > 1 && !(line.length === 2 && line[0] === 0x0d)) lines.push(line);
      start = nl + 1;
    }
    if (start < chunk.length) {
      const rest = chunk.subarray(start);
      this.pendingBytes += rest.length;
      if (this.pendingBytes > this.maxBytes) throw new Error(`a watch event is larger than ${this.maxBytes} bytes`);
      this.pending.push(rest);
    }
    return lines;
  }
}
