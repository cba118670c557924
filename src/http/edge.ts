import cookie from '@fastify/cookie';
import cors from '@fastify/cors';
import { Inject, Injectable } from '@nestjs/common';
import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import type { OpenAPIObject } from '@nestjs/swagger';
import { InjectRepository } from '@nestjs/typeorm';
import type { FastifyInstance } from 'fastify';
import type { IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { Repository } from 'typeorm';
import { registerAudit } from '../audit/audit.hook.js';
import { AuditService } from '../audit/audit.service.js';
import { REFUSAL_BODY_CONFIG, type RefusalBody, registerAuthentication } from '../auth/auth.guard.js';
import { CredentialsService } from '../auth/credentials.service.js';
import { attachDrain } from '../common/drain.js';
import { bytesBodyParser, GZIP_TYPES, jsonBodyParser, textBodyParser, YAML_TYPES } from '../common/json-body.js';
import type { RouteFacts } from '../common/strict-input.js';
import { kubeStatus } from '../kube/kube-status.js';
import { RAW_BODY_CONFIG, RAW_BODY_ROUTES, rawBodyOnly, unlessRawBody } from '../kube/raw-body.js';
import { APP_CONFIG, type AppConfig } from '../config/config.js';
import { recordHttpRequest, NO_ROUTE } from '../observability/service-metrics.js';
import { METRICS_PATH } from '../observability/service-endpoint.js';
import { StreamOwner } from '../streams/stream-owner.js';
import { TerminalService } from '../terminal/terminal.service.js';
import { UserEntity } from '../users/user.entity.js';
import { answeringSockets, rawError } from './raw-error.js';
import { Server as TlsServer, type TLSSocket } from 'node:tls';
import { CLUSTER_HEADER, takeClusterFromQuery } from '../clusters/target-cluster.js';

export const API_PREFIX = 'api/v1';
const MIB = 1024 * 1024;
/** Resource routes carry whole cluster objects; everything else is small. */
export const RESOURCE_BODY_LIMIT = 10 * MIB;
export const ADMIN_BODY_LIMIT = 1 * MIB;
/** Resource routes are the ones whose first segment under the prefix is the `:resource` parameter. */
const RESOURCE_ROUTE = `/${API_PREFIX}/:resource`;
/** Apply carries as much as a resource route's write: whole objects, up to 500 of them. */
const APPLY_ROUTE = `/${API_PREFIX}/apply`;
/** The Helm routes take chart archives (`application/gzip`) of up to 10 MiB. */
const HELM_ROUTES = `/${API_PREFIX}/helm/`;
/** Every media type read as JSON: plain JSON and the Kubernetes patch kinds. */
const JSON_TYPES = [
  'application/json',
  'application/merge-patch+json',
  'application/json-patch+json',
  'application/strategic-merge-patch+json',
];

/**
 * Security headers of every answer: helmet's defaults with the service's Content-Security-Policy
 * (Swagger UI's inline styles and data: images allowed, nothing else), written out once.
 */
const SECURITY_HEADERS: Readonly<Record<string, string>> = Object.freeze({
  'content-security-policy':
    "default-src 'self';base-uri 'self';font-src 'self' https: data:;form-action 'self';frame-ancestors 'none';" +
    "img-src 'self' data:;object-src 'none';script-src 'self';script-src-attr 'none';" +
    "style-src 'self' 'unsafe-inline';connect-src 'self'",
  'cross-origin-opener-policy': 'same-origin',
  'cross-origin-resource-policy': 'same-origin',
  'origin-agent-cluster': '?1',
  'referrer-policy': 'no-referrer',
  'strict-transport-security': 'max-age=31536000; includeSubDomains',
  'x-content-type-options': 'nosniff',
  'x-dns-prefetch-control': 'off',
  'x-download-options': 'noopen',
  'x-frame-options': 'SAMEORIGIN',
  'x-permitted-cross-domain-policies': 'none',
  'x-xss-protection': '0',
});

/**
 * The Kubernetes API path answers with what clusters serve (a pod's proxied pages, the apiserver's own
 * non-resource pages): `sandbox` puts any such document in an opaque origin with no script, so nothing
 * a cluster serves ever runs with the service's origin.
 */
const KUBE_PATH_SECURITY_HEADERS: Readonly<Record<string, string>> = Object.freeze({
  ...SECURITY_HEADERS,
  'content-security-policy': "sandbox; default-src 'none'; frame-ancestors 'none'",
});
/** Route config: the security headers of a route's answers, when not SECURITY_HEADERS. */
const SECURITY_HEADERS_CONFIG = 'casSecurityHeaders';

/** A refusal of the authentication hook on the Kubernetes API path, as the apiserver words one. */
const kubeRefusal: RefusalBody = (statusCode, message) => kubeStatus(statusCode, message);

/** CORS for the origins in CORS_ORIGINS: every method the API has, the headers a console sends. */
export const CORS_METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE'];
export const CORS_ALLOWED_HEADERS = ['authorization', 'content-type', CLUSTER_HEADER, 'last-event-id', 'x-request-id'];
export const CORS_EXPOSED_HEADERS = ['x-request-id', 'warning', 'retry-after'];

/**
 * The one HTTP edge: every Fastify hook and plugin of the service, registered here in this order.
 *
 * 1. `onRoute`: each route's body limit and operationId (from the OpenAPI document, the names clients
 *    and the audit log use), decided on the route the router matched, never on the raw URL.
 * 2. Connections: at most CAS_MAX_CONNECTIONS_PER_ADDRESS per client address (503 beyond).
 * 3. `onRequest`: security headers (on the Kubernetes API path a sandboxing CSP) and the request id; on
 *    routes that take `x-cluster-name`, `?cluster=` in its place (src/clusters/target-cluster.ts); the
 *    drain (503 once shutting down; streams end); the audit clock; cookies, CORS; authentication (before
 *    any body is read; the Kubernetes API path takes `Authorization` only and refuses with a `Status`).
 *    WebSocket upgrades (the terminal) bypass Fastify: the server's `upgrade` event goes to TerminalService.
 * 4. Body: JSON and the Kubernetes patch types, parsed as they arrive with the nesting bounded; YAML
 *    (apply) as text for the route's bounded parse; on the Kubernetes API path every body passes on unread.
 * 5. `onSend`/`onResponse`: audit rows, request metrics.
 * 6. Errors: one path, Nest's exception filter, which Nest also makes Fastify's error handler.
 */
/** A route as the router serves it. */
export interface ServedRoute {
  method: string;
  url: string;
  config: Readonly<Record<string, unknown>>;
}

@Injectable()
export class HttpEdge {
  /** Every route the router serves (Fastify's automatic HEAD routes included), for the tests that walk them. */
  readonly routes: ServedRoute[] = [];
  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly credentials: CredentialsService,
    @InjectRepository(UserEntity) private readonly users: Repository<UserEntity>,
    private readonly audit: AuditService,
    private readonly streams: StreamOwner,
    private readonly terminal: TerminalService,
  ) {}

  /** Registers everything on the app's Fastify instance; call before `app.init()`. */
  async register(app: NestFastifyApplication, document: OpenAPIObject): Promise<void> {
    const fastify = app.getHttpAdapter().getInstance();
    const limits = this.config.limits;

    // 1. Routes.
    const operations = operationTable(document);
    fastify.addHook('onRoute', (route) => {
      route.bodyLimit ??=
        route.url.startsWith(RESOURCE_ROUTE) || route.url === APPLY_ROUTE || route.url.startsWith(HELM_ROUTES)
          ? RESOURCE_BODY_LIMIT
          : ADMIN_BODY_LIMIT;
      const methods = Array.isArray(route.method) ? route.method : [route.method];
      // Fastify's automatic HEAD route of a GET is the same operation.
      const method = methods[0] === 'HEAD' ? 'GET' : methods[0];
      const facts: Record<string, unknown> = { ...operations.get(`${method} ${routeKey(route.url)}`) };
      // The Kubernetes API path passes its body and query on to the cluster, which judges them; its
      // refusals are `Status` objects, and what it serves is sandboxed.
      if (route.url.startsWith(RAW_BODY_ROUTES)) {
        Object.assign(facts, {
          [RAW_BODY_CONFIG]: true,
          acceptsQuery: true,
          [REFUSAL_BODY_CONFIG]: kubeRefusal,
          [SECURITY_HEADERS_CONFIG]: KUBE_PATH_SECURITY_HEADERS,
        });
      }
      route.config = { ...(route.config as object), ...facts } as typeof route.config;
      for (const method of methods) {
        this.routes.push({ method, url: route.url, config: (route.config ?? {}) as Record<string, unknown> });
      }
    });

    // 2. Connections.
    capConnectionsPerAddress(fastify, limits.maxConnectionsPerAddress);

    // 3. Requests.
    fastify.addHook('onRequest', (request, reply, done) => {
      const config = request.routeOptions.config as { [SECURITY_HEADERS_CONFIG]?: Record<string, string> } | undefined;
      reply.headers(config?.[SECURITY_HEADERS_CONFIG] ?? SECURITY_HEADERS).header('x-request-id', request.id);
      if ((config as RouteFacts | undefined)?.takesCluster) takeClusterFromQuery(request);
      done();
    });
    // From its head to its end an answer owns the socket: an error there can no longer be a status line.
    fastify.addHook('onSend', (request, _reply, payload, done) => {
      answeringSockets.add(request.raw.socket);
      done(null, payload);
    });
    fastify.addHook('onResponse', (request, _reply, done) => {
      answeringSockets.delete(request.raw.socket);
      done();
    });
    // SIGTERM: streams end at once, so their clients reconnect to another replica.
    const drain = attachDrain(app, fastify);
    drain.onDrain(() => this.streams.closeAll());
    // WebSocket upgrades (exec, attach, port-forward) never reach Fastify: the terminal answers them all.
    fastify.server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) =>
      this.terminal.handleUpgrade(req, socket, head, drain.isDraining),
    );
    registerAudit(fastify, this.audit);
    await app.register(cookie);
    // Without allowed origins CORS adds nothing to any answer: the plugin is not registered at all.
    if (this.config.corsOrigins.length > 0) {
      await app.register(cors, {
        origin: this.config.corsOrigins,
        credentials: true,
        methods: CORS_METHODS,
        allowedHeaders: CORS_ALLOWED_HEADERS,
        exposedHeaders: CORS_EXPOSED_HEADERS,
        // A console sends a preflight before nearly every call (authorization, x-cluster-name): one per route
        // and method is enough for a while.
        maxAge: this.config.corsMaxAgeSeconds,
      });
    }
    // After cookies (it reads the session cookie) and CORS (its 401 must carry CORS headers), before the body.
    registerAuthentication(fastify, this.credentials, this.users);

    // 4. Bodies.
    fastify.removeAllContentTypeParsers();
    fastify.addContentTypeParser(JSON_TYPES, unlessRawBody(jsonBodyParser(limits.maxJsonDepth)));
    fastify.addContentTypeParser(YAML_TYPES, unlessRawBody(textBodyParser));
    // Chart archives, on the Helm routes only; elsewhere a 415 as for any other type.
    fastify.addContentTypeParser(
      GZIP_TYPES,
      unlessRawBody((request, payload, done) =>
        request.routeOptions.url?.startsWith(HELM_ROUTES)
          ? bytesBodyParser(request, payload, done)
          : rawBodyOnly(request, payload, done),
      ),
    );
    // The Kubernetes API path passes every body on unread; elsewhere any other type is a 415.
    fastify.addContentTypeParser('*', rawBodyOnly);

    // 5. Answers.
    fastify.addHook('onResponse', (request, reply, done) => {
      const url = request.routeOptions?.url;
      const operation = (request.routeOptions?.config as { operationId?: string } | undefined)?.operationId;
      recordHttpRequest(
        url === METRICS_PATH ? 'getServiceMetrics' : (operation ?? (url === undefined ? NO_ROUTE : 'other')),
        request.method,
        reply.statusCode,
        reply.elapsedTime / 1000,
      );
      done();
    });

    // 6. Errors: Nest sets Fastify's error handler to its exception filter (HttpErrorFilter), so what
    // Fastify refuses before any route ran (a body too large, bad JSON) has the service's shape too.
  }
}

type OperationObject = NonNullable<OpenAPIObject['paths'][string]['get']>;

/** `METHOD /path/:param` → what the document the service serves says of the operation. */
function operationTable(document: OpenAPIObject): Map<string, RouteFacts> {
  const operations = new Map<string, RouteFacts>();
  for (const [path, item] of Object.entries(document.paths)) {
    for (const [method, operation] of Object.entries(item as Record<string, OperationObject>)) {
      if (!operation?.operationId) continue;
      const parameters = (operation.parameters ?? []).filter((p) => 'in' in p);
      const acceptsQuery = parameters.some((p) => p.in === 'query');
      const takesCluster = parameters.some((p) => p.in === 'header' && p.name === CLUSTER_HEADER);
      operations.set(`${method.toUpperCase()} ${routeKey(path)}`, {
        operationId: operation.operationId,
        acceptsQuery,
        takesCluster,
      });
    }
  }
  return operations;
}

/** `/a/{x}/`, `/a/:x` and `/a/*` → `/a/{}`. */
function routeKey(path: string): string {
  return path.replace(/\{[^}]+\}|:[A-Za-z0-9_]+|\*$/g, '{}').replace(/\/+$/, '') || '/';
}

/**
 * Caps the open connections of one client address; the one over the cap gets a 503 and is closed. When
 * the service serves TLS itself, connections are counted once the handshake is done, so that the 503
 * goes out encrypted (a plaintext answer on a TLS socket is garbage to the client); connections still
 * in their handshake are bounded by the handshake time-out.
 */
function capConnectionsPerAddress(fastify: FastifyInstance, max: number): void {
  if (max === 0) return;
  const open = new Map<string, number>();
  fastify.server.on(fastify.server instanceof TlsServer ? 'secureConnection' : 'connection', (socket: Socket) => {
    const address = socket.remoteAddress ?? '';
    const count = (open.get(address) ?? 0) + 1;
    open.set(address, count);
    socket.once('close', () => {
      const left = (open.get(address) ?? 1) - 1;
      if (left <= 0) open.delete(address);
      else open.set(address, left);
    });
    if (count <= max) return;
    // An HTTP/2 connection cannot take an HTTP/1.1 answer; one connection carries all of a client's calls anyway.
    if ((socket as TLSSocket).alpnProtocol === 'h2') socket.destroy();
    else rawError(socket, 503, `too many connections from one address (at most ${max})`);
  });
}
