import { BadRequestException, ConflictException, Inject, Injectable, Logger, NotFoundException } from '@nestjs/common';
import { InjectRepository } from '@nestjs/typeorm';
import { EntityManager, Repository } from 'typeorm';
import { type Caller, describeCaller } from '../access/caller.js';
import { APP_CONFIG, type AppConfig } from '../config/config.js';
import { isUniqueViolation, Transactions } from '../database/transactions.js';
import { isIP } from 'node:net';
import { refusedAddress } from './address-policy.js';
import { ClusterClientFactory, CONFIG_PURPOSE } from './cluster-client.factory.js';
import { ClusterHealthService } from './cluster-health.service.js';
import { ClusterEntity } from './cluster.entity.js';
import type { CreateClusterDto, ImportClustersDto, UpdateClusterDto } from './dto/cluster-requests.dto.js';
import type {
  AvailableClusterDto,
  ClusterCreatedDto,
  ClusterDto,
  ClusterMessageDto,
  ClustersImportedDto,
} from './dto/cluster.dto.js';
import {
  allContexts,
  KubeconfigError,
  selectContext,
  toStoredKubeconfig,
  type KubeconfigContext,
} from './kubeconfig.js';
import { SecretBox } from '../common/secret-box.js';

export const IN_CLUSTER_NAME = 'in-cluster';

/** How a cluster connects, ready to store: a sealed kubeconfig and its server, or in-cluster. */
interface Connection {
  inCluster: boolean;
  configSealed: string | null;
  server: string;
}

/** Who did it, for the log. */
type Actor = Caller | 'environment';

@Injectable()
export class ClustersService {
  private readonly logger = new Logger(ClustersService.name);

  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    @InjectRepository(ClusterEntity) private readonly clusters: Repository<ClusterEntity>,
    private readonly transactions: Transactions,
    private readonly secretBox: SecretBox,
    private readonly factory: ClusterClientFactory,
    private readonly health: ClusterHealthService,
  ) {}

  async listClusters(): Promise<ClusterDto[]> {
    return (await this.clusters.find({ order: { id: 'ASC' } })).map((c) => this.toResponse(c));
  }

  async getCluster(id: number): Promise<ClusterDto> {
    const cluster = await this.clusters.findOne({ where: { id } });
    if (!cluster) throw new NotFoundException(`cluster ${id} not found`);
    return this.toResponse(cluster);
  }

  /** The enabled clusters that `visible` lets through (the caller's rules decide, in the controller). */
  async listAvailableClusters(visible: (cluster: string) => boolean): Promise<AvailableClusterDto[]> {
    const rows = await this.clusters.find({ where: { enabled: true }, order: { name: 'ASC' } });
    return rows
      .filter((c) => visible(c.name))
      .map((c) => ({ name: c.name, version: c.version, isDefault: c.isDefault, status: c.status }));
  }

  async createCluster(dto: CreateClusterDto, actor: Actor): Promise<ClusterCreatedDto> {
    const connection = this.connectionFrom(dto.inCluster ?? false, dto.config);
    const cluster = await this.transactions.run(['clusters'], async (manager) => {
      const isFirst = (await manager.count(ClusterEntity)) === 0;
      const isDefault = isFirst || dto.isDefault === true;
      if (isDefault) await this.clearDefault(manager);
      return this.insert(manager, {
        name: dto.name,
        description: dto.description ?? '',
        metricsURL: dto.metricsURL ?? '',
        impersonate: dto.impersonate ?? false,
        isDefault,
        ...connection,
      });
    });
    this.logger.log(`cluster '${cluster.name}' (${cluster.id}) created by ${this.describe(actor)}`);
    await this.health.refresh(cluster.id);
    return { id: cluster.id, message: `cluster '${cluster.name}' created` };
  }

  async updateCluster(id: number, dto: UpdateClusterDto, actor: Actor): Promise<ClusterMessageDto> {
    // Checked (and sealed) before the transaction: it is the slow part, and needs no lock.
    const connection = dto.config ? this.connectionFrom(false, dto.config) : undefined;
    const { name, reprobe } = await this.transactions.run(['clusters'], async (manager) => {
      const cluster = await manager.findOne(ClusterEntity, { where: { id } });
      if (!cluster) throw new NotFoundException(`cluster ${id} not found`);
      if (dto.isDefault === false && cluster.isDefault) {
        throw new ConflictException(
          `cluster '${cluster.name}' is the default cluster; make another cluster the default instead`,
        );
      }
      if (connection && cluster.inCluster) {
        throw new BadRequestException([
          'config cannot be set on an in-cluster cluster: it uses the pod service account',
        ]);
      }
      const changes: Partial<ClusterEntity> = {};
      if (dto.name !== undefined && dto.name !== cluster.name) changes.name = dto.name;
      if (dto.description !== undefined) changes.description = dto.description;
      if (dto.metricsURL !== undefined && dto.metricsURL !== cluster.metricsURL) {
        Object.assign(changes, {
          metricsURL: dto.metricsURL,
          metricsStatus: 'unreachable',
          metricsError: 'not checked yet',
        });
      }
      if (dto.enabled !== undefined && dto.enabled !== cluster.enabled) changes.enabled = dto.enabled;
      if (dto.impersonate !== undefined && dto.impersonate !== cluster.impersonate)
        changes.impersonate = dto.impersonate;
      if (connection)
        Object.assign(changes, { ...connection, version: '', status: 'unreachable', error: 'not checked yet' });
      const reconnect =
        changes.name !== undefined ||
        changes.enabled !== undefined ||
        changes.impersonate !== undefined ||
        connection !== undefined;
      if (reconnect) changes.generation = cluster.generation + 1;
      if (dto.isDefault === true && !cluster.isDefault) {
        await this.clearDefault(manager);
        changes.isDefault = true;
      }
      if (Object.keys(changes).length === 0) return { name: cluster.name, reprobe: false };
      changes.updatedAt = new Date();
      try {
        await manager.update(ClusterEntity, { id }, changes);
      } catch (error) {
        if (isUniqueViolation(error)) throw new ConflictException(`a cluster named '${dto.name}' already exists`);
        throw error;
      }
      const reprobe = connection !== undefined || changes.enabled === true || changes.metricsURL !== undefined;
      return { name: changes.name ?? cluster.name, reprobe };
    });
    this.logger.log(`cluster '${name}' (${id}) updated by ${this.describe(actor)}`);
    if (reprobe) await this.health.refresh(id);
    return { message: `cluster '${name}' updated` };
  }

  async deleteCluster(id: number, actor: Actor): Promise<ClusterMessageDto> {
    const name = await this.transactions.run(['clusters'], async (manager) => {
      const cluster = await manager.findOne(ClusterEntity, { where: { id } });
      if (!cluster) throw new NotFoundException(`cluster ${id} not found`);
      if (cluster.isDefault) {
        throw new ConflictException(
          `cluster '${cluster.name}' is the default cluster and cannot be deleted; make another cluster the default first`,
        );
      }
      await manager.delete(ClusterEntity, { id });
      return cluster.name;
    });
    this.factory.forget(id);
    this.logger.log(`cluster '${name}' (${id}) deleted by ${this.describe(actor)}`);
    return { message: `cluster '${name}' deleted` };
  }

  /**
   * Initial setup: every context of a kubeconfig becomes a cluster named after it (`current-context`
   * the default), or `inCluster` makes one cluster `in-cluster`. All or nothing, and only while no
   * cluster exists.
   */
  async importClusters(dto: ImportClustersDto, actor: Actor): Promise<ClustersImportedDto> {
    if (dto.inCluster === true && dto.config !== undefined) {
      throw new BadRequestException(['send config or inCluster: true, not both']);
    }
    if (dto.inCluster !== true && !dto.config) {
      throw new BadRequestException(['config (a kubeconfig) is required unless inCluster is true']);
    }
    const planned: Array<Pick<ClusterEntity, 'name' | 'isDefault'> & Connection> = [];
    if (dto.inCluster) {
      planned.push({ name: IN_CLUSTER_NAME, isDefault: true, ...this.connectionFrom(true, undefined) });
    } else {
      const { contexts, currentContext } = this.checked(() => allContexts(dto.config!));
      const defaultName = currentContext ?? contexts[0].name;
      for (const context of contexts) {
        planned.push({ name: context.name, isDefault: context.name === defaultName, ...this.sealed(context) });
      }
    }
    const created = await this.transactions.run(['clusters'], async (manager) => {
      if ((await manager.count(ClusterEntity)) > 0) {
        throw new ConflictException(
          'clusters already exist: import is for initial setup only; add clusters one by one',
        );
      }
      const rows: ClusterEntity[] = [];
      for (const plan of planned) rows.push(await this.insert(manager, { description: '', metricsURL: '', ...plan }));
      return rows;
    });
    this.logger.log(
      `imported ${created.length} cluster(s) (${created.map((c) => c.name).join(', ')}) by ${this.describe(actor)}`,
    );
    await Promise.all(created.map((c) => this.health.refresh(c.id)));
    return {
      message: `imported ${created.length} cluster${created.length === 1 ? '' : 's'}`,
      clusters: created.map((c) => ({ id: c.id, name: c.name, isDefault: c.isDefault })),
    };
  }

  toResponse(cluster: ClusterEntity): ClusterDto {
    return {
      id: cluster.id,
      name: cluster.name,
      description: cluster.description,
      enabled: cluster.enabled,
      inCluster: cluster.inCluster,
      isDefault: cluster.isDefault,
      metricsURL: cluster.metricsURL,
      impersonate: cluster.impersonate,
      config: '',
      version: cluster.version,
      server: cluster.inCluster ? this.config.clusters.inClusterServer : cluster.server,
      status: cluster.enabled ? cluster.status : 'disabled',
      error: cluster.enabled ? cluster.error : null,
      metricsStatus: !cluster.enabled ? 'disabled' : cluster.metricsURL ? cluster.metricsStatus : 'none',
      metricsError: cluster.enabled && cluster.metricsURL ? cluster.metricsError : null,
      createdAt: cluster.createdAt.toISOString(),
      updatedAt: cluster.updatedAt.toISOString(),
    };
  }

  /** Validates what a create (or update) says about connecting; 400 listing each problem. */
  private connectionFrom(inCluster: boolean, config: string | undefined): Connection {
    if (inCluster) {
      if (config) throw new BadRequestException(['config must be empty when inCluster is true']);
      return { inCluster: true, configSealed: null, server: '' };
    }
    if (!config) throw new BadRequestException(['config (a kubeconfig) is required unless inCluster is true']);
    return this.sealed(this.checked(() => selectContext(config)));
  }

  private sealed(context: KubeconfigContext): Connection {
    // A literal address is refused here already; a host name is checked each time it is resolved.
    const host = new URL(context.cluster.server).hostname.replace(/^\[|\]$/g, '');
    const refused = isIP(host)
      ? refusedAddress(host, { allowLinkLocal: this.config.limits.allowLinkLocalClusters })
      : null;
    if (refused) {
      throw new BadRequestException([
        `the server of context '${context.name}' is ${refused}: refused (CAS_CLUSTER_ALLOW_LINK_LOCAL=true allows it)`,
      ]);
    }
    return {
      inCluster: false,
      configSealed: this.secretBox.seal(toStoredKubeconfig(context), CONFIG_PURPOSE),
      server: context.cluster.server,
    };
  }

  private checked<T>(parse: () => T): T {
    try {
      return parse();
    } catch (error) {
      if (error instanceof KubeconfigError) throw new BadRequestException(error.problems);
      throw error;
    }
  }

  /** Must run under the 'clusters' lock: the caller then sets the new default in the same transaction. */
  private async clearDefault(manager: EntityManager): Promise<void> {
    await manager.update(ClusterEntity, { isDefault: true }, { isDefault: false });
  }

  private async insert(
    manager: EntityManager,
    values: Pick<ClusterEntity, 'name' | 'description' | 'metricsURL' | 'isDefault'> &
      Partial<Pick<ClusterEntity, 'impersonate'>> &
      Connection,
  ): Promise<ClusterEntity> {
    const cluster = manager.create(ClusterEntity, {
      ...values,
      enabled: true,
      generation: 1,
      version: '',
      status: 'unreachable',
      error: 'not checked yet',
      metricsStatus: 'unreachable',
      metricsError: 'not checked yet',
      checkedAt: null,
      updatedAt: new Date(),
    });
    try {
      await manager.insert(ClusterEntity, cluster);
    } catch (error) {
      if (isUniqueViolation(error)) throw new ConflictException(`a cluster named '${values.name}' already exists`);
      throw error;
    }
    return cluster;
  }

  private describe(actor: Actor): string {
    return actor === 'environment' ? 'the environment (CAS_BOOTSTRAP_*)' : describeCaller(actor);
  }
}
