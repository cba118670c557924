import { Module } from '@nestjs/common';
import { ClustersModule } from '../clusters/clusters.module.js';
import { ListsModule } from '../lists/lists.module.js';
import { HelmAccess } from './helm-access.js';
import { HelmController } from './helm.controller.js';
import { HelmReleasesService } from './helm-releases.service.js';

/** Helm releases: read from Helm's storage through the list caches; written by the real Helm CLI. */
@Module({
  imports: [ClustersModule, ListsModule],
  controllers: [HelmController],
  providers: [HelmAccess, HelmReleasesService],
})
export class HelmModule {}
