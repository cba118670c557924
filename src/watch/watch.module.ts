import { Module } from '@nestjs/common';
import { AuthModule } from '../auth/auth.module.js';
import { StreamRegistry } from './stream-registry.js';
import { WatchHub } from './watch-hub.js';
import { WatchService } from './watch.service.js';

/** Shared upstream watches and the client streams fed from them. */
@Module({
  imports: [AuthModule],
  providers: [WatchHub, StreamRegistry, WatchService],
  exports: [WatchService, WatchHub, StreamRegistry],
})
export class WatchModule {}
