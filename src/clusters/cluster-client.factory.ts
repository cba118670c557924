import {
  ConflictException,
  Inject,
  Injectable,
  Logger,
  NotFoundException,
  OnModuleDestroy,
  ServiceUnavailableException,
} from '@nestjs/common';
import { InjectRepository } from '@nestjs/typeorm';
import { readFileSync } from 'node:fs';
import { KubeConfig } from '@kubernetes/client-node';
import { Agent, type RequestOptions as HttpsRequestOptions } from 'node:https';
import { join } from 'node:path';
import { Repository } from 'typeorm';
import { APP_CONFIG, type AppConfig } from '../config/config.js';
import type { ClusterConnection, ClusterConnections } from './cluster-connection.js';
import { ClusterEntity } from './cluster.entity.js';
import { KubeconfigError, selectContext, type KubeconfigContext } from './kubeconfig.js';
import { SecretBox } from './secret-box.js';

/** The additional data a sealed kubeconfig is bound to. */
export const CONFIG_PURPOSE = 'cas:cluster-config';

/** A stored cluster that cannot be turned into a connection (its config does not open, no service account…). */
export class ClusterUnusableError extends Error {}

type ClusterKey = Pick<ClusterEntity, 'id' | 'generation'>;

interface CacheEntry {
  generation: number;
  connection: Promise<ClusterConnection>;
}

/**
 * The only place that turns a stored cluster into a connection: a keep-alive HTTPS agent carrying
 * the cluster's TLS settings and client certificate, and its credential headers.
 *
 * Connections are cached per cluster and tagged with the cluster's `generation`, which every change
 * of how to connect bumps. Each `forName` reads the cluster's row (an indexed select by name), so a
 * change made through any replica takes effect on the next call on every replica; a replaced
 * connection's agent is retired (idle sockets closed at once, busy ones when their response ends).
 */
@Injectable()
export class ClusterClientFactory implements ClusterConnections, OnModuleDestroy {
  private readonly logger = new Logger(ClusterClientFactory.name);
  private readonly cache = new Map<number, CacheEntry>();

  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    @InjectRepository(ClusterEntity) private readonly clusters: Repository<ClusterEntity>,
    private readonly secretBox: SecretBox,
  ) {}

  async forName(name: string): Promise<ClusterConnection> {
    // On every resource call: the row is what makes a change on any replica visible at once, so keep it lean.
    const cluster = await this.clusters
      .createQueryBuilder('c')
      .select(['c.id AS id', 'c.enabled AS enabled', 'c.generation AS generation'])
      .where('c.name = :name', { name })
      .getRawOne<{ id: number; enabled: boolean | number; generation: number }>();
    if (!cluster) throw new NotFoundException(`cluster '${name}' not found`);
    if (!cluster.enabled) throw new ConflictException(`cluster '${name}' is disabled`);
    try {
      return await this.connect(cluster);
    } catch (error) {
      if (error instanceof ClusterUnusableError) {
        throw new ServiceUnavailableException(`cluster '${name}' cannot be used: ${error.message}`);
      }
      throw error;
    }
  }

  /** The connection for a cluster at its current generation; builds (and caches) it on a miss. */
  connect(cluster: ClusterKey): Promise<ClusterConnection> {
    const cached = this.cache.get(cluster.id);
    // Generations only grow: a newer cached connection also serves a caller that read an older row.
    if (cached && cached.generation >= cluster.generation) return cached.connection;
    const connection = this.build(cluster.id);
    this.cache.set(cluster.id, { generation: cluster.generation, connection });
    connection.catch(() => {
      if (this.cache.get(cluster.id)?.connection === connection) this.cache.delete(cluster.id);
    });
    if (cached) void cached.connection.then((c) => retire(c.agent)).catch(() => undefined);
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
    if (cached) void cached.connection.then((c) => retire(c.agent)).catch(() => undefined);
  }

  onModuleDestroy(): void {
    for (const { connection } of this.cache.values()) {
      void connection.then((c) => c.agent.destroy()).catch(() => undefined);
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
    const connection = row.inCluster ? this.inClusterConnection(row) : await this.kubeconfigConnection(row);
    this.logger.debug(`connection to cluster '${row.name}' (generation ${row.generation}) built`);
    return connection;
  }

  /**
   * A stored kubeconfig's connection. Our own validation decided what the kubeconfig may contain;
   * client-node's KubeConfig then turns the selected context into TLS material and credentials.
   */
  private async kubeconfigConnection(row: ClusterEntity): Promise<ClusterConnection> {
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
    const { cluster, user } = context;
    const kubeConfig = new KubeConfig();
    kubeConfig.loadFromOptions({
      clusters: [
        {
          name: 'cluster',
          server: cluster.server,
          caData: cluster.certificateAuthorityData,
          skipTLSVerify: cluster.insecureSkipTlsVerify,
          tlsServerName: cluster.tlsServerName,
        },
      ],
      users: [
        {
          name: 'user',
          token: user.token,
          certData: user.clientCertificateData,
          keyData: user.clientKeyData,
          username: user.username,
          password: user.password,
        },
      ],
      contexts: [{ name: 'context', cluster: 'cluster', user: 'user' }],
      currentContext: 'context',
    });
    const tls: HttpsRequestOptions = {};
    await kubeConfig.applyToHTTPSOptions(tls);
    const agent = new Agent({
      keepAlive: true,
      ca: tls.ca,
      cert: tls.cert,
      key: tls.key,
      ...(cluster.tlsServerName ? { servername: cluster.tlsServerName } : {}),
      rejectUnauthorized: !cluster.insecureSkipTlsVerify,
    });
    const headers: Record<string, string> = {};
    const authorization = (tls.headers as Record<string, string> | undefined)?.Authorization;
    if (authorization) headers.authorization = authorization;
    else if (tls.auth) headers.authorization = `Basic ${Buffer.from(tls.auth).toString('base64')}`;
    return {
      clusterId: row.id,
      clusterName: row.name,
      generation: row.generation,
      impersonate: row.impersonate,
      server: new URL(cluster.server),
      agent,
      authHeaders: () => ({ ...headers }),
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
    const agent = new Agent({ keepAlive: true, ca, rejectUnauthorized: true });
    return {
      clusterId: row.id,
      clusterName: row.name,
      generation: row.generation,
      impersonate: row.impersonate,
      server: new URL(inClusterServer),
      agent,
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

/** Stops an agent from keeping sockets: idle ones close now, busy ones when their response ends. */
function retire(agent: Agent): void {
  agent.keepSocketAlive = () => false;
  for (const sockets of Object.values(agent.freeSockets)) for (const socket of sockets ?? []) socket.destroy();
}
