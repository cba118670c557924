import { BadGatewayException, ForbiddenException, Injectable, NotFoundException } from '@nestjs/common';
import { Authorizer, VERBS, type Verb } from '../access/authorizer.js';
import type { Caller } from '../access/caller.js';
import type { ClusterConnection } from '../clusters/cluster-connection.js';
import { clusterNameOf } from '../clusters/cluster-name.js';
import { ClusterAccessReview, type ReviewAttributes } from '../clusters/gateway/access-review.js';
import { ClusterGateway } from '../clusters/gateway/cluster-gateway.js';
import { ResourceDiscovery } from './discovery.js';
import type { ApiResourceDto, ApiResourceListDto, ApiResourceSchemaDto } from './dto/api-resources.dto.js';

/** Verbs of pods' subresources (logs and the terminal), not in discovery's verbs. */
const POD_ONLY_VERBS: ReadonlySet<string> = new Set(['log', 'exec', 'attach', 'portforward']);
import { parseResourceId, resourceIdOf as idOf } from '../k8s/resource-path.js';

type Definitions = Record<string, Record<string, unknown>>;

interface OpenApiDocument {
  generation: number;
  loadedAt: number;
  definitions: Definitions;
  /** `<group>/<version>/<kind>` → definition name, from `x-kubernetes-group-version-kind`. */
  byGvk: Map<string, string>;
  /** The cluster's validator of the document: a refetch of an unchanged one is a 304, not megabytes to parse. */
  etag?: string;
}

/** A cluster's OpenAPI document older than this is fetched again on the next schema request. */
const OPENAPI_MAX_AGE_MS = 10 * 60_000;
/** A type missing from the document refetches it (a CRD created a moment ago), at most this often. */
const OPENAPI_MIN_RELOAD_MS = 2_000;
/** Documents kept (one per cluster, least recently used dropped): a 1.20 cluster's is about 9 MiB parsed. */
const OPENAPI_MAX_CLUSTERS = 8;
/** The largest `/openapi/v2` accepted (1.20 with a few CRDs: ~3 MiB). */
const OPENAPI_MAX_BYTES = 64 * 1024 * 1024;

const gvkKey = (group: string, version: string, kind: string) => `${group}/${version}/${kind}`;

/** What a cluster serves (discovery) and the shape of each type (OpenAPI), for a console's navigation and forms. */
@Injectable()
export class ApiResourcesService {
  /**
   * Parsed `/openapi/v2` definitions per cluster: stale after OPENAPI_MAX_AGE_MS or when the
   * cluster's generation changes (the one invalidation path every replica sees: the cluster row),
   * refetched on a miss at most every OPENAPI_MIN_RELOAD_MS.
   */
  private readonly documents = new Map<number, OpenApiDocument>();
  private readonly loading = new Map<number, Promise<OpenApiDocument>>();

  constructor(
    private readonly gateway: ClusterGateway,
    private readonly review: ClusterAccessReview,
    private readonly discovery: ResourceDiscovery,
    private readonly authorizer: Authorizer,
  ) {}

  async listApiResources(caller: Caller, clusterName: string, namespace?: string): Promise<ApiResourceListDto> {
    const conn = await this.connect(caller, clusterName, { verb: 'get', path: '/apis' });
    const types = await this.discovery.list(conn);
    const ns = namespace ?? null;
    const resources: ApiResourceDto[] = types.map((t) => {
      const id = idOf(t);
      const served = VERBS.filter((v) => (POD_ONLY_VERBS.has(v) ? id === 'pods' : t.verbs.includes(v)));
      return {
        id,
        name: t.plural,
        group: t.group,
        version: t.version,
        kind: t.kind,
        namespaced: t.namespaced,
        verbs: t.verbs,
        shortNames: t.shortNames ?? [],
        categories: t.categories ?? [],
        subresources: t.subresources ?? [],
        allowedVerbs: served.filter(
          (verb: Verb) =>
            this.authorizer.can(caller, {
              verb,
              cluster: conn.clusterName,
              resource: id,
              namespace: t.namespaced ? ns : null,
            }).allowed,
        ),
      };
    });
    return { cluster: conn.clusterName, namespace: ns, resources };
  }

  async getApiResourceSchema(caller: Caller, clusterName: string, resource: string): Promise<ApiResourceSchemaDto> {
    const { plural, group } = parseResourceId(resource);
    const conn = await this.connect(caller, clusterName, { verb: 'get', path: '/openapi/v2' });
    const type = await this.discovery.resolve(conn, plural, group);
    const key = gvkKey(type.group, type.version, type.kind);
    let doc = await this.document(conn);
    if (!doc.byGvk.has(key) && Date.now() - doc.loadedAt >= OPENAPI_MIN_RELOAD_MS) doc = await this.load(conn);
    const definition = doc.byGvk.get(key);
    if (!definition) {
      throw new NotFoundException(
        `cluster '${conn.clusterName}' publishes no OpenAPI schema for ${idOf(type)} (${type.kind}, ${key}) yet`,
      );
    }
    return {
      id: idOf(type),
      group: type.group,
      version: type.version,
      kind: type.kind,
      definition,
      schema: doc.definitions[definition]!,
      definitions: referenced(doc.definitions, definition),
    };
  }

  /**
   * The cluster, once the caller may use it at all: the types a cluster serves and their shapes are not
   * its content. They come from caches the service reads for itself; on an impersonating cluster the
   * cluster is asked too whether the person may read them (`question`).
   */
  private async connect(caller: Caller, name: string, question: ReviewAttributes): Promise<ClusterConnection> {
    const clusterName = clusterNameOf(name);
    const attempt = this.authorizer.mayAttempt(caller, 'get', clusterName);
    if (!attempt.allowed) throw new ForbiddenException(attempt.reason);
    const cluster = await this.gateway.clientFor(caller, clusterName);
    const refused = await this.review.check(cluster, question);
    if (refused) throw new ForbiddenException(refused);
    return cluster.conn;
  }

  private async document(conn: ClusterConnection): Promise<OpenApiDocument> {
    const cached = this.documents.get(conn.clusterId);
    if (cached && cached.generation === conn.generation && Date.now() - cached.loadedAt < OPENAPI_MAX_AGE_MS) {
      this.documents.delete(conn.clusterId); // most recently used last
      this.documents.set(conn.clusterId, cached);
      return cached;
    }
    return this.load(conn);
  }

  /** One load at a time per cluster; concurrent callers share it. */
  private load(conn: ClusterConnection): Promise<OpenApiDocument> {
    const inFlight = this.loading.get(conn.clusterId);
    if (inFlight) return inFlight;
    const promise = this.fetch(conn, this.documents.get(conn.clusterId))
      .then((doc) => {
        this.documents.delete(conn.clusterId);
        this.documents.set(conn.clusterId, doc);
        while (this.documents.size > OPENAPI_MAX_CLUSTERS) this.documents.delete(this.documents.keys().next().value!);
        return doc;
      })
      .finally(() => this.loading.delete(conn.clusterId));
    this.loading.set(conn.clusterId, promise);
    return promise;
  }

  /**
   * The cluster's document, or `previous` again when the cluster says it has not changed: a type that
   * publishes no schema (a CRD without one) asks again every OPENAPI_MIN_RELOAD_MS, and each ask must
   * not cost a document of megabytes read and parsed.
   */
  private async fetch(conn: ClusterConnection, previous: OpenApiDocument | undefined): Promise<OpenApiDocument> {
    // Shared by every caller of this cluster: read as the service itself.
    const cluster = this.gateway.asService(conn);
    const reusable = previous?.etag !== undefined && previous.generation === conn.generation ? previous : undefined;
    const res = await cluster.send({ method: 'GET', path: '/openapi/v2', ifNoneMatch: reusable?.etag });
    if (res.statusCode === 304 && reusable) {
      await cluster.read(res, 1024); // no body: read to the end so the connection is reused
      return { ...reusable, loadedAt: Date.now() };
    }
    const body = await cluster.read(res, OPENAPI_MAX_BYTES);
    if (res.statusCode !== 200) {
      throw new BadGatewayException(`${cluster.target} answered ${res.statusCode} to GET /openapi/v2`);
    }
    const definitions = (cluster.parse(body, 'GET /openapi/v2') as { definitions?: Definitions }).definitions;
    if (!definitions || typeof definitions !== 'object') {
      throw new BadGatewayException(`cluster '${conn.clusterName}' sent an OpenAPI document without definitions`);
    }
    const byGvk = new Map<string, string>();
    for (const [name, def] of Object.entries(definitions)) {
      const gvks = def['x-kubernetes-group-version-kind'];
      if (!Array.isArray(gvks)) continue;
      for (const g of gvks as Array<{ group?: string; version?: string; kind?: string }>) {
        if (typeof g?.kind === 'string' && typeof g.version === 'string') {
          const key = gvkKey(g.group ?? '', g.version, g.kind);
          // The same kind can appear twice (e.g. DeleteOptions in every group): the first wins, stably.
          if (!byGvk.has(key)) byGvk.set(key, name);
        }
      }
    }
    const etag = res.headers.etag;
    return {
      generation: conn.generation,
      loadedAt: Date.now(),
      definitions,
      byGvk,
      etag: typeof etag === 'string' ? etag : undefined,
    };
  }
}

/** Every definition reachable from `root` through `$ref: '#/definitions/<name>'` (root excluded). */
function referenced(definitions: Definitions, root: string): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  const seen = new Set([root]);
  const queue: unknown[] = [definitions[root]];
  while (queue.length) {
    const node = queue.pop();
    if (Array.isArray(node)) queue.push(...node);
    else if (node && typeof node === 'object') {
      for (const [key, value] of Object.entries(node)) {
        if (key === '$ref' && typeof value === 'string' && value.startsWith('#/definitions/')) {
          const name = value.slice('#/definitions/'.length);
          if (!seen.has(name) && definitions[name]) {
            seen.add(name);
            out[name] = definitions[name];
            queue.push(definitions[name]);
          }
        } else if (typeof value === 'object') queue.push(value);
      }
    }
  }
  return out;
}
