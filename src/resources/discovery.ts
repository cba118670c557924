import { Injectable, Logger, NotFoundException } from '@nestjs/common';
import type { ClusterConnection } from '../clusters/cluster-connection.js';
import type { ResourceType } from './resource-path.js';
import { UpstreamClient } from './upstream.js';

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

/** Discovery older than this is reloaded on the next use. */
const MAX_AGE_MS = 5 * 60_000;
/** On a miss discovery is reloaded, at most this often per cluster (unknown names cannot cause a storm). */
const MIN_RELOAD_INTERVAL_MS = 1_000;

/** What each cluster serves, from its discovery endpoints; cached per cluster and refreshed on a miss. */
@Injectable()
export class ResourceDiscovery {
  private readonly logger = new Logger(ResourceDiscovery.name);
  private readonly snapshots = new Map<number, Snapshot>();
  private readonly loading = new Map<number, Promise<Snapshot>>();

  constructor(private readonly upstream: UpstreamClient) {}

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
   * Every resource type the cluster serves, from a discovery at most `maxAgeMs` old (concurrent
   * callers share one load): what a console's navigation is built from, so a CRD created a moment
   * ago is listed.
   */
  async list(conn: ClusterConnection, maxAgeMs = MIN_RELOAD_INTERVAL_MS): Promise<ResourceType[]> {
    const cached = this.snapshots.get(conn.clusterId);
    if (cached && cached.generation === conn.generation && Date.now() - cached.loadedAt < maxAgeMs) {
      return cached.types;
    }
    return (await this.load(conn)).types;
  }

  private async snapshot(conn: ClusterConnection): Promise<Snapshot> {
    const cached = this.snapshots.get(conn.clusterId);
    if (cached && cached.generation === conn.generation && Date.now() - cached.loadedAt < MAX_AGE_MS) return cached;
    return this.load(conn);
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
    const core = await this.upstream.getJson<{ versions: string[] }>(conn, '/api');
    const groups = await this.upstream.getJson<{
      groups: Array<{ name: string; preferredVersion: { groupVersion: string; version: string } }>;
    }>(conn, '/apis');
    const lists = await Promise.all([
      ...core.versions.slice(0, 1).map((version) => this.resourcesOf(conn, '', version, `/api/${version}`)),
      ...groups.groups.map((g) =>
        this.resourcesOf(conn, g.name, g.preferredVersion.version, `/apis/${g.preferredVersion.groupVersion}`),
      ),
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
      const list = await this.upstream.getJson<{ resources: APIResource[] }>(conn, path);
      const subresources = new Map<string, string[]>();
      for (const r of list.resources) {
        const [parent, sub] = r.name.split('/', 2);
        if (sub) subresources.set(parent!, [...(subresources.get(parent!) ?? []), sub]);
      }
      return list.resources
        .filter((r) => !r.name.includes('/'))
        .map((r) => ({
          group,
          version,
          plural: r.name,
          kind: r.kind,
          namespaced: r.namespaced,
          verbs: r.verbs,
          shortNames: r.shortNames ?? [],
          categories: r.categories ?? [],
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
