import { Module } from '@nestjs/common';
import { AuthModule } from '../auth/auth.module.js';
import { ClustersModule } from '../clusters/clusters.module.js';
import { ResourceDiscovery } from './discovery.js';
import { LogsController } from './logs.controller.js';
import { PodLogsService } from './pod-logs.service.js';
import { ResourcesController } from './resources.controller.js';
import { ResourcesService } from './resources.service.js';
import { UpstreamClient } from './upstream.js';

@Module({
  imports: [ClustersModule, AuthModule],
  controllers: [ResourcesController, LogsController],
  providers: [ResourcesService, ResourceDiscovery, UpstreamClient, PodLogsService],
})
export class ResourcesModule {}
