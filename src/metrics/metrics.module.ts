import { Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { ClusterEntity } from '../clusters/cluster.entity.js';
import { ClustersModule } from '../clusters/clusters.module.js';
import { MetricsController } from './metrics.controller.js';
import { MetricsService } from './metrics.service.js';

/** Queries of each cluster's Prometheus, through the cluster gateway. */
@Module({
  imports: [TypeOrmModule.forFeature([ClusterEntity]), ClustersModule],
  controllers: [MetricsController],
  providers: [MetricsService],
})
export class MetricsModule {}
