import { Module } from '@nestjs/common';
import { ClustersModule } from '../clusters/clusters.module.js';
import { WatchModule } from '../watch/watch.module.js';
import { ResourceDiscovery } from './discovery.js';
import { ResourcesController } from './resources.controller.js';
import { ResourcesService } from './resources.service.js';
import { UpstreamClient } from './upstream.js';

@Module({
  imports: [ClustersModule, WatchModule],
  controllers: [ResourcesController],
  providers: [ResourcesService, ResourceDiscovery, UpstreamClient],
})
export class ResourcesModule {}
