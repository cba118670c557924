import { Module } from '@nestjs/common';
import { AuthModule } from '../auth/auth.module.js';
import { ClustersModule } from '../clusters/clusters.module.js';
import { KubeController } from './kube.controller.js';
import { KubeService } from './kube.service.js';

/** The Kubernetes API through the service (kubectl, client-go, client-node), and the kubeconfigs that point at it. */
@Module({
  imports: [ClustersModule, AuthModule],
  controllers: [KubeController],
  providers: [KubeService],
})
export class KubeModule {}
