import {
  BadRequestException,
  ForbiddenException,
  GatewayTimeoutException,
  Inject,
  Injectable,
  NotFoundException,
} from '@nestjs/common';
import type { IncomingMessage } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { Authorizer, type Verb } from '../access/authorizer.js';
import type { Caller } from '../auth/caller.js';
import {
  CLUSTER_CONNECTIONS,
  type ClusterConnection,
  type ClusterConnections,
} from '../clusters/cluster-connection.js';
import { ResourceDiscovery } from './discovery.js';
import type {
  DeleteResourceQueryDto,
  GetResourceQueryDto,
  ListResourcesQueryDto,
  PatchResourceQueryDto,
  WriteResourceQueryDto,
} from './dto/resource-query.dto.js';
import {
  ALL_NAMESPACES,
  deleteOptions,
  parseResourceId,
  patchContentType,
  resourcePath,
  type ResourceType,
  validateName,
  validateNamespace,
} from './resource-path.js';
import { UpstreamClient } from './upstream.js';

/** Where a resource call goes, as the route named it. */
export interface ResourceTarget {
  /** The `x-cluster-name` header. */
  cluster: string | string[] | undefined;
  resource: string;
  namespace: string;
  name?: string;
}

/** The cluster's answer: streamed as it arrives, or (waited deletes) read whole. */
export type ClusterAnswer = IncomingMessage | { statusCode: number; contentType: string; body: Buffer };

interface Resolved {
  conn: ClusterConnection;
  type: ResourceType;
  /** null: cluster-scoped, or all namespaces on list. */
  namespace: string | null;
  name: string | null;
  path: string;
}

const CLUSTER_NAME = /^[\x21-\x7e]{1,253}$/;
/** The service's own top-level path names: a path under them that no route matched is simply unknown. */
const OWN_PATHS = new Set(['admin', 'auth']);
const DEFAULT_DELETE_WAIT_SECONDS = 60;

function query(values: object): URLSearchParams {
  const params = new URLSearchParams();
  for (const [key, value] of Object.entries(values)) if (value !== undefined) params.set(key, String(value));
  return params;
}

function objectBody(body: unknown): Record<string, any> {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) {
    throw new BadRequestException(['body must be a JSON object: the full Kubernetes object']);
  }
  const metadata = (body as { metadata?: unknown }).metadata;
  if (metadata !== undefined && (metadata === null || typeof metadata !== 'object' || Array.isArray(metadata))) {
    throw new BadRequestException(['metadata must be an object']);
  }
  return body as Record<string, any>;
}

@Injectable()
export class ResourcesService {
  constructor(
    @Inject(CLUSTER_CONNECTIONS) private readonly clusters: ClusterConnections,
    private readonly discovery: ResourceDiscovery,
    private readonly upstream: UpstreamClient,
    private readonly authorizer: Authorizer,
  ) {}

  async listResources(caller: Caller, target: ResourceTarget, q: ListResourcesQueryDto): Promise<ClusterAnswer> {
    const r = await this.resolve(caller, target, 'list');
    return this.upstream.send(r.conn, { method: 'GET', path: r.path, query: query(q) });
  }

  async getResource(caller: Caller, target: ResourceTarget, q: GetResourceQueryDto): Promise<ClusterAnswer> {
    const r = await this.resolve(caller, target, 'get');
    return this.upstream.send(r.conn, { method: 'GET', path: r.path, query: query(q) });
  }

  async createResource(caller: Caller, target: ResourceTarget, body: unknown, q: WriteResourceQueryDto) {
    const r = await this.resolve(caller, target, 'create');
    const object = this.withScope(r, objectBody(body));
    return this.upstream.send(r.conn, { method: 'POST', path: r.path, query: query(q), body: json(object) });
  }

  async replaceResource(caller: Caller, target: ResourceTarget, body: unknown, q: WriteResourceQueryDto) {
    const r = await this.resolve(caller, target, 'update');
    const object = this.withScope(r, objectBody(body));
    const metadata = object.metadata ?? {};
    const problems: string[] = [];
    if (metadata.name !== r.name) problems.push(`metadata.name must be '${r.name}', the name in the path`);
    if (typeof metadata.resourceVersion !== 'string' || metadata.resourceVersion === '') {
      problems.push('metadata.resourceVersion is required: send the resourceVersion of the object you read');
    }
    if (problems.length) throw new BadRequestException(problems);
    return this.upstream.send(r.conn, { method: 'PUT', path: r.path, query: query(q), body: json(object) });
  }

  async patchResource(caller: Caller, target: ResourceTarget, body: unknown, q: PatchResourceQueryDto) {
    const contentType = patchContentType(q.patchType);
    const r = await this.resolve(caller, target, 'patch');
    if (body === undefined || body === null || typeof body !== 'object') {
      throw new BadRequestException([
        'body must be the patch: a JSON object, or an array of operations with patchType=json',
      ]);
    }
    const { patchType: _patchType, ...passThrough } = q;
    return this.upstream.send(r.conn, {
      method: 'PATCH',
      path: r.path,
      query: query(passThrough),
      body: json(body),
      contentType,
    });
  }

  async deleteResource(caller: Caller, target: ResourceTarget, q: DeleteResourceQueryDto): Promise<ClusterAnswer> {
    const r = await this.resolve(caller, target, 'delete');
    const options = deleteOptions({
      force: q.force === 'true',
      cascade: q.cascade !== 'false',
      dryRun: q.dryRun === 'All',
    });
    const res = await this.upstream.send(r.conn, { method: 'DELETE', path: r.path, body: json(options) });
    if (q.wait === 'false' || q.dryRun === 'All' || (res.statusCode ?? 500) >= 300) return res;

    const body = await this.upstream.readAll(r.conn, res);
    const answer = { statusCode: 200, contentType: String(res.headers['content-type'] ?? 'application/json'), body };
    const uid = this.upstream.parseJson(r.conn, body, 'the delete')?.metadata?.uid as string | undefined;
    if (!uid) return answer; // a Status: the object is already gone
    await this.waitUntilGone(r, uid, (q.timeoutSeconds ?? DEFAULT_DELETE_WAIT_SECONDS) * 1000);
    return answer;
  }

  /** Polls the cluster itself (never a cache) until the object with this uid is gone; finalizers are left alone. */
  private async waitUntilGone(r: Resolved, uid: string, timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    for (let pause = 100; ; pause = Math.min(pause * 2, 1000)) {
      const res = await this.upstream.send(r.conn, { method: 'GET', path: r.path });
      const body = await this.upstream.readAll(r.conn, res);
      if (res.statusCode === 404) return;
      if (res.statusCode === 200 && this.upstream.parseJson(r.conn, body, 'a read')?.metadata?.uid !== uid) return; // replaced by a new one
      const left = deadline - Date.now();
      if (left <= 0) {
        throw new GatewayTimeoutException(
          `${r.type.plural} '${r.name}' was not gone after ${Math.round(timeoutMs / 1000)} s; it stays marked for deletion on cluster '${r.conn.clusterName}'`,
        );
      }
      await sleep(Math.min(pause, left));
    }
  }

  /**
   * Checks everything that can be checked before the cluster is asked: the caller's role, the
   * header, the path segments; then resolves the cluster, the resource type and the scope.
   */
  private async resolve(caller: Caller, target: ResourceTarget, verb: Verb): Promise<Resolved> {
    if (OWN_PATHS.has(target.resource)) {
      throw new NotFoundException(`no such route under /api/v1/${target.resource}/`);
    }
    const clusterName = target.cluster;
    if (clusterName === undefined || clusterName === '') {
      throw new BadRequestException(['x-cluster-name header is required: name the target cluster']);
    }
    if (typeof clusterName !== 'string' || !CLUSTER_NAME.test(clusterName)) {
      throw new BadRequestException([
        'x-cluster-name must be one cluster name: 1–253 printable characters without spaces',
      ]);
    }
    const attempt = this.authorizer.mayAttempt(caller, verb, clusterName);
    if (!attempt.allowed) throw new ForbiddenException(attempt.reason);
    const { plural, group } = parseResourceId(target.resource);
    validateNamespace(target.namespace);
    if (target.name !== undefined) validateName(target.name);

    const conn = await this.clusters.forName(clusterName);
    const type = await this.discovery.resolve(conn, plural, group);
    const id = type.group ? `${type.plural}.${type.group}` : type.plural;
    const all = target.namespace === ALL_NAMESPACES;
    if (!type.namespaced && !all) {
      throw new BadRequestException([`${id} is cluster-scoped: use '${ALL_NAMESPACES}' in place of the namespace`]);
    }
    if (type.namespaced && all && verb !== 'list') {
      throw new BadRequestException([
        `${id} is namespaced: name a namespace ('${ALL_NAMESPACES}' only lists across all of them)`,
      ]);
    }
    const namespace = type.namespaced && !all ? target.namespace : null;
    this.authorizer.require(caller, { verb, cluster: conn.clusterName, resource: id, namespace });
    const name = target.name ?? null;
    return { conn, type, namespace, name, path: resourcePath(type, namespace, name) };
  }

  /** Create and replace: the namespace comes from the path; apiVersion and kind default to the resource's. */
  private withScope(r: Resolved, object: Record<string, any>): Record<string, any> {
    const metadata = { ...(object.metadata ?? {}) };
    if (r.namespace !== null) {
      if (metadata.namespace === undefined || metadata.namespace === '') metadata.namespace = r.namespace;
      else if (metadata.namespace !== r.namespace) {
        throw new BadRequestException([
          `metadata.namespace '${metadata.namespace}' differs from the namespace in the path '${r.namespace}'`,
        ]);
      }
    } else if (metadata.namespace) {
      throw new BadRequestException([`${r.type.plural} is cluster-scoped: metadata.namespace must be empty`]);
    }
    const apiVersion = r.type.group ? `${r.type.group}/${r.type.version}` : r.type.version;
    return { apiVersion, kind: r.type.kind, ...object, metadata };
  }
}

function json(value: unknown): Buffer {
  return Buffer.from(JSON.stringify(value), 'utf8');
}
