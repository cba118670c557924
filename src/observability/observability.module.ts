import { Module } from '@nestjs/common';
import { DbMetricsSubscriber } from './db-metrics.subscriber.js';
import { MetricsListener } from './service-endpoint.js';
import { ServiceMetricsController } from './service-metrics.controller.js';

/** The service's own metrics: the registry, the database timings and the optional metrics port. */
@Module({
  controllers: [ServiceMetricsController],
  providers: [MetricsListener, DbMetricsSubscriber],
  exports: [MetricsListener],
})
export class ObservabilityModule {}
