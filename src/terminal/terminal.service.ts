import {
  BadGatewayException,
  ForbiddenException,
  GoneException,
  HttpException,
  Inject,
  Injectable,
  Logger,
  NotFoundException,
  type OnModuleDestroy,
  UnauthorizedException,
} from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { WebSocketServer, type WebSocket } from 'ws';
import { type AccessRequest, Authorizer } from '../access/authorizer.js';
import type { AuditRow } from '../audit/audit-row.js';
import { AuditService } from '../audit/audit.service.js';
import { COOKIE_NOT_ACCEPTED } from '../auth/auth.guard.js';
import type { Caller } from '../access/caller.js';
import { CredentialsService } from '../auth/credentials.service.js';
import { SECURE_SESSION_COOKIE, SESSION_COOKIE } from '../auth/session-cookie.js';
import { ClusterGateway } from '../clusters/gateway/cluster-gateway.js';
import { MAX_WEBSOCKET_MESSAGE } from '../clusters/gateway/upgrade.js';
import { errorBody, toErrorResponse } from '../common/filters/http-exception.filter.js';
import { APP_CONFIG, type AppConfig } from '../config/config.js';
import { kubeStatus } from '../kube/kube-status.js';
import { StreamOwner } from '../streams/stream-owner.js';
import { isNodeShellPath, type NodeShellOpener } from './node-shell-hook.js';
import { AsciicastRecording } from './recording.js';
import { ResumableSessions, type ResumeRequest, takeResumeQuery } from './resumable-sessions.js';
import { SessionForwarding } from './session-forwarding.js';
import { isTerminalPath, parseTarget, type TerminalTarget, upstreamPath } from './terminal-request.js';
import { SpdyRelay } from './spdy-relay.js';
import {
  allowedProtocols,
  offeredProtocols,
  SPDY_UPGRADE,
  streamProtocols,
  upstreamProtocol,
} from './terminal-protocol.js';
import { type SessionEnd, TerminalSession } from './terminal-session.js';

/** The operationIds of the three upgrades, as audit rows name them. */
const OPERATIONS = { exec: 'execPod', attach: 'attachPod', portforward: 'portForwardPod' } as const;
const AGREED = Symbol('cas:agreed-protocol');
type AgreedRequest = IncomingMessage & { [AGREED]?: string };
const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/** What a refusal before the upgrade needs to be answered and audited. */
interface Attempt {
  requestId: string;
  path: 'rest' | 'kube';
  caller?: Caller;
  target?: TerminalTarget;
  clientAddress: string | null;
  /** The audit rows' operation when it is not the target's (a node shell). */
  operation?: string;
  /** Forwarded by another replica (signed with CAS_REPLICA_SECRET): `clientAddress` is the one it vouched for. */
  forwarded?: boolean;
}

/**
 * The terminal (docs/TERMINAL.md): every WebSocket upgrade of the service arrives here (the edge hands
 * over the Node server's `upgrade` event). In order, before anything is sent to a cluster: the path
 * and query, the credential (the session cookie only from an allowed Origin), the service's rules, the
 * subprotocol, a slot from the stream owner. Then the cluster is asked for the same upgrade through
 * the gateway, as the caller; only when it accepts is the client's upgrade completed. Every refusal
 * before that is an HTTP answer; after it, a close code and reason.
 */
@Injectable()
export class TerminalService implements OnModuleDestroy {
  /** Upstream sockets open on a cluster whose client upgrade has not completed yet: ended with the service. */
  private readonly pending = new Set<WebSocket>();
  private readonly logger = new Logger(TerminalService.name);
  private readonly wss = new WebSocketServer({
    noServer: true,
    perMessageDeflate: false,
    maxPayload: MAX_WEBSOCKET_MESSAGE,
    // The protocol answered is the one the cluster agreed to (never the token a client sent as one).
    handleProtocols: (_offered, request) => (request as AgreedRequest)[AGREED] ?? false,
  });
  private readonly ownOrigins: Set<string>;
  /** Node shells, when the debug module is loaded (it registers itself at start). */
  private nodeShells?: NodeShellOpener;

  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly credentials: CredentialsService,
    private readonly authorizer: Authorizer,
    private readonly gateway: ClusterGateway,
    private readonly streams: StreamOwner,
    private readonly audit: AuditService,
    private readonly resumable: ResumableSessions,
    private readonly forwarding: SessionForwarding,
  ) {
    this.ownOrigins = new Set([new URL(config.kube.publicUrl).origin, ...config.corsOrigins]);
  }

  registerNodeShells(opener: NodeShellOpener): void {
    this.nodeShells = opener;
  }

  /** The Node server's `upgrade` event. `draining`: the service is shutting down (503). */
  handleUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer, draining: boolean): void {
    const header = req.headers['x-request-id'];
    const forwardedFor = this.forwarding.forwardedFor(req);
    const attempt: Attempt = {
      requestId: typeof header === 'string' && REQUEST_ID.test(header) ? header : randomUUID(),
      path: 'rest',
      clientAddress: forwardedFor ?? req.socket.remoteAddress ?? null,
      forwarded: forwardedFor !== undefined,
    };
    socket.on('error', () => socket.destroy());
    this.upgrade(req, socket, head, attempt, draining).catch((error: unknown) => this.refuse(socket, attempt, error));
  }

  private async upgrade(req: IncomingMessage, socket: Duplex, head: Buffer, attempt: Attempt, draining: boolean) {
    const url = new URL(req.url ?? '/', 'http://service');
    const nodeShell = isNodeShellPath(url.pathname);
    const path = nodeShell ? 'rest' : isTerminalPath(url.pathname);
    if (!path) throw new HttpException('no WebSocket is served at this path', 404);
    attempt.path = path;
    if (draining) throw new HttpException('the service is shutting down; try again', 503);
    const upgrade = String(req.headers.upgrade ?? '').toLowerCase();
    // SPDY/3.1 (kubectl ≤ 1.29) on the Kubernetes path, where kubectl is the client; WebSocket everywhere.
    const spdy = upgrade === SPDY_UPGRADE.toLowerCase();
    if (spdy && path === 'rest') {
      throw new HttpException(
        'this route serves WebSocket upgrades only; SPDY/3.1 (kubectl) is served on the Kubernetes path (/api/v1/clusters/<name>/k8s/…)',
        400,
      );
    }
    if (!spdy && upgrade !== 'websocket') {
      throw new HttpException(
        `only WebSocket and SPDY/3.1 upgrades are served here, not '${upgrade.slice(0, 32)}'`,
        400,
      );
    }
    // A handshake the WebSocket library would refuse must be refused before the cluster runs anything.
    if (!spdy) checkHandshake(req);
    const offered = spdy
      ? { protocols: streamProtocols(req.headers['x-stream-protocol-version']), token: undefined }
      : offeredProtocols(req.headers['sec-websocket-protocol']);
    const secret = this.credentialOf(req, offered.token, path);
    const caller = await this.credentials.resolve(secret);
    attempt.caller = caller;
    if (caller.roles.length === 0) throw new ForbiddenException('the caller has no role: ask an administrator for one');
    if (nodeShell) {
      if (!this.nodeShells) throw new NotFoundException('node shells are not served by this replica');
      // A node shell (src/debug/node-shell.service.ts): the credential was this service's part; the rest is its own.
      attempt.operation = 'nodeShell';
      return this.nodeShells.open({
        ...{ req, socket, head, url, caller, secret, offered: offered.protocols },
        ...{ requestId: attempt.requestId, clientAddress: attempt.clientAddress },
      });
    }
    const resume = path === 'rest' ? takeResumeQuery(url) : undefined;
    const target = parseTarget(url, path === 'rest' ? req.headers['x-cluster-name'] : undefined, spdy);
    attempt.target = target;
    const access: AccessRequest = {
      verb: target.kind,
      cluster: target.cluster,
      resource: 'pods',
      namespace: target.namespace,
    };
    // Before the rules: kubectl ≥ 1.30 offers WebSocket `v5.channel.k8s.io` (port-forward from 1.31:
    // `SPDY/3.1+portforward.k8s.io`), which the clusters' kubelets do not speak; any answer but a 101
    // makes it try again over SPDY/3.1, so this refusal is the first half of every such command and
    // is neither an audited refusal nor a second one should the rules refuse the SPDY attempt.
    const allowed = allowedProtocols(target.kind, spdy);
    const protocols = offered.protocols.filter((p) => allowed.includes(p));
    if (protocols.length === 0) {
      throw new HttpException(
        spdy
          ? `X-Stream-Protocol-Version must offer one of ${allowed.join(', ')} (offered: ${offered.protocols.join(', ').slice(0, 200) || 'none'})`
          : `a WebSocket subprotocol is required: offer one of ${allowed.join(', ')} (offered: ${offered.protocols.join(', ').slice(0, 200) || 'none'}); kubectl 1.30 and later then use SPDY/3.1`,
        400,
      );
    }
    this.authorizer.require(caller, access);
    const holder = resume && 'id' in resume ? this.forwarding.holderOf(resume.id) : undefined;
    if (resume && 'id' in resume && holder !== undefined) {
      // Held by another replica: passed on to it, which checks everything again.
      const o = { sessionId: resume.id, holder, clientAddress: attempt.clientAddress, forwarded: !!attempt.forwarded };
      return this.forwarding.forward(req, socket, head, o).catch((error: unknown) => {
        if (error instanceof GoneException) {
          this.record(attempt, 410, { event: 'lost', session: resume.id, reason: error.message });
        }
        throw error;
      });
    }
    if (resume && 'id' in resume) {
      // A resumption: the session holds its slot and its cluster side; only the client's socket is new.
      (req as AgreedRequest)[AGREED] = this.resumable.check(resume, caller, target, protocols);
      return this.wss.handleUpgrade(req, socket, head, (ws) => this.resumable.attach(resume, ws, caller, secret));
    }
    const ticket = this.streams.admit(caller, 'exec');
    if (spdy) {
      try {
        return await this.relaySpdy({ req, socket, head, caller, secret, access, target, attempt, ticket, protocols });
      } catch (error) {
        ticket.release();
        throw error;
      }
    }
    try {
      const conn = await this.gateway.connection(target.cluster);
      const client = this.gateway.asCaller(conn, caller);
      const answer = await client.upgrade(upstreamPath(target), target.query, [
        ...new Set(protocols.map(upstreamProtocol)),
      ]);
      if (!answer.open) {
        ticket.release();
        return this.passRefusal(socket, attempt, answer.statusCode, answer.contentType, answer.body);
      }
      const upstream = answer.socket; // paused: nothing is lost while the client's upgrade completes
      const chosen = protocols.find((p) => upstreamProtocol(p) === upstream.protocol) ?? protocols[0];
      if (socket.destroyed) {
        ticket.release();
        upstream.terminate();
        return;
      }
      (req as AgreedRequest)[AGREED] = chosen;
      this.pending.add(upstream);
      // A client upgrade that does not complete (the client left, a bad handshake) leaves no upstream behind.
      const abandoned = () => {
        if (!this.pending.delete(upstream)) return;
        ticket.release();
        upstream.terminate();
        // The cluster has already started the command: that is recorded even though no session began.
        this.record(attempt, 101, { event: 'abandoned', kind: target.kind, ...target.facts });
      };
      socket.once('close', abandoned);
      this.wss.handleUpgrade(req, socket, head, (ws) => {
        socket.removeListener('close', abandoned);
        if (!this.pending.delete(upstream)) return ws.terminate();
        this.start({ ws, upstream, chosen, caller, secret, conn, access, target, attempt, ticket, resume });
      });
    } catch (error) {
      ticket.release();
      throw error;
    }
  }

  /** The SPDY/3.1 upgrade asked of the cluster as the caller; once it accepts, the client's 101 and a byte relay. */
  private async relaySpdy(o: {
    req: IncomingMessage;
    socket: Duplex;
    head: Buffer;
    caller: Caller;
    secret: string;
    access: AccessRequest;
    target: TerminalTarget;
    attempt: Attempt;
    ticket: ReturnType<StreamOwner['admit']>;
    protocols: string[];
  }): Promise<void> {
    const { socket, target, attempt, ticket } = o;
    const conn = await this.gateway.connection(target.cluster);
    const answer = await this.gateway
      .asCaller(conn, o.caller)
      .upgradeRaw(upstreamPath(target), target.query, SPDY_UPGRADE, o.protocols);
    if (!answer.open) {
      ticket.release();
      return this.passRefusal(socket, attempt, answer.statusCode, answer.contentType, answer.body);
    }
    const upstream = answer.socket;
    const agreed = streamProtocols(answer.headers['x-stream-protocol-version']);
    if (socket.destroyed || agreed.length !== 1 || !o.protocols.includes(agreed[0])) {
      ticket.release();
      upstream.destroy();
      if (socket.destroyed) return;
      throw new BadGatewayException(
        `cluster '${target.cluster}' agreed to no stream protocol the client offered for ${target.kind}`,
      );
    }
    socket.write(
      `HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: ${SPDY_UPGRADE}\r\n` +
        `X-Stream-Protocol-Version: ${agreed[0]}\r\n\r\n`,
    );
    const exec = this.config.exec;
    this.record(attempt, 101, { event: 'start', kind: target.kind, protocol: SPDY_UPGRADE, ...target.facts });
    const recording =
      exec.recording === 'output' && target.kind !== 'portforward'
        ? new AsciicastRecording(`${target.cluster}/${target.namespace}/${target.pod} ${target.kind}`)
        : undefined;
    const relay: SpdyRelay = new SpdyRelay({
      kind: target.kind,
      protocol: agreed[0],
      recording,
      caller: o.caller,
      secret: o.secret,
      cluster: conn,
      access: [o.access],
      client: socket,
      clientHead: o.head,
      upstream,
      upstreamHead: answer.head,
      pingMs: exec.pingMs,
      idleMs: exec.idleMs,
      maxMs: exec.maxMs,
      onEnd: (end) => {
        this.streams.release(relay);
        const { recording: cast, ...facts } = end;
        this.record(
          attempt,
          101,
          { event: 'end', kind: target.kind, protocol: SPDY_UPGRADE, ...facts, recording: cast !== undefined },
          cast,
        );
      },
    });
    this.streams.own(relay, ticket);
    upstream.resume();
  }

  onModuleDestroy(): void {
    for (const upstream of this.pending) upstream.terminate();
    this.pending.clear();
  }

  private start(o: {
    ws: WebSocket;
    upstream: WebSocket;
    chosen: string;
    caller: Caller;
    secret: string;
    conn: Awaited<ReturnType<ClusterGateway['connection']>>;
    access: AccessRequest;
    target: TerminalTarget;
    attempt: Attempt;
    ticket: ReturnType<StreamOwner['admit']>;
    resume?: ResumeRequest;
  }): void {
    const { target } = o;
    // Asked for `resumable=true`: its id is the client's first message, before any output.
    const kept = o.resume ? this.resumable.keep(o.ws, { ...o, protocol: o.chosen }) : undefined;
    const recording =
      this.config.exec.recording === 'output' && target.kind !== 'portforward'
        ? new AsciicastRecording(`${target.cluster}/${target.namespace}/${target.pod} ${target.kind}`)
        : undefined;
    const exec = this.config.exec;
    this.record(o.attempt, 101, { event: 'start', kind: target.kind, ...target.facts });
    const session: TerminalSession = new TerminalSession({
      kind: target.kind,
      caller: o.caller,
      secret: o.secret,
      cluster: o.conn,
      access: [o.access],
      client: o.ws,
      upstream: o.upstream,
      protocol: o.chosen,
      pingMs: exec.pingMs,
      idleMs: exec.idleMs,
      maxMs: exec.maxMs,
      recording,
      keeper: kept?.keeper,
      onEnd: (end: SessionEnd) => {
        this.streams.release(session);
        const { recording: cast, ...facts } = end;
        const resumable = kept?.ended(end);
        this.record(
          o.attempt,
          101,
          { event: 'end', kind: target.kind, ...facts, ...resumable, recording: cast !== undefined },
          cast,
        );
      },
    });
    kept?.bind(session);
    this.streams.own(session, o.ticket);
    o.upstream.resume();
  }

  /**
   * The credential: `Authorization`, else the subprotocol token, else the session cookie — which a
   * browser sends to any site's WebSocket, so only from the service's own origin or CORS_ORIGINS, and
   * never on the Kubernetes path (kubectl and client-go send `Authorization`).
   */
  private credentialOf(req: IncomingMessage, subprotocolToken: string | undefined, path: 'rest' | 'kube'): string {
    const header = req.headers.authorization?.trim();
    if (header) return /^Bearer\s+(.+)$/i.exec(header)?.[1].trim() ?? header;
    if (subprotocolToken) return subprotocolToken;
    const cookie = sessionCookie(req.headers.cookie);
    if (!cookie) throw new UnauthorizedException('authentication required');
    if (path === 'kube') throw new UnauthorizedException(COOKIE_NOT_ACCEPTED);
    const origin = req.headers.origin;
    if (!origin || !this.originAllowed(origin, req.headers.host)) {
      throw new ForbiddenException(
        `the session cookie is accepted only from the service's own origin or CORS_ORIGINS; origin '${String(origin ?? 'none').slice(0, 200)}' is not allowed`,
      );
    }
    return cookie;
  }

  private originAllowed(origin: string, host: string | undefined): boolean {
    if (this.ownOrigins.has(origin)) return true;
    try {
      return host !== undefined && new URL(origin).host === host;
    } catch {
      return false;
    }
  }

  /** A refusal before the upgrade: the service's error shape, or a `Status` on the Kubernetes path. */
  private refuse(socket: Duplex, attempt: Attempt, error: unknown): void {
    const { body, headers } = toErrorResponse(error, attempt.requestId, this.logger);
    const message = Array.isArray(body.message) ? body.message.join('; ') : body.message;
    const payload =
      attempt.path === 'kube'
        ? JSON.stringify(kubeStatus(body.statusCode, message))
        : JSON.stringify(errorBody(body.statusCode, body.message, attempt.requestId));
    if (body.statusCode === 403 || (body.statusCode === 401 && attempt.caller)) {
      this.record(attempt, body.statusCode, { event: 'refused', reason: message });
    }
    writeHttp(socket, body.statusCode, 'application/json', Buffer.from(payload), attempt.requestId, headers);
  }

  /** The cluster refused the upgrade (unknown pod or container, the cluster's own 403…): its answer, passed on. */
  private passRefusal(socket: Duplex, attempt: Attempt, statusCode: number, contentType: string, body: Buffer): void {
    if (statusCode === 403) this.record(attempt, 403, { event: 'refused', reason: 'the cluster refused it' });
    writeHttp(socket, statusCode, contentType, body, attempt.requestId);
  }

  private record(attempt: Attempt, statusCode: number, detail: Record<string, unknown>, recording?: string): void {
    const { caller, target } = attempt;
    const row: AuditRow = {
      at: new Date(),
      actorKind: caller?.kind ?? 'anonymous',
      actorId: caller?.id ?? null,
      actorName: caller?.name ?? null,
      actorKey: caller?.name.toLowerCase() ?? null,
      clientAddress: attempt.clientAddress,
      operation: attempt.operation ?? OPERATIONS[target?.kind ?? 'exec'],
      method: 'GET',
      statusCode,
      requestId: attempt.requestId,
      targetKind: null,
      targetId: null,
      cluster: target?.cluster ?? null,
      resource: 'pods',
      namespace: target?.namespace ?? null,
      name: target?.pod ?? null,
      uid: null,
      resourceVersion: null,
      count: 1,
      detail: JSON.stringify(detail),
      recording: recording ?? null,
    };
    this.audit.record(row);
  }
}

/** RFC 6455 §4.2.1: a 16-byte nonce in base64, and version 13 (8: the last draft, which ws also takes). */
const WEBSOCKET_KEY = /^[+/0-9A-Za-z]{22}==$/;

/** The parts of a WebSocket handshake the `ws` server checks, checked before any work on it (400 naming the header). */
function checkHandshake(req: IncomingMessage): void {
  const key = req.headers['sec-websocket-key'];
  if (typeof key !== 'string' || !WEBSOCKET_KEY.test(key.trim())) {
    throw new HttpException('Sec-WebSocket-Key must be a base64-encoded 16-byte value (RFC 6455)', 400);
  }
  const version = req.headers['sec-websocket-version'];
  if (version !== '13' && version !== '8') {
    throw new HttpException('Sec-WebSocket-Version must be 13', 400);
  }
}

/** The session token in a Cookie header, under either name (the `__Host-` one first). */
function sessionCookie(header: string | undefined): string | undefined {
  if (!header) return undefined;
  const found = new Map<string, string>();
  for (const part of header.split(';')) {
    const eq = part.indexOf('=');
    if (eq < 0) continue;
    found.set(part.slice(0, eq).trim(), part.slice(eq + 1).trim());
  }
  const value = found.get(SECURE_SESSION_COOKIE) || found.get(SESSION_COOKIE);
  if (!value) return undefined;
  try {
    return decodeURIComponent(value);
  } catch {
    return undefined;
  }
}

function writeHttp(
  socket: Duplex,
  statusCode: number,
  contentType: string,
  body: Buffer,
  requestId: string,
  headers: Record<string, string> = {},
): void {
  if (socket.destroyed) return;
  const extra = Object.entries(headers)
    .map(([k, v]) => `${k}: ${v}\r\n`)
    .join('');
  const head =
    `HTTP/1.1 ${statusCode} ${errorBody(statusCode, '', '').error}\r\n` +
    `content-type: ${contentType.replace(/[\r\n]/g, '')}\r\ncontent-length: ${body.length}\r\n` +
    `x-request-id: ${requestId}\r\n${extra}connection: close\r\n\r\n`;
  socket.end(Buffer.concat([Buffer.from(head, 'latin1'), body]));
  setTimeout(() => socket.destroy(), 5000).unref();
}
