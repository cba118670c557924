import { Module } from '@nestjs/common';
import { AuthModule } from '../auth/auth.module.js';
import { ClustersModule } from '../clusters/clusters.module.js';
import { StreamsModule } from '../streams/streams.module.js';
import { WatchModule } from '../watch/watch.module.js';
import { ListsModule } from '../lists/lists.module.js';
import { TypeOrmModule } from '@nestjs/typeorm';
import { ClusterEntity } from '../clusters/cluster.entity.js';
import { AccessController } from './access.controller.js';
import { SearchController } from './search.controller.js';
import { SearchService } from './search.service.js';
import { RouteAccess } from './route-access.js';
import { ApiResourcesController } from './api-resources.controller.js';
import { ApiResourcesService } from './api-resources.service.js';
import { ResourceDiscovery } from './discovery.js';
import { LogsController } from './logs.controller.js';
import { PodLogsService } from './pod-logs.service.js';
import { ResourcesController } from './resources.controller.js';
import { ResourcesService } from './resources.service.js';
import { SubresourcesController } from './subresources.controller.js';
import { SubresourcesService } from './subresources.service.js';

@Module({
  imports: [ClustersModule, AuthModule, WatchModule, StreamsModule, ListsModule, TypeOrmModule.forFeature([ClusterEntity])],
  // Search and can-i resolve each type as the resource routes do: they live with them.
  controllers: [
    ResourcesController,
    LogsController,
    ApiResourcesController,
    SubresourcesController,
    SearchController,
    AccessController,
  ],
  providers: [
    ResourcesService,
    ResourceDiscovery,
    PodLogsService,
    ApiResourcesService,
    SubresourcesService,
    SearchService,
    RouteAccess,
  ],
  exports: [ResourcesService, ResourceDiscovery],
})
export class ResourcesModule {}
