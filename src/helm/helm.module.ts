import { Module } from '@nestjs/common';
import { ApplyModule } from '../apply/apply.module.js';
import { AuthModule } from '../auth/auth.module.js';
import { ClustersModule } from '../clusters/clusters.module.js';
import { ListsModule } from '../lists/lists.module.js';
import { HelmAccess } from './helm-access.js';
import { HelmController } from './helm.controller.js';
import { HelmOperationsService } from './helm-operations.service.js';
import { HelmReleasesService } from './helm-releases.service.js';
import { HelmRunner } from './helm-runner.js';

/** Helm releases: read from Helm's storage through the list caches; written by the real Helm CLI. */
@Module({
  imports: [ClustersModule, ListsModule, AuthModule, ApplyModule],
  controllers: [HelmController],
  providers: [HelmAccess, HelmReleasesService, HelmRunner, HelmOperationsService],
  exports: [HelmReleasesService, HelmRunner],
})
export class HelmModule {}
