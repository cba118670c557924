import { Inject, Injectable, Logger, OnModuleDestroy, ServiceUnavailableException } from '@nestjs/common';
import { InjectRepository } from '@nestjs/typeorm';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Repository } from 'typeorm';
import { type Dispatcher, Pool } from 'undici';
import { type AddressPolicy, policyLookup, refusedServer } from './address-policy.js';
import { APP_CONFIG, type AppConfig } from '../config/config.js';
import { LocalWrites } from '../database/local-writes.js';
import type { ClusterConnection } from './cluster-connection.js';
import { requireUsable } from './cluster-name.js';
import { ClusterEntity } from './cluster.entity.js';
import { credentialsOf, KubeconfigError, selectContext, type KubeconfigContext } from './kubeconfig.js';
import { SecretBox } from '../common/secret-box.js';

/** The additional data a sealed kubeconfig is bound to. */
export const CONFIG_PURPOSE = 'cas:cluster-config';

/** A stored cluster that cannot be turned into a connection (its config does not open, no service account…). */
export class ClusterUnusableError extends Error {}

/** What a pool's TLS connections carry (undici passes these to `tls.connect`). */
interface ConnectionTls {
  ca?: string | Buffer;
  cert?: string | Buffer;
  key?: string | Buffer;
  servername?: string;
  rejectUnauthorized: boolean;
}

type ClusterKey = Pick<ClusterEntity, 'id' | 'generation'>;

/**
 * How long a cluster's row, read for a resource call, is trusted: the bound on how late a change made
 * through another replica (config, name, enabled, deletion) is seen. Changes made through this replica
 * are seen by its next call at once (`LocalWrites`).
 */
export const CLUSTER_ROW_TTL_MS = 1000;
/** Unknown names are cached too (as null); past this many names the cache starts over. */
const MAX_CACHED_ROWS = 1000;

interface ClusterRow {
  id: number;
  enabled: boolean | number;
  generation: number;
}

interface CacheEntry {
  generation: number;
  connection: Promise<ClusterConnection>;
}

interface RowEntry {
  row: Promise<ClusterRow | undefined>;
  readAt: number;
}

/** A row read less than CLUSTER_ROW_TTL_MS ago. */
function fresh(entry: RowEntry | undefined, now = Date.now()): entry is RowEntry {
  return entry !== undefined && now - entry.readAt < CLUSTER_ROW_TTL_MS;
}

/** Generations only grow: a newer cached connection also serves a caller that read an older row. */
function serves(cached: CacheEntry, cluster: ClusterKey): boolean {
  return cached.generation >= cluster.generation;
}

/**
 * The only place that turns a stored cluster into a connection: a keep-alive connection pool (undici)
 * carrying the cluster's TLS settings and client certificate, and its credential headers.
 *
 * Connections are cached per cluster and tagged with the cluster's `generation`, which every change
 * of how to connect bumps. `forName` trusts a cluster's row (id, enabled, generation) for at most
 * CLUSTER_ROW_TTL_MS, so a change made through any replica is used within a second on every replica
 * (and at once on the replica that made it: `LocalWrites`); a replaced connection's pool is retired (idle
 * connections closed at once, busy ones when their response ends).
 */
@Injectable()
export class ClusterClientFactory implements OnModuleDestroy {
  private readonly logger = new Logger(ClusterClientFactory.name);
  private readonly cache = new Map<number, CacheEntry>();
  private readonly rows = new Map<string, RowEntry>();

  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    @InjectRepository(ClusterEntity) private readonly clusters: Repository<ClusterEntity>,
    private readonly secretBox: SecretBox,
    localWrites: LocalWrites,
  ) {
    localWrites.subscribe(
      () => this.rows.clear(),
      (table) => table === 'clusters',
    );
  }

  /**
   * The connection for the cluster named in a call: 404 when no cluster has that name, 409 when it is
   * disabled, 503 when its stored configuration cannot be used.
   */
  async forName(name: string): Promise<ClusterConnection> {
    const cluster = await this.row(name);
    requireUsable(name, cluster);
    try {
      return await this.connect(cluster!);
    } catch (error) {
      if (error instanceof ClusterUnusableError) {
        throw new ServiceUnavailableException(`cluster '${name}' cannot be used: ${error.message}`);
      }
      throw error;
    }
  }

  /** The cluster's row, read at most once per CLUSTER_ROW_TTL_MS (concurrent misses share one read). */
  private row(name: string): Promise<ClusterRow | undefined> {
    const now = Date.now();
    const cached = this.rows.get(name);
    if (fresh(cached, now)) return cached.row;
    if (this.rows.size >= MAX_CACHED_ROWS) this.rows.clear();
    const row = this.clusters
      .createQueryBuilder('c')
      .select(['c.id AS id', 'c.enabled AS enabled', 'c.generation AS generation'])
      .where('c.name = :name', { name })
      .getRawOne<ClusterRow>();
    const entry: RowEntry = { row, readAt: now };
    this.rows.set(name, entry);
    row.catch(() => this.rows.get(name) === entry && this.rows.delete(name));
    return row;
  }

  /** The connection for a cluster at its current generation; builds (and caches) it on a miss. */
  connect(cluster: ClusterKey): Promise<ClusterConnection> {
    const cached = this.cache.get(cluster.id);
    if (cached && serves(cached, cluster)) return cached.connection;
    const connection = this.build(cluster.id);
    const entry: CacheEntry = { generation: cluster.generation, connection };
    this.cache.set(cluster.id, entry);
    connection.catch(() => {
      if (this.cache.get(cluster.id) === entry) this.cache.delete(cluster.id);
    });
    if (cached) void cached.connection.then((c) => retire(c.dispatcher)).catch(() => undefined);
    return connection;
  }

  /** Drops the cached connections of clusters other than these (deleted on some replica). */
  keepOnly(ids: Iterable<number>): void {
    const keep = new Set(ids);
    for (const id of [...this.cache.keys()]) if (!keep.has(id)) this.forget(id);
  }

  forget(id: number): void {
    const cached = this.cache.get(id);
    this.cache.delete(id);
    if (cached) void cached.connection.then((c) => retire(c.dispatcher)).catch(() => undefined);
  }

  onModuleDestroy(): void {
    for (const { connection } of this.cache.values()) {
      void connection.then((c) => c.dispatcher.destroy()).catch(() => undefined);
    }
    this.cache.clear();
  }

  private async build(id: number): Promise<ClusterConnection> {
    const row = await this.clusters
      .createQueryBuilder('c')
      .addSelect('c.configSealed')
      .where('c.id = :id', { id })
      .getOne();
    if (!row) throw new ClusterUnusableError('it was deleted');
    // The row may have moved past `generation` meanwhile: the connection says what it was built from,
    // and the cache entry keeps the generation asked for, so the next call builds it again.
    const connection = row.inCluster ? this.inClusterConnection(row) : this.kubeconfigConnection(row);
    this.logger.debug(`connection to cluster '${row.name}' (generation ${row.generation}) built`);
    return connection;
  }

  /**
   * A stored kubeconfig's connection. Our own validation decided what the kubeconfig may contain
   * (inline credentials only); `credentialsOf` turns the selected context into TLS material and the
   * Authorization header.
   */
  private kubeconfigConnection(row: ClusterEntity): ClusterConnection {
    if (!row.configSealed) throw new ClusterUnusableError('it has no stored kubeconfig');
    let context: KubeconfigContext;
    try {
      context = selectContext(this.secretBox.open(row.configSealed, CONFIG_PURPOSE));
    } catch (error) {
      if (error instanceof KubeconfigError) {
        throw new ClusterUnusableError(`its stored kubeconfig is no longer valid: ${error.problems.join('; ')}`);
      }
      throw new ClusterUnusableError(`its stored kubeconfig cannot be decrypted: ${(error as Error).message}`);
    }
    const { cluster } = context;
    const tls = credentialsOf(context);
    const transport = this.transport(new URL(cluster.server), {
      ca: tls.ca,
      cert: tls.cert,
      key: tls.key,
      ...(cluster.tlsServerName ? { servername: cluster.tlsServerName } : {}),
      rejectUnauthorized: !cluster.insecureSkipTlsVerify,
    });
    const headers: Readonly<Record<string, string>> = Object.freeze(
      tls.authorization ? { authorization: tls.authorization } : ({} as Record<string, string>),
    );
    return {
      clusterId: row.id,
      clusterName: row.name,
      generation: row.generation,
      impersonate: row.impersonate,
      ...transport,
      authHeaders: () => headers,
    };
  }

  /**
   * How a connection reaches its server: a keep-alive pool that gives up connecting (TCP and TLS)
   * after the request time-out, or 10 s when that is longer. The address policy is the connection's:
   * a literal address is judged once, here; a host name each time the pool resolves it.
   */
  private transport(
    server: URL,
    tls: ConnectionTls,
  ): Pick<ClusterConnection, 'server' | 'pathPrefix' | 'dispatcher' | 'tls' | 'connectTimeoutMs' | 'refusedAddress'> {
    const policy: AddressPolicy = { allowLinkLocal: this.config.limits.allowLinkLocalClusters };
    const connectTimeoutMs = Math.min(this.config.clusterRequestTimeoutSeconds * 1000, 10_000);
    const lookup = policyLookup(policy) as never;
    const dispatcher = new Pool(server.origin, { connect: { ...tls, lookup, timeout: connectTimeoutMs } });
    return {
      server,
      tls: Object.freeze({ ...tls, lookup }),
      pathPrefix: server.pathname.length > 1 ? server.pathname.replace(/\/+$/, '') : '',
      dispatcher,
      connectTimeoutMs,
      refusedAddress: refusedServer(server, policy) ?? undefined,
    };
  }

  /** The pod's service account: CA read once, token read per request (the kubelet rotates it). */
  private inClusterConnection(row: ClusterEntity): ClusterConnection {
    const { inClusterDir, inClusterServer } = this.config.clusters;
    if (!inClusterServer) {
      throw new ClusterUnusableError(
        'the service does not run in a Kubernetes cluster (KUBERNETES_SERVICE_HOST is not set; CAS_IN_CLUSTER_SERVER can name the API server)',
      );
    }
    const read = (file: string) => {
      try {
        return readFileSync(join(inClusterDir, file), 'utf8');
      } catch (error) {
        throw new ClusterUnusableError(
          `the service account's ${file} cannot be read in ${inClusterDir}: ${(error as NodeJS.ErrnoException).code ?? 'error'}`,
        );
      }
    };
    const ca = read('ca.crt');
    let token = read('token').trim();
    const transport = this.transport(new URL(inClusterServer), { ca, rejectUnauthorized: true });
    return {
      clusterId: row.id,
      clusterName: row.name,
      generation: row.generation,
      impersonate: row.impersonate,
      ...transport,
      authHeaders: () => {
        try {
          token = readFileSync(join(inClusterDir, 'token'), 'utf8').trim() || token;
        } catch {
          // Mid-rotation: keep the last token read.
        }
        return { authorization: `Bearer ${token}` };
      },
    };
  }
}

/** Stops a pool from keeping connections: idle ones close now, busy ones when their response ends. */
function retire(dispatcher: Dispatcher): void {
  void dispatcher.close().catch(() => undefined);
}
