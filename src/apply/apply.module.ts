import { Module } from '@nestjs/common';
import { AuthModule } from '../auth/auth.module.js';
import { ClustersModule } from '../clusters/clusters.module.js';
import { ListsModule } from '../lists/lists.module.js';
import { ResourcesModule } from '../resources/resources.module.js';
import { ApplyController } from './apply.controller.js';
import { ApplyService } from './apply.service.js';

@Module({
  imports: [ClustersModule, AuthModule, ResourcesModule, ListsModule],
  controllers: [ApplyController],
  providers: [ApplyService],
  exports: [ApplyService],
})
export class ApplyModule {}
