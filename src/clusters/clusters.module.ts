import { Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { APP_CONFIG, type AppConfig } from '../config/config.js';
import { ClusterClientFactory } from './cluster-client.factory.js';
import { ClusterNamespaces } from './cluster-namespaces.js';
import { ClusterHealthService } from './cluster-health.service.js';
import { ClusterEntity } from './cluster.entity.js';
import { ClustersBootstrapService } from './clusters-bootstrap.service.js';
import { AvailableClustersController, ClustersController } from './clusters.controller.js';
import { ClustersService } from './clusters.service.js';
import { ClusterAccessReview } from './gateway/access-review.js';
import { ClusterGateway } from './gateway/cluster-gateway.js';
import { WriteMarks } from './gateway/write-marks.js';
import { SecretBox, secretBoxFromConfig } from '../common/secret-box.js';

@Module({
  imports: [TypeOrmModule.forFeature([ClusterEntity])],
  controllers: [ClustersController, AvailableClustersController],
  providers: [
    { provide: SecretBox, useFactory: (config: AppConfig) => secretBoxFromConfig(config), inject: [APP_CONFIG] },
    ClusterClientFactory,
    ClusterGateway,
    WriteMarks,
    ClusterAccessReview,
    ClusterNamespaces,
    ClusterHealthService,
    ClustersService,
    ClustersBootstrapService,
  ],
  exports: [ClusterGateway, ClusterAccessReview, ClustersService, WriteMarks],
})
export class ClustersModule {}
