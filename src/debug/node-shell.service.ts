import {
  BadRequestException,
  HttpException,
  Inject,
  Injectable,
  Logger,
  NotFoundException,
  type OnModuleDestroy,
  type OnModuleInit,
} from '@nestjs/common';
import { InjectRepository } from '@nestjs/typeorm';
import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { Repository } from 'typeorm';
import { WebSocket, WebSocketServer, type RawData } from 'ws';
import { type AccessRequest, Authorizer } from '../access/authorizer.js';
import { NODE_SHELL } from '../access/rules.js';
import type { AuditRow } from '../audit/audit-row.js';
import { AuditService } from '../audit/audit.service.js';
import type { Caller } from '../access/caller.js';
import { ClusterEntity } from '../clusters/cluster.entity.js';
import { clusterNameOf } from '../clusters/cluster-name.js';
import type { ClusterConnection } from '../clusters/cluster-connection.js';
import type { ClusterClient } from '../clusters/gateway/cluster-client.js';
import { ClusterGateway } from '../clusters/gateway/cluster-gateway.js';
import { MAX_WEBSOCKET_MESSAGE } from '../clusters/gateway/upgrade.js';
import { APP_CONFIG, type AppConfig } from '../config/config.js';
import { Leases } from '../database/leases.js';
import { validateName } from '../k8s/resource-path.js';
import { type StreamTicket, StreamOwner } from '../streams/stream-owner.js';
import { AsciicastRecording } from '../terminal/recording.js';
import {
  allowedProtocols,
  channelMessage,
  endStatus,
  ERROR,
  isBase64,
  upstreamProtocol,
} from '../terminal/terminal-protocol.js';
import { type SessionEnd, TerminalSession } from '../terminal/terminal-session.js';
import { nodeShellNodeOf, type NodeShellOpener, type NodeShellUpgrade } from '../terminal/node-shell-hook.js';
import { TerminalService } from '../terminal/terminal.service.js';
import { callJson, refusedBy, stuckReason } from './cluster-calls.js';

/** What runs on the node: a login shell in the host's namespaces (PID 1's). */
export const NODE_SHELL_COMMAND = ['nsenter', '-t', '1', '-m', '-u', '-i', '-n', '-p', '--', 'sh', '-l'];
export const SHELL_LABEL = 'cas.io/node-shell';
export const SESSION_LABEL = 'cas.io/session';
export const REPLICA_LABEL = 'cas.io/replica';
const CONTAINER = 'shell';
/** A replica's presence: renewed while it runs, so that others know whose shell pods still have a session. */
const LEASE_PREFIX = 'node-shell:';
const LEASE_RENEW_MS = 5_000;
const LEASE_TTL_MS = 20_000;
const POLL_MS = 200;
/** Input a client may send before the shell runs (kept, then relayed first). */
const MAX_EARLY_BYTES = 256 * 1024;
const DELETE_WAIT_MS = 5_000;
const CHOSEN = Symbol('cas:node-shell-protocol');
type ChosenRequest = IncomingMessage & { [CHOSEN]?: string };

interface Live {
  cluster: string;
  pod?: string;
  session?: TerminalSession;
  /** Ends the session, or its start, for a reason of the service's (shutdown). */
  abort(code: number, reason: string, message: string): void;
}

class Ended extends Error {
  constructor(
    readonly code: number,
    readonly reason: string,
    message: string,
  ) {
    super(message);
  }
}

/**
 * Node shells (docs/TERMINAL.md, debugging): a WebSocket `GET /api/v1/nodes/_all/<node>/shell`. Before
 * the upgrade: the service's rule (`create` on `nodes/shell`), the node (404), a slot. After it: a
 * privileged pod pinned to the node, created as the caller and awaited (bounded), then an exec into it
 * relayed as the terminal relays one (TerminalSession: recorded, re-authorized, limited). The pod is
 * deleted when the session ends, whatever ends it; a replica that dies without deleting its pods leaves
 * them to the sweep of the others (or of itself, restarted): every `CAS_NODE_SHELL_SWEEP_SECONDS`, the
 * shell pods whose replica no longer holds its lease, or whose session this replica no longer has.
 */
@Injectable()
export class NodeShellService implements NodeShellOpener, OnModuleInit, OnModuleDestroy {
  private readonly logger = new Logger(NodeShellService.name);
  private readonly live = new Map<string, Live>();
  private readonly deleting = new Set<Promise<void>>();
  private readonly wss = new WebSocketServer({
    noServer: true,
    perMessageDeflate: false,
    maxPayload: MAX_WEBSOCKET_MESSAGE,
    handleProtocols: (_offered, request) => (request as ChosenRequest)[CHOSEN] ?? false,
  });
  private timers: NodeJS.Timeout[] = [];
  private followUp?: NodeJS.Timeout;
  private stopping = false;

  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly authorizer: Authorizer,
    private readonly gateway: ClusterGateway,
    private readonly streams: StreamOwner,
    private readonly audit: AuditService,
    private readonly leases: Leases,
    @InjectRepository(ClusterEntity) private readonly clusters: Repository<ClusterEntity>,
    private readonly terminal: TerminalService,
  ) {}

  /** This replica, as the shell pods' label names it. */
  get replica(): string {
    return this.leases.holderId;
  }

  private get namespace(): string | undefined {
    return this.config.debug.nodeShellNamespace;
  }

  onModuleInit(): void {
    this.terminal.registerNodeShells(this);
    if (!this.namespace) return;
    const renew = () =>
      void this.leases
        .acquire(`${LEASE_PREFIX}${this.replica}`, LEASE_TTL_MS)
        .catch((error: Error) => this.logger.warn(`renewing the node-shell lease failed: ${error.message}`));
    renew();
    this.timers.push(setInterval(renew, LEASE_RENEW_MS).unref());
    // The first sweep soon after start: a replica restarted after a kill -9 removes what it left at once.
    this.timers.push(setTimeout(() => void this.sweep(), 2_000).unref());
    this.timers.push(setInterval(() => void this.sweep(), this.config.debug.sweepMs).unref());
  }

  async onModuleDestroy(): Promise<void> {
    this.stopping = true;
    for (const timer of this.timers) clearInterval(timer);
    clearTimeout(this.followUp);
    for (const live of [...this.live.values()]) live.abort(503, 'ServiceUnavailable', 'the service is stopping');
    // The pods' deletions were sent as the sessions ended: they finish before the cluster connections close.
    await Promise.race([Promise.allSettled([...this.deleting]), sleep(DELETE_WAIT_MS)]);
    this.wss.close();
  }

  /** The upgrade, after TerminalService resolved the credential: throws an HttpException to refuse it. */
  async open(o: NodeShellUpgrade): Promise<void> {
    const namespace = this.namespace;
    if (!namespace)
      throw new NotFoundException('node shells are off on this service (CAS_NODE_SHELL_NAMESPACE is not set)');
    let node: string;
    try {
      // The terminal handed over only a node-shell path, so the segment is there.
      node = decodeURIComponent(nodeShellNodeOf(o.url.pathname)!);
    } catch {
      throw new BadRequestException(['the node name is not validly percent-encoded']);
    }
    validateName(node);
    for (const key of o.url.searchParams.keys()) {
      if (key !== 'cluster') {
        throw new BadRequestException([
          `query parameter '${key.slice(0, 64)}' is not accepted here; the node shell takes: cluster`,
        ]);
      }
    }
    const header = o.req.headers['x-cluster-name'];
    const cluster = clusterNameOf(
      (Array.isArray(header) ? header[0] : header) ?? o.url.searchParams.get('cluster') ?? undefined,
    );
    const access: AccessRequest = { verb: 'create', cluster, resource: NODE_SHELL, namespace: null };
    const audited = { requestId: o.requestId, clientAddress: o.clientAddress, caller: o.caller, cluster, node };
    // A refusal is recorded by TerminalService, as every refused upgrade is.
    this.authorizer.require(o.caller, access);
    const allowed = allowedProtocols('exec');
    const protocol = o.offered.find((p) => allowed.includes(p));
    if (!protocol) {
      throw new HttpException(
        `a WebSocket subprotocol is required: offer one of ${allowed.join(', ')} (offered: ${o.offered.join(', ').slice(0, 200) || 'none'})`,
        400,
      );
    }
    const ticket = this.streams.admit(o.caller, 'exec');
    try {
      const conn = await this.gateway.connection(cluster);
      // Whether the node exists is the service's question (a caller may not read nodes): 404 before anything is created.
      const service = this.gateway.asService(conn);
      const found = await callJson(service, { method: 'GET', path: `/api/v1/nodes/${encodeURIComponent(node)}` });
      if (found.status === 404) throw new NotFoundException(`node '${node}' does not exist on cluster '${cluster}'`);
      if (found.status !== 200) throw refusedBy(service, found, `reading node '${node}'`);
      if (o.socket.destroyed) return ticket.release();
      (o.req as ChosenRequest)[CHOSEN] = protocol;
      // A client upgrade that does not complete (the client left) gives its slot back.
      const abandoned = () => ticket.release();
      o.socket.once('close', abandoned);
      this.wss.handleUpgrade(o.req, o.socket, o.head, (ws) => {
        o.socket.removeListener('close', abandoned);
        void this.run({ ws, protocol, conn, access, ticket, node, namespace, audited, secret: o.secret });
      });
    } catch (error) {
      ticket.release();
      throw error;
    }
  }

  /** After the upgrade: the pod, its start, the exec, the session; the pod deleted however it ends. */
  private async run(o: {
    ws: WebSocket;
    protocol: string;
    conn: ClusterConnection;
    access: AccessRequest;
    ticket: StreamTicket;
    node: string;
    namespace: string;
    audited: Audited;
    secret: string;
  }): Promise<void> {
    const { ws, conn, audited } = o;
    const caller = audited.caller;
    const sessionId = randomUUID();
    const client = this.gateway.asCaller(conn, caller);
    const startedAt = Date.now();
    // Input sent before the shell runs is kept (bounded) and relayed first.
    const early: Array<{ data: Buffer; binary: boolean }> = [];
    let earlyBytes = 0;
    const keep = (raw: RawData, binary: boolean) => {
      const data = Buffer.isBuffer(raw) ? raw : Buffer.concat(Array.isArray(raw) ? raw : [Buffer.from(raw)]);
      earlyBytes += data.length;
      if (earlyBytes <= MAX_EARLY_BYTES) early.push({ data, binary });
    };
    ws.on('message', keep);
    let ended: Ended | undefined;
    const live: Live = {
      cluster: conn.clusterName,
      abort: (code, reason, message) => {
        if (live.session) live.session.end(code, reason, message);
        else ended ??= new Ended(code, reason, message);
      },
    };
    this.live.set(sessionId, live);
    ws.once('close', () => (ended ??= new Ended(499, 'ClientClosed', 'the client closed the session')));
    const check = () => {
      if (ended) throw ended;
    };
    const details = { node: o.node, namespace: o.namespace, image: this.config.debug.nodeShellImage };
    this.record(audited, 101, { event: 'start', ...details, session: sessionId });
    try {
      check();
      live.pod = await this.createPod(client, o.namespace, o.node, sessionId, caller);
      check();
      await this.waitRunning(client, o.namespace, live.pod, check);
      const query = new URLSearchParams({ container: CONTAINER, stdin: 'true', stdout: 'true', tty: 'true' });
      for (const arg of NODE_SHELL_COMMAND) query.append('command', arg);
      const answer = await client.upgrade(
        `/api/v1/namespaces/${encodeURIComponent(o.namespace)}/pods/${encodeURIComponent(live.pod)}/exec`,
        query,
        [upstreamProtocol(o.protocol)],
      );
      if (!answer.open) {
        const message = answer.body.toString('utf8').slice(0, 500);
        throw new Ended(
          answer.statusCode >= 400 && answer.statusCode < 500 ? answer.statusCode : 502,
          'BadGateway',
          `the cluster refused the exec into the shell pod: ${message}`,
        );
      }
      const upstream = answer.socket;
      if (ended || upstream.protocol !== o.protocol) {
        upstream.terminate();
        check();
        throw new Ended(502, 'BadGateway', `the cluster agreed to no protocol the client offered`);
      }
      const pod = live.pod;
      const recording =
        this.config.exec.recording === 'output'
          ? new AsciicastRecording(`${conn.clusterName}/nodes/${o.node} shell`)
          : undefined;
      ws.removeListener('message', keep);
      for (const m of early) upstream.send(m.data, { binary: m.binary });
      const session: TerminalSession = new TerminalSession({
        kind: 'exec',
        caller,
        secret: o.secret,
        cluster: conn,
        access: [o.access],
        client: ws,
        upstream,
        protocol: o.protocol,
        pingMs: this.config.exec.pingMs,
        idleMs: this.config.exec.idleMs,
        maxMs: this.config.exec.maxMs,
        recording,
        onEnd: (end: SessionEnd) => {
          this.streams.release(session);
          this.live.delete(sessionId);
          this.deletePod(client, o.namespace, pod, sessionId);
          const { recording: cast, ...facts } = end;
          this.record(
            audited,
            101,
            { event: 'end', ...details, pod, session: sessionId, ...facts, recording: cast !== undefined },
            cast,
          );
        },
      });
      live.session = session;
      this.streams.own(session, o.ticket);
      upstream.resume();
    } catch (error) {
      this.live.delete(sessionId);
      o.ticket.release();
      if (live.pod) this.deletePod(client, o.namespace, live.pod, sessionId);
      const end = toEnded(error, this.logger);
      if (ws.readyState === WebSocket.OPEN) {
        const frame = channelMessage(
          ERROR,
          endStatus(o.protocol, end.code, end.reason, end.message),
          isBase64(o.protocol),
        );
        ws.send(frame.data, { binary: frame.binary });
        ws.close(end.code === 503 ? 1001 : 4000 + end.code, truncate(end.message));
        setTimeout(() => ws.terminate(), 5000).unref();
      }
      this.record(audited, 101, {
        event: 'end',
        ...details,
        pod: live.pod ?? null,
        session: sessionId,
        durationMs: Date.now() - startedAt,
        reason: end.message,
      });
    }
  }

  /** The shell pod, created as the caller: its name. */
  private async createPod(
    client: ClusterClient,
    namespace: string,
    node: string,
    sessionId: string,
    caller: Caller,
  ): Promise<string> {
    const pod = {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: {
        generateName: 'node-shell-',
        namespace,
        labels: {
          'app.kubernetes.io/managed-by': 'cluster-admin-service',
          [SHELL_LABEL]: 'true',
          [SESSION_LABEL]: sessionId,
          [REPLICA_LABEL]: this.replica,
        },
        annotations: { 'cas.io/node': node, 'cas.io/user': caller.name.slice(0, 256) },
      },
      spec: {
        nodeName: node,
        hostPID: true,
        hostNetwork: true,
        hostIPC: true,
        restartPolicy: 'Never',
        automountServiceAccountToken: false,
        terminationGracePeriodSeconds: 1,
        // A shell is for a node in trouble too: tainted, cordoned or not ready.
        tolerations: [{ operator: 'Exists' }],
        containers: [
          {
            name: CONTAINER,
            image: this.config.debug.nodeShellImage,
            imagePullPolicy: 'IfNotPresent',
            command: NODE_SHELL_COMMAND,
            stdin: true,
            tty: true,
            securityContext: { privileged: true },
          },
        ],
      },
    };
    const created = await callJson(client, {
      method: 'POST',
      path: `/api/v1/namespaces/${encodeURIComponent(namespace)}/pods`,
      contentType: 'application/json',
      body: Buffer.from(JSON.stringify(pod)),
    });
    if (created.status !== 201) {
      const refused = refusedBy(client, created, `creating the shell pod in namespace '${namespace}'`);
      throw new Ended(refused.getStatus(), reasonOf(refused.getStatus()), refused.message);
    }
    return String(created.body?.metadata?.name);
  }

  /** Reads the pod until its container runs (bounded); the kubelet's reason when it cannot. */
  private async waitRunning(client: ClusterClient, namespace: string, pod: string, check: () => void): Promise<void> {
    const deadline = Date.now() + this.config.debug.startMs;
    const path = `/api/v1/namespaces/${encodeURIComponent(namespace)}/pods/${encodeURIComponent(pod)}`;
    let last = 'no status yet';
    for (;;) {
      check();
      const answer = await callJson(client, { method: 'GET', path });
      if (answer.status !== 200) {
        const refused = refusedBy(client, answer, `reading the shell pod '${pod}'`);
        throw new Ended(refused.getStatus(), reasonOf(refused.getStatus()), refused.message);
      }
      const status = answer.body?.status;
      const container = Array.isArray(status?.containerStatuses) ? status.containerStatuses[0] : undefined;
      if (container?.state?.running) return;
      const stuck = stuckReason(container?.state);
      if (stuck) throw new Ended(422, 'Invalid', `the shell pod '${pod}' cannot start: ${stuck}`);
      if (status?.phase === 'Failed' || status?.phase === 'Succeeded') {
        throw new Ended(502, 'BadGateway', `the shell pod '${pod}' ended (${String(status.phase)})`);
      }
      if (container?.state?.waiting?.reason) last = String(container.state.waiting.reason).slice(0, 100);
      if (Date.now() >= deadline) {
        throw new Ended(
          504,
          'Timeout',
          `the shell pod '${pod}' did not run within ${this.config.debug.startMs / 1000} s (${last})`,
        );
      }
      await sleep(POLL_MS);
    }
  }

  /**
   * Deletes a shell pod: as the caller, else (the caller may have lost the right meanwhile) as the service,
   * which created it for the session. A failure is left to the sweep.
   */
  private deletePod(client: ClusterClient | undefined, namespace: string, pod: string, sessionId: string): void {
    const path = `/api/v1/namespaces/${encodeURIComponent(namespace)}/pods/${encodeURIComponent(pod)}`;
    const body = Buffer.from(JSON.stringify({ kind: 'DeleteOptions', apiVersion: 'v1', gracePeriodSeconds: 1 }));
    const call = { method: 'DELETE' as const, path, contentType: 'application/json', body };
    const done = (async () => {
      const clients = [client, client ? this.gateway.asService(client.conn) : undefined].filter(
        (c): c is ClusterClient => c !== undefined,
      );
      for (const c of clients) {
        try {
          const answer = await callJson(c, { ...call, body: Buffer.from(body) });
          if (answer.status === 200 || answer.status === 202 || answer.status === 404) return;
        } catch {
          // the next identity, or the sweep
        }
      }
      this.logger.warn(`could not delete shell pod ${namespace}/${pod} (session ${sessionId}); the sweep will`);
    })();
    this.deleting.add(done);
    void done.finally(() => this.deleting.delete(done));
  }

  /**
   * One sweep: on every enabled cluster, the shell pods whose session no longer exists — this replica's
   * that it no longer runs, another's whose lease has lapsed (it died) — are deleted, as the service.
   */
  async sweep(): Promise<number> {
    const namespace = this.namespace;
    if (!namespace || this.stopping) return 0;
    let deleted = 0;
    try {
      await this.leases.prune(LEASE_PREFIX, new Date(Date.now() - 3_600_000)).catch(() => undefined);
      const rows = await this.clusters.find({ select: { name: true }, where: { enabled: true } });
      const held = new Map<string, Promise<Date | null>>();
      /** The earliest lease of another replica that kept a pod: a sweep follows as soon as it would lapse. */
      let soonest = Infinity;
      const alive = async (replica: string) => {
        let found = held.get(replica);
        if (!found) held.set(replica, (found = this.leases.heldUntil(`${LEASE_PREFIX}${replica}`)));
        const until = await found;
        if (until) soonest = Math.min(soonest, until.getTime());
        return until !== null;
      };
      const mine = new Set(this.live.keys());
      for (const { name } of rows) {
        try {
          const client = this.gateway.asService(await this.gateway.connection(name));
          const list = await callJson(client, {
            method: 'GET',
            path: `/api/v1/namespaces/${encodeURIComponent(namespace)}/pods`,
            query: new URLSearchParams({ labelSelector: `${SHELL_LABEL}=true`, limit: '500' }),
          });
          if (list.status !== 200) continue;
          for (const pod of (list.body?.items ?? []) as Array<{ metadata: any }>) {
            const labels = pod.metadata?.labels ?? {};
            if (pod.metadata?.deletionTimestamp) continue;
            const replica = String(labels[REPLICA_LABEL] ?? '');
            const session = String(labels[SESSION_LABEL] ?? '');
            const gone = replica === this.replica ? !mine.has(session) : !(await alive(replica));
            if (!gone) continue;
            this.logger.log(
              `deleting shell pod ${namespace}/${pod.metadata.name} on cluster '${name}': its session no longer exists`,
            );
            this.deletePod(client, namespace, String(pod.metadata.name), session);
            deleted++;
          }
        } catch (error) {
          this.logger.warn(`sweeping shell pods on cluster '${name}' failed: ${(error as Error).message}`);
        }
      }
      // A replica that stopped renewing (killed) has its pods deleted when its lease lapses, not a period later.
      if (soonest !== Infinity && !this.followUp) {
        this.followUp = setTimeout(
          () => {
            this.followUp = undefined;
            void this.sweep();
          },
          Math.max(0, soonest - Date.now()) + 1_000,
        ).unref();
      }
    } catch (error) {
      this.logger.warn(`sweeping shell pods failed: ${(error as Error).message}`);
    }
    return deleted;
  }

  private record(a: Audited, statusCode: number, detail: Record<string, unknown>, recording?: string): void {
    const row: AuditRow = {
      at: new Date(),
      actorKind: a.caller.kind,
      actorId: a.caller.id,
      actorName: a.caller.name,
      actorKey: a.caller.name.toLowerCase(),
      clientAddress: a.clientAddress,
      operation: 'nodeShell',
      method: 'GET',
      statusCode,
      requestId: a.requestId,
      targetKind: null,
      targetId: null,
      cluster: a.cluster,
      resource: 'nodes',
      namespace: null,
      name: a.node,
      uid: null,
      resourceVersion: null,
      count: 1,
      detail: JSON.stringify(detail),
      recording: recording ?? null,
    };
    this.audit.record(row);
  }
}

interface Audited {
  requestId: string;
  clientAddress: string | null;
  caller: Caller;
  cluster: string;
  node: string;
}

function toEnded(error: unknown, logger: Logger): Ended {
  if (error instanceof Ended) return error;
  if (error instanceof HttpException) {
    return new Ended(error.getStatus(), reasonOf(error.getStatus()), error.message);
  }
  logger.error(`a node shell failed: ${(error as Error)?.stack ?? String(error)}`);
  return new Ended(500, 'InternalError', 'the node shell failed');
}

/** A Status reason for a status code (what kubectl and client-go print beside the message). */
function reasonOf(code: number): string {
  const reasons: Record<number, string> = {
    400: 'BadRequest',
    401: 'Unauthorized',
    403: 'Forbidden',
    404: 'NotFound',
    409: 'Conflict',
    422: 'Invalid',
    429: 'TooManyRequests',
    503: 'ServiceUnavailable',
    504: 'Timeout',
  };
  return reasons[code] ?? (code >= 500 ? 'BadGateway' : 'BadRequest');
}

/** A close reason is at most 123 bytes. */
function truncate(text: string): string {
  let out = text;
  while (Buffer.byteLength(out) > 123) out = out.slice(0, -1);
  return out;
}
