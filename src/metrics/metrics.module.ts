import { Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { ClusterEntity } from '../clusters/cluster.entity.js';
import { DbMetricsSubscriber } from './db-metrics.subscriber.js';
import { MetricsController } from './metrics.controller.js';
import { MetricsService } from './metrics.service.js';
import { MetricsListener } from './service-endpoint.js';

/** Queries of each cluster's Prometheus, and the service's own metrics (the HTTP hook is attached in app.ts). */
@Module({
  imports: [TypeOrmModule.forFeature([ClusterEntity])],
  controllers: [MetricsController],
  providers: [MetricsService, MetricsListener, DbMetricsSubscriber],
  exports: [MetricsListener],
})
export class MetricsModule {}
