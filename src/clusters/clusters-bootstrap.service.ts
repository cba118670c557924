import {
  BadRequestException,
  ConflictException,
  Inject,
  Injectable,
  Logger,
  OnApplicationBootstrap,
} from '@nestjs/common';
import { readFile } from 'node:fs/promises';
import { APP_CONFIG, type AppConfig } from '../config/config.js';
import { ClustersService } from './clusters.service.js';

/**
 * Unattended installs: imports CAS_BOOTSTRAP_KUBECONFIG_FILE or the in-cluster cluster at start,
 * with the same rules as the import route (nothing happens once any cluster exists). A file that
 * cannot be read or imported stops the start with a message naming the variable.
 */
@Injectable()
export class ClustersBootstrapService implements OnApplicationBootstrap {
  private readonly logger = new Logger(ClustersBootstrapService.name);

  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly clusters: ClustersService,
  ) {}

  async onApplicationBootstrap(): Promise<void> {
    const { kubeconfigFile, inCluster } = this.config.bootstrap;
    if (!kubeconfigFile && !inCluster) return;
    const variable = kubeconfigFile ? 'CAS_BOOTSTRAP_KUBECONFIG_FILE' : 'CAS_BOOTSTRAP_IN_CLUSTER';
    let config: string | undefined;
    if (kubeconfigFile) {
      try {
        config = await readFile(kubeconfigFile, 'utf8');
      } catch (error) {
        throw new Error(`${variable}: cannot read ${kubeconfigFile} (${(error as NodeJS.ErrnoException).code})`, {
          cause: error,
        });
      }
    }
    try {
      const result = await this.clusters.importClusters(inCluster ? { inCluster: true } : { config }, 'environment');
      this.logger.log(`${variable}: ${result.message}`);
    } catch (error) {
      if (error instanceof ConflictException) return; // clusters exist already: nothing to do
      if (error instanceof BadRequestException) {
        const message = (error.getResponse() as { message?: string | string[] }).message;
        throw new Error(`${variable}: ${([] as string[]).concat(message ?? error.message).join('; ')}`, {
          cause: error,
        });
      }
      throw error;
    }
  }
}
