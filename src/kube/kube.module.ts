import { Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { AuthModule } from '../auth/auth.module.js';
import { ClusterEntity } from '../clusters/cluster.entity.js';
import { ClustersModule } from '../clusters/clusters.module.js';
import { ResourcesModule } from '../resources/resources.module.js';
import { KubeController } from './kube.controller.js';
import { KubeService } from './kube.service.js';
import { StreamsModule } from '../streams/streams.module.js';
import { KubeconfigsController } from './kubeconfigs.controller.js';
import { KubeconfigsService } from './kubeconfigs.service.js';

/** The Kubernetes API through the service (kubectl, client-go, client-node), and the kubeconfigs that point at it. */
@Module({
  imports: [ClustersModule, AuthModule, StreamsModule, ResourcesModule, TypeOrmModule.forFeature([ClusterEntity])],
  controllers: [KubeController, KubeconfigsController],
  providers: [KubeService, KubeconfigsService],
})
export class KubeModule {}
