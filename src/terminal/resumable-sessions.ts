import {
  BadRequestException,
  ForbiddenException,
  GoneException,
  Inject,
  Injectable,
  type OnModuleDestroy,
} from '@nestjs/common';
import { randomBytes } from 'node:crypto';
import { WebSocket } from 'ws';
import type { Caller } from '../access/caller.js';
import { APP_CONFIG, type AppConfig } from '../config/config.js';
import { Replicas } from '../database/replicas.js';
import { channelMessage, channelOf, ERROR, isBase64, STDERR, STDOUT } from './terminal-protocol.js';
import type { TerminalTarget } from './terminal-request.js';
import {
  type ClientFrame,
  COMMAND_ENDED,
  type SessionEnd,
  type SessionKeeper,
  type TerminalSession,
} from './terminal-session.js';

/**
 * Consecutive output messages of one channel are copied into chunks of up to this size, so that each
 * typed key's echo does not cost a buffer of its own.
 */
const CHUNK_BYTES = 16 * 1024;
/**
 * What a chunk costs besides its bytes, counted against the ring's bound: output alternating between
 * stdout and stderr byte by byte makes a chunk per byte, and would otherwise hold far more than the bound.
 */
const CHUNK_COST = 128;
/** A session id: the holding replica's id (Replicas), a dot, and 18 random bytes, all in base64url. */
const SESSION_ID = /^[A-Za-z0-9_-]{8}\.[A-Za-z0-9_-]{24}$/;
/** Ended sessions remembered (to answer 410 naming why, or 403 to another user) and for how long. */
const GONE_MAX = 10_000;
const GONE_MS = 10 * 60_000;

interface Chunk {
  channel: number;
  data: Buffer;
  start: number;
  end: number;
}

/**
 * The latest output of a session (channels 1 and 2, in the order it came), at most `limit` bytes with
 * what its chunks cost. Offsets count output bytes from the session's start, as the client counts them:
 * the payloads after the channel byte, decoded on the base64 protocols.
 */
export class OutputRing {
  private chunks: Chunk[] = [];
  /** The index of the oldest chunk kept. */
  private first = 0;
  /** Output bytes held. */
  private held = 0;
  /** Output bytes ever pushed. */
  private written = 0;

  constructor(readonly limit: number) {}

  /** The offset just past the latest output. */
  get end(): number {
    return this.written;
  }

  /** The oldest offset still held. */
  get start(): number {
    return this.written - this.held;
  }

  push(channel: number, payload: Buffer): void {
    if (payload.length === 0) return;
    this.written += payload.length;
    const last = this.chunks.length > this.first ? this.chunks[this.chunks.length - 1] : undefined;
    if (last && last.channel === channel && last.end + payload.length <= CHUNK_BYTES) {
      if (last.end + payload.length > last.data.length) {
        // Grown by doubling, so that many small messages are not copied again each time.
        const grown = alloc(Math.min(CHUNK_BYTES, Math.max(last.end + payload.length, last.data.length * 2)));
        last.data.copy(grown, 0, 0, last.end);
        last.data = grown;
      }
      payload.copy(last.data, last.end);
      last.end += payload.length;
      this.held += payload.length;
    } else {
      if (last) seal(last);
      // Of a message longer than the whole ring only its tail can ever be asked for.
      const tail = payload.length > this.limit ? payload.subarray(payload.length - this.limit) : payload;
      const data = alloc(tail.length);
      tail.copy(data);
      this.chunks.push({ channel, data, start: 0, end: tail.length });
      this.held += tail.length;
    }
    this.trim();
  }

  /** The output from `offset` (start ≤ offset ≤ end) to the end, as (channel, bytes) in order. */
  since(offset: number): Array<{ channel: number; payload: Buffer }> {
    const out: Array<{ channel: number; payload: Buffer }> = [];
    let at = this.start;
    for (let i = this.first; i < this.chunks.length; i++) {
      const { channel, data, start, end } = this.chunks[i];
      const next = at + end - start;
      if (next > offset) out.push({ channel, payload: data.subarray(start + Math.max(0, offset - at), end) });
      at = next;
    }
    return out;
  }

  /** Bytes held, chunk costs included (what the bound applies to). */
  get cost(): number {
    return this.held + (this.chunks.length - this.first) * CHUNK_COST;
  }

  private trim(): void {
    while (this.cost > this.limit && this.first < this.chunks.length) {
      const oldest = this.chunks[this.first];
      const size = oldest.end - oldest.start;
      const over = this.cost - this.limit;
      if (size <= over) {
        this.first++;
        this.held -= size;
      } else {
        oldest.start += over;
        this.held -= over;
        // A large message's dropped part is given back once it is most of it.
        if (oldest.start > CHUNK_BYTES && oldest.start * 2 > oldest.data.length) seal(oldest);
      }
    }
    if (this.first > 64 && this.first * 2 > this.chunks.length) {
      this.chunks = this.chunks.slice(this.first);
      this.first = 0;
    }
  }
}

/** A buffer of its own: a small one must not keep one of Node's shared 8 KiB pool slabs alive. */
function alloc(size: number): Buffer {
  return Buffer.allocUnsafeSlow(size);
}

/** A chunk gives back the room it does not use: room no more output will be copied into, or output dropped. */
function seal(chunk: Chunk): void {
  if (chunk.data.length - (chunk.end - chunk.start) < 1024) return;
  const exact = alloc(chunk.end - chunk.start);
  chunk.data.copy(exact, 0, chunk.start, chunk.end);
  chunk.data = exact;
  chunk.start = 0;
  chunk.end = exact.length;
}

/** Why the output after `offset` cannot be sent again (an HTTP status and a message), or undefined when it can. */
export function offsetProblem(
  ring: Pick<OutputRing, 'start' | 'end' | 'limit'>,
  offset: number,
  id: string,
): { status: 400 | 410; message: string } | undefined {
  if (offset > ring.end) {
    return {
      status: 400,
      message: `offset ${offset} is past the output of session '${id}' (${ring.end} bytes so far): count the bytes received on channels 1 and 2`,
    };
  }
  if (offset < ring.start) {
    return {
      status: 410,
      message:
        `offset ${offset} of session '${id}' is older than the output kept (from byte ${ring.start}; ` +
        `CAS_SESSION_RESUME_BYTES is ${ring.limit}): the output between is lost; open a new session`,
    };
  }
  return undefined;
}

/** What the query asks of resumption: a resumable session, or the resumption of one. */
export type ResumeRequest = { open: true } | { id: string; offset: number };

function bad(message: string): never {
  throw new BadRequestException([message]);
}

/**
 * Takes `resumable`, `resume` and `offset` out of a REST upgrade's query (so that the rest is the
 * terminal's own query, sent to the cluster), checked: 400 naming what is wrong.
 */
export function takeResumeQuery(url: URL): ResumeRequest | undefined {
  const query = url.searchParams;
  const one = (name: string): string | undefined => {
    const all = query.getAll(name);
    query.delete(name);
    if (all.length > 1) bad(`${name} may be given once`);
    return all[0];
  };
  const resumable = one('resumable');
  const id = one('resume');
  const offset = one('offset');
  if (resumable === undefined && id === undefined && offset === undefined) return undefined;
  if (url.pathname.endsWith('/portforward')) {
    bad('port-forward sessions are not resumable: resumable, resume and offset are for exec and attach');
  }
  if (id !== undefined) {
    if (resumable !== undefined) bad('resume=<id> takes the place of resumable=true: send one of them');
    if (!SESSION_ID.test(id)) bad('resume must be the session id the first message of a resumable session gave');
    if (offset === undefined || !/^\d{1,15}$/.test(offset)) {
      bad('offset is required with resume: the bytes of output received on channels 1 and 2 together (an integer)');
    }
    return { id, offset: Number(offset) };
  }
  if (offset !== undefined) bad('offset is given only with resume=<session id>');
  if (!['true', '1', 'false', '0'].includes(resumable!)) bad('resumable must be true or false');
  return resumable === 'true' || resumable === '1' ? { open: true } : undefined;
}

/** A session's route and query as a resumption must repeat them (the query's order aside). */
function routeOf(target: TerminalTarget): string {
  const query = new URLSearchParams(target.query);
  query.sort();
  return `${target.kind} ${target.cluster}/${target.namespace}/${target.pod}?${query.toString()}`;
}

/**
 * A resumable session as the registry holds it: its output ring, the clock of its resume window while
 * no client is attached, and — when the cluster ended it while the client was away — how it ended, kept
 * for the rest of the window so that the client still gets the last output and the exit status.
 */
class HeldSession implements SessionKeeper {
  readonly ring: OutputRing;
  readonly base64: boolean;
  session?: TerminalSession;
  resumed = 0;
  attached = true;
  /** The window ran out with no client: the end row says so. */
  expired = false;
  /** The cluster's last error-channel message (a v4 exit status), for a client that comes back after the end. */
  status?: ClientFrame;
  /** Set when the session ended while its client was away: how the client's socket is to be closed. */
  final?: { code: number; reason: string };
  timer?: NodeJS.Timeout;

  constructor(
    readonly id: string,
    readonly userId: number | null,
    readonly route: string,
    readonly protocol: string,
    private readonly upstream: WebSocket,
    private readonly registry: ResumableSessions,
    limit: number,
  ) {
    this.ring = new OutputRing(limit);
    this.base64 = isBase64(protocol);
  }

  fromCluster(data: Buffer): void {
    const message = channelOf(data, this.base64);
    if (!message) return;
    if (message.channel === STDOUT || message.channel === STDERR) this.ring.push(message.channel, message.payload);
    else if (message.channel === ERROR) {
      this.status = this.base64
        ? { data: data.toString('utf8'), binary: false }
        : { data: Buffer.from(data), binary: true };
    }
  }

  clientDropped(): boolean {
    this.attached = false;
    this.registry.startWindow(this);
    return true;
  }

  /** For the end row: the session was resumable, and how often it was resumed. */
  ended(end: SessionEnd): Record<string, unknown> {
    // The cluster ended it (its socket is closing) rather than the service (which closes it after this).
    const byCluster = this.upstream.readyState !== WebSocket.OPEN;
    this.registry.ended(this, end, byCluster);
    return { resumable: true, resumed: this.resumed, ...(this.expired ? { expired: true } : {}) };
  }

  /** The output after `offset` in the session's framing. */
  replay(offset: number): ClientFrame[] {
    return this.ring.since(offset).map(({ channel, payload }) => channelMessage(channel, payload, this.base64));
  }
}

/**
 * Resumable terminal sessions of this replica (docs/TERMINAL.md, Resuming a session): a client that asked
 * for `resumable=true` gets an id; when its socket drops (anything but a normal close), the session and
 * its cluster side stay open for CAS_SESSION_RESUME_SECONDS, keeping its latest CAS_SESSION_RESUME_BYTES
 * of output, and the same person may attach a new socket with the offset it had reached. A held session
 * keeps its slot in the stream owner and is re-checked by it like any other.
 */
@Injectable()
export class ResumableSessions implements OnModuleDestroy {
  private readonly held = new Map<string, HeldSession>();
  /** Sessions ended while their client was away, whose output is still held: at most CAS_EXEC_MAX_SESSIONS. */
  private finished = 0;
  private readonly gone = new Map<string, { userId: number | null; why: string; at: number }>();

  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly replicas: Replicas,
  ) {}

  /** A session that asked for `resumable=true`: its id is the client's first message (text). */
  keep(client: WebSocket, o: { caller: Caller; target: TerminalTarget; protocol: string; upstream: WebSocket }) {
    const id = `${this.replicas.id}.${randomBytes(18).toString('base64url')}`;
    const held = new HeldSession(
      id,
      o.caller.userId,
      routeOf(o.target),
      o.protocol,
      o.upstream,
      this,
      this.config.exec.resumeBytes,
    );
    this.held.set(id, held);
    client.send(JSON.stringify({ session: id, resumeSeconds: this.config.exec.resumeMs / 1000 }));
    return {
      keeper: held as SessionKeeper,
      bind: (session: TerminalSession) => (held.session = session),
      ended: (end: SessionEnd) => held.ended(end),
    };
  }

  /**
   * Checks a resumption before the upgrade completes (after the caller was authenticated and authorized
   * for the route as when opening): the session's owner, route, protocol and the offset. Returns the
   * protocol to answer with.
   */
  check(request: { id: string; offset: number }, caller: Caller, target: TerminalTarget, protocols: string[]): string {
    const { id, offset } = request;
    const held = this.held.get(id);
    if (!held) {
      const gone = this.gone.get(id);
      if (gone && gone.userId !== caller.userId) throw new ForbiddenException(`session '${id}' is another user's`);
      throw new GoneException(
        gone
          ? `session '${id}' has ended: ${gone.why}`
          : `session '${id}' is unknown here (never opened here, or ended long ago): open a new session`,
      );
    }
    if (held.userId === null || held.userId !== caller.userId) {
      throw new ForbiddenException(`session '${id}' is another user's`);
    }
    if (held.route !== routeOf(target)) {
      bad(`session '${id}' was opened with another route or query: resume it with the same ones`);
    }
    if (!protocols.includes(held.protocol)) {
      bad(`session '${id}' speaks ${held.protocol}: offer that subprotocol to resume it`);
    }
    const problem = offsetProblem(held.ring, offset, id);
    if (problem?.status === 400) bad(problem.message);
    if (problem) throw new GoneException(problem.message);
    return held.protocol;
  }

  /**
   * The resumed client's socket, once its upgrade completed: the output it missed, then the session
   * goes on (or, for a session that ended while it was away, its exit status and close).
   */
  attach(request: { id: string; offset: number }, ws: WebSocket, caller: Caller, secret: string): void {
    const held = this.held.get(request.id);
    // The session may have ended, or its output moved on, while the handshake completed.
    const gone = this.gone.get(request.id);
    if (!held) return closeWith(ws, 4410, gone ? `the session has ended: ${gone.why}` : 'the session has ended');
    const problem = offsetProblem(held.ring, request.offset, request.id);
    if (problem) return closeWith(ws, 4000 + problem.status, problem.message);
    const replay = held.replay(request.offset);
    held.resumed++;
    clearTimeout(held.timer);
    if (held.final) {
      for (const frame of replay) ws.send(frame.data, { binary: frame.binary });
      if (held.status) ws.send(held.status.data, { binary: held.status.binary });
      return closeWith(ws, held.final.code, held.final.reason);
    }
    held.attached = true;
    held.session!.attach(ws, replay, caller, secret);
  }

  /** The client dropped: the session ends unless it is resumed within the window. */
  startWindow(held: HeldSession): void {
    clearTimeout(held.timer);
    const seconds = this.config.exec.resumeMs / 1000;
    held.timer = setTimeout(() => {
      held.expired = true;
      held.session?.end(
        410,
        'Gone',
        `the client did not resume it within ${seconds} s (CAS_SESSION_RESUME_SECONDS); the session has ended`,
      );
    }, this.config.exec.resumeMs).unref();
  }

  /** The session ended (audit row written by the caller): forgotten, or held ended for a client that is away. */
  ended(held: HeldSession, end: SessionEnd, byCluster: boolean): void {
    if (held.attached || !byCluster) {
      clearTimeout(held.timer);
      this.held.delete(held.id);
      this.remember(held, end.reason);
      return;
    }
    // The command ended while the client was away: its last output and exit status wait for it.
    held.final =
      end.reason === COMMAND_ENDED
        ? { code: 1000, reason: COMMAND_ENDED }
        : { code: 1011, reason: 'the cluster broke the connection' };
    held.session = undefined;
    this.finished++;
    clearTimeout(held.timer);
    held.timer = setTimeout(
      () => this.drop(held, `${end.reason}, and the client did not come back for its output`),
      this.config.exec.resumeMs,
    ).unref();
    if (this.finished > this.config.exec.maxSessions) {
      const oldest = [...this.held.values()].find((h) => h.final);
      if (oldest) this.drop(oldest, `${end.reason}; its output was dropped to make room for others`);
    }
  }

  onModuleDestroy(): void {
    for (const held of this.held.values()) clearTimeout(held.timer);
  }

  private drop(held: HeldSession, why: string): void {
    clearTimeout(held.timer);
    if (!this.held.delete(held.id)) return;
    if (held.final) this.finished--;
    this.remember(held, why);
  }

  private remember(held: HeldSession, why: string): void {
    const now = Date.now();
    for (const [id, gone] of this.gone) {
      if (this.gone.size < GONE_MAX && now - gone.at < GONE_MS) break;
      this.gone.delete(id);
    }
    this.gone.set(held.id, { userId: held.userId, why, at: now });
  }
}

function closeWith(ws: WebSocket, code: number, reason: string): void {
  let text = reason;
  while (Buffer.byteLength(text) > 123) text = text.slice(0, -1);
  ws.close(code, text);
  setTimeout(() => ws.terminate(), 5000).unref();
}
