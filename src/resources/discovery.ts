import { BadGatewayException, Injectable, Logger, NotFoundException } from '@nestjs/common';
import type { ClusterConnection } from '../clusters/cluster-connection.js';
import type { ResourceType } from '../k8s/resource-path.js';
import { ClusterGateway } from '../clusters/gateway/cluster-gateway.js';

interface APIResource {
  name: string;
  kind: string;
  namespaced: boolean;
  verbs: string[];
  shortNames?: string[];
  categories?: string[];
}

interface Snapshot {
  generation: number;
  loadedAt: number;
  /** In preference order: the core group first, then groups in the order the cluster lists them. */
  types: ResourceType[];
}

/** A version or group as discovery names them: they become upstream path segments. */
const SEGMENT = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;
const GROUP = /^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/;

/** Discovery older than this is reloaded on the next use. */
const MAX_AGE_MS = 5 * 60_000;
/** On a miss discovery is reloaded, at most this often per cluster (unknown names cannot cause a storm). */
const MIN_RELOAD_INTERVAL_MS = 1_000;

/**
 * What each cluster serves, from its discovery endpoints; cached per cluster and refreshed on a miss.
 * Shared by every caller, so it is read with the service's own identity (a person on an impersonating
 * cluster may not be allowed discovery; what each caller may do with a type is decided per call).
 */
@Injectable()
export class ResourceDiscovery {
  private readonly logger = new Logger(ResourceDiscovery.name);
  private readonly snapshots = new Map<number, Snapshot>();
  private readonly loading = new Map<number, Promise<Snapshot>>();

  constructor(private readonly gateway: ClusterGateway) {}

  /** Resolves `<plural>` or `<plural>.<group>` on the cluster; 404 when it does not serve it. */
  async resolve(conn: ClusterConnection, plural: string, group: string | undefined): Promise<ResourceType> {
    let snapshot = await this.snapshot(conn);
    let found = find(snapshot, plural, group);
    if (!found && Date.now() - snapshot.loadedAt >= MIN_RELOAD_INTERVAL_MS) {
      snapshot = await this.load(conn);
      found = find(snapshot, plural, group);
    }
    if (!found) {
      const id = group === undefined ? plural : `${plural}.${group}`;
      throw new NotFoundException(`cluster '${conn.clusterName}' does not serve a resource type '${id}'`);
    }
    return found;
  }

  /**
   * The type of a document's `apiVersion` and `kind` (what kubectl's REST mapper finds): from the cached
   * discovery (refreshed on a miss, as `resolve`), else from the discovery of that exact group version
   * (a version other than the group's preferred one). 404 when the cluster does not serve it; the type
   * carries the document's version.
   */
  async resolveKind(conn: ClusterConnection, group: string, version: string, kind: string): Promise<ResourceType> {
    const notServed = () =>
      new NotFoundException(
        `cluster '${conn.clusterName}' does not serve kind '${kind}' in '${group ? `${group}/` : ''}${version}'`,
      );
    if ((group !== '' && !GROUP.test(group)) || !SEGMENT.test(version)) throw notServed();
    const match = (types: ResourceType[]) => types.find((t) => t.group === group && t.kind === kind);
    let snapshot = await this.snapshot(conn);
    let found = match(snapshot.types);
    if (!found && Date.now() - snapshot.loadedAt >= MIN_RELOAD_INTERVAL_MS) {
      snapshot = await this.load(conn);
      found = match(snapshot.types);
    }
    if (found?.version !== version) {
      found = match(
        await this.resourcesOf(conn, group, version, group ? `/apis/${group}/${version}` : `/api/${version}`),
      );
    }
    if (!found) throw notServed();
    return found;
  }

  /**
   * Every resource type the cluster serves, from a discovery at most `maxAgeMs` old (concurrent
   * callers share one load): what a console's navigation is built from, so a CRD created a moment
   * ago is listed.
   */
  async list(conn: ClusterConnection, maxAgeMs = MIN_RELOAD_INTERVAL_MS): Promise<ResourceType[]> {
    return (this.cached(conn, maxAgeMs) ?? (await this.load(conn))).types;
  }

  /** The cluster's discovery, if it was loaded for the connection's generation less than `maxAgeMs` ago. */
  private cached(conn: ClusterConnection, maxAgeMs: number): Snapshot | undefined {
    const cached = this.snapshots.get(conn.clusterId);
    return cached && cached.generation === conn.generation && Date.now() - cached.loadedAt < maxAgeMs
      ? cached
      : undefined;
  }

  private async snapshot(conn: ClusterConnection): Promise<Snapshot> {
    return this.cached(conn, MAX_AGE_MS) ?? this.load(conn);
  }

  /** One load at a time per cluster; concurrent callers share it. */
  private load(conn: ClusterConnection): Promise<Snapshot> {
    const inFlight = this.loading.get(conn.clusterId);
    if (inFlight) return inFlight;
    const promise = this.fetchAll(conn)
      .then((types) => {
        const snapshot = { generation: conn.generation, loadedAt: Date.now(), types };
        this.snapshots.set(conn.clusterId, snapshot);
        return snapshot;
      })
      .finally(() => this.loading.delete(conn.clusterId));
    this.loading.set(conn.clusterId, promise);
    return promise;
  }

  private async fetchAll(conn: ClusterConnection): Promise<ResourceType[]> {
    // Whatever answers at the server URL may not be a Kubernetes API server: every shape is checked,
    // and anything unexpected is a 502 naming the cluster, never a 500.
    const notKubernetes = (path: string) =>
      new BadGatewayException(
        `cluster '${conn.clusterName}' answered GET ${path} with something other than Kubernetes discovery`,
      );
    const core = await this.gateway.asService(conn).getJson('/api');
    const versions = (core as { versions?: unknown } | null)?.versions;
    if (!Array.isArray(versions) || !versions.every((v) => typeof v === 'string' && SEGMENT.test(v))) {
      throw notKubernetes('/api');
    }
    const apis = await this.gateway.asService(conn).getJson('/apis');
    const groups = (apis as { groups?: unknown } | null)?.groups;
    if (!Array.isArray(groups)) throw notKubernetes('/apis');
    const preferred: Array<{ name: string; version: string }> = [];
    for (const g of groups as Array<Record<string, any> | null>) {
      const name: unknown = g?.name;
      const version: unknown = g?.preferredVersion?.version;
      if (typeof name !== 'string' || !GROUP.test(name) || typeof version !== 'string' || !SEGMENT.test(version)) {
        throw notKubernetes('/apis');
      }
      preferred.push({ name, version });
    }
    const lists = await Promise.all([
      ...(versions as string[]).slice(0, 1).map((version) => this.resourcesOf(conn, '', version, `/api/${version}`)),
      ...preferred.map((g) => this.resourcesOf(conn, g.name, g.version, `/apis/${g.name}/${g.version}`)),
    ]);
    const types = lists.flat();
    this.logger.debug(`cluster '${conn.clusterName}': ${types.length} resource types discovered`);
    return types;
  }

  private async resourcesOf(
    conn: ClusterConnection,
    group: string,
    version: string,
    path: string,
  ): Promise<ResourceType[]> {
    try {
      const list = await this.gateway.asService(conn).getJson(path);
      const resources = (list as { resources?: unknown } | null)?.resources;
      if (!Array.isArray(resources)) throw new Error('the answer has no resources list');
      const valid = (resources as Array<Partial<APIResource> | null>).filter(
        (r): r is APIResource =>
          typeof r?.name === 'string' &&
          typeof r.kind === 'string' &&
          typeof r.namespaced === 'boolean' &&
          Array.isArray(r.verbs),
      );
      const subresources = new Map<string, string[]>();
      for (const r of valid) {
        const [parent, sub] = r.name.split('/', 2);
        if (sub) subresources.set(parent!, [...(subresources.get(parent!) ?? []), sub]);
      }
      return valid
        .filter((r) => !r.name.includes('/'))
        .map((r) => ({
          group,
          version,
          plural: r.name,
          kind: r.kind,
          namespaced: r.namespaced,
          verbs: r.verbs,
          shortNames: Array.isArray(r.shortNames) ? r.shortNames : [],
          categories: Array.isArray(r.categories) ? r.categories : [],
          subresources: subresources.get(r.name) ?? [],
        }));
    } catch (error) {
      // An aggregated API that is down must not hide every other resource type.
      this.logger.warn(`cluster '${conn.clusterName}': discovery of ${path} failed: ${(error as Error).message}`);
      return [];
    }
  }
}

function find(snapshot: Snapshot, plural: string, group: string | undefined): ResourceType | undefined {
  return snapshot.types.find((t) => t.plural === plural && (group === undefined || t.group === group));
}
