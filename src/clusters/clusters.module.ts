import { Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { APP_CONFIG, type AppConfig } from '../config/config.js';
import { ClusterClientFactory } from './cluster-client.factory.js';
import { CLUSTER_CONNECTIONS } from './cluster-connection.js';
import { ClusterHealthService } from './cluster-health.service.js';
import { ClusterEntity } from './cluster.entity.js';
import { ClustersBootstrapService } from './clusters-bootstrap.service.js';
import { AvailableClustersController, ClustersController } from './clusters.controller.js';
import { ClustersService } from './clusters.service.js';
import { SecretBox, secretBoxFromConfig } from './secret-box.js';

@Module({
  imports: [TypeOrmModule.forFeature([ClusterEntity])],
  controllers: [ClustersController, AvailableClustersController],
  providers: [
    { provide: SecretBox, useFactory: (config: AppConfig) => secretBoxFromConfig(config), inject: [APP_CONFIG] },
    ClusterClientFactory,
    { provide: CLUSTER_CONNECTIONS, useExisting: ClusterClientFactory },
    ClusterHealthService,
    ClustersService,
    ClustersBootstrapService,
  ],
  exports: [CLUSTER_CONNECTIONS],
})
export class ClustersModule {}
