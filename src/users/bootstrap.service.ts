import { ConflictException, Inject, Injectable, Logger, OnApplicationBootstrap } from '@nestjs/common';
import { APP_CONFIG, type AppConfig } from '../config/config.js';
import { UsersService } from './users.service.js';

/** Unattended installs: creates the super user from CAS_BOOTSTRAP_* at start, with the same rules as the route. */
@Injectable()
export class BootstrapUserService implements OnApplicationBootstrap {
  private readonly logger = new Logger(BootstrapUserService.name);

  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly users: UsersService,
  ) {}

  async onApplicationBootstrap(): Promise<void> {
    const { username, password, name } = this.config.bootstrap;
    if (!username || !password) return;
    try {
      await this.users.createSuperUser({ username, password, name });
      this.logger.log(`created super user '${username}' from CAS_BOOTSTRAP_USERNAME`);
    } catch (error) {
      if (error instanceof ConflictException) return; // already bootstrapped: nothing to do
      throw error;
    }
  }
}
