import { Body, Controller, Delete, Get, Param, Post, Put } from '@nestjs/common';
import { ApiCreatedResponse, ApiOkResponse, ApiParam, ApiTags } from '@nestjs/swagger';
import { Authorizer } from '../access/authorizer.js';
import { Auth, Authenticated } from '../auth/auth.decorators.js';
import type { Caller } from '../access/caller.js';
import { ApiErrors } from '../common/api-errors.js';
import { ApiIdParam, ParseIdPipe } from '../common/id.pipe.js';
import { ClusterNamespaces } from './cluster-namespaces.js';
import { ClustersService } from './clusters.service.js';
import { CreateClusterDto, ImportClustersDto, UpdateClusterDto } from './dto/cluster-requests.dto.js';
import {
  AvailableClusterDto,
  ClusterCreatedDto,
  ClusterDto,
  ClusterMessageDto,
  ClusterNamespacesDto,
  ClustersImportedDto,
} from './dto/cluster.dto.js';

@ApiTags('Clusters')
@Controller('admin/clusters')
export class ClustersController {
  constructor(private readonly clusters: ClustersService) {}

  /** Lists the registered clusters with their version and health. The stored kubeconfig is never returned (`config` is `""`). */
  @Authenticated({ admin: true })
  @Get()
  @ApiOkResponse({ type: ClusterDto, isArray: true })
  listClusters(): Promise<ClusterDto[]> {
    return this.clusters.listClusters();
  }

  /**
   * Registers a cluster from a kubeconfig (its current or only context; inline credentials only) or
   * as the cluster the service runs in. The first cluster becomes the default.
   */
  @Authenticated({ admin: true })
  @Post()
  @ApiCreatedResponse({ type: ClusterCreatedDto })
  @ApiErrors(400, 409, 413)
  createCluster(@Auth() caller: Caller, @Body() dto: CreateClusterDto): Promise<ClusterCreatedDto> {
    return this.clusters.createCluster(dto, caller);
  }

  /** One registered cluster, as the list shows it. The stored kubeconfig is never returned (`config` is `""`). */
  @Authenticated({ admin: true })
  @Get(':id')
  @ApiIdParam()
  @ApiOkResponse({ type: ClusterDto })
  @ApiErrors(400, 404)
  getCluster(@Param('id', ParseIdPipe) id: number): Promise<ClusterDto> {
    return this.clusters.getCluster(id);
  }

  /** Changes the properties sent, and only those; `config` omitted or `""` keeps the stored kubeconfig. */
  @Authenticated({ admin: true })
  @Put(':id')
  @ApiIdParam()
  @ApiOkResponse({ type: ClusterMessageDto })
  @ApiErrors(400, 404, 409, 413)
  updateCluster(
    @Auth() caller: Caller,
    @Param('id', ParseIdPipe) id: number,
    @Body() dto: UpdateClusterDto,
  ): Promise<ClusterMessageDto> {
    return this.clusters.updateCluster(id, dto, caller);
  }

  /** Deletes a cluster. The default cluster cannot be deleted. */
  @Authenticated({ admin: true })
  @Delete(':id')
  @ApiIdParam()
  @ApiOkResponse({ type: ClusterMessageDto })
  @ApiErrors(400, 404, 409)
  deleteCluster(@Auth() caller: Caller, @Param('id', ParseIdPipe) id: number): Promise<ClusterMessageDto> {
    return this.clusters.deleteCluster(id, caller);
  }

  /**
   * Initial setup: every context of a kubeconfig becomes a cluster named after it (`current-context`
   * the default), or `{inCluster: true}` creates the cluster `in-cluster`. All or nothing; only while
   * no cluster exists. Public while no user exists, then admin only.
   */
  @Authenticated({ admin: true, publicUntilFirstUser: true })
  @Post('import')
  @ApiCreatedResponse({ type: ClustersImportedDto })
  @ApiErrors(400, 409, 413)
  importClusters(@Auth() caller: Caller, @Body() dto: ImportClustersDto): Promise<ClustersImportedDto> {
    return this.clusters.importClusters(dto, caller);
  }
}

@ApiTags('Clusters')
@Controller('clusters')
export class AvailableClustersController {
  constructor(
    private readonly clusters: ClustersService,
    private readonly authorizer: Authorizer,
    private readonly namespaces: ClusterNamespaces,
  ) {}

  /**
   * The enabled clusters the caller has a rule for (an admin: all of them), for a cluster picker:
   * any caller with a role may call it.
   */
  @Authenticated()
  @Get()
  @ApiOkResponse({ type: AvailableClusterDto, isArray: true })
  listAvailableClusters(@Auth() caller: Caller): Promise<AvailableClusterDto[]> {
    return this.clusters.listAvailableClusters((cluster) => this.authorizer.grantsAnythingOn(caller, cluster));
  }

  /**
   * The namespaces of the cluster the caller can reach, each with the verbs it holds there: what a
   * console's namespace picker shows, also to a person who may not list namespaces. The caller's rules
   * decide; on an impersonating cluster the cluster's own RBAC for the person (a SelfSubjectRulesReview
   * per namespace, reused for 5 s) must grant the verb too, on a type the rules cover. Any caller with a
   * rule on the cluster; at most 10,000 namespaces are looked at.
   */
  @Authenticated()
  @Get(':name/namespaces')
  @ApiParam({ name: 'name', type: String, description: 'Name of the cluster', example: 'production' })
  @ApiOkResponse({ type: ClusterNamespacesDto })
  @ApiErrors(400, 404, 409, 502, 504)
  listClusterNamespaces(@Auth() caller: Caller, @Param('name') name: string): Promise<ClusterNamespacesDto> {
    return this.namespaces.list(caller, name);
  }
}
