import { Module } from '@nestjs/common';
import { AuthModule } from '../auth/auth.module.js';
import { ClustersModule } from '../clusters/clusters.module.js';
import { StreamsModule } from '../streams/streams.module.js';
import { WatchModule } from '../watch/watch.module.js';
import { ListsModule } from '../lists/lists.module.js';
import { SearchController } from '../lists/search.controller.js';
import { SearchService } from '../lists/search.service.js';
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
  imports: [ClustersModule, AuthModule, WatchModule, StreamsModule, ListsModule],
  // Search (lists/) resolves each type as the resource routes do: it lives with them.
  controllers: [ResourcesController, LogsController, ApiResourcesController, SubresourcesController, SearchController],
  providers: [
    ResourcesService,
    ResourceDiscovery,
    PodLogsService,
    ApiResourcesService,
    SubresourcesService,
    SearchService,
  ],
  // can-i (access/) resolves types and scopes exactly as the routes do.
  exports: [ResourcesService, ResourceDiscovery],
})
export class ResourcesModule {}
