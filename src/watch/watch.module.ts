import { Module } from '@nestjs/common';
import { StreamsModule } from '../streams/streams.module.js';
import { WatchHub } from './watch-hub.js';
import { WatchService } from './watch.service.js';

/** Shared upstream watches and the client streams fed from them. */
@Module({
  imports: [StreamsModule],
  providers: [WatchHub, WatchService],
  exports: [WatchService, WatchHub],
})
export class WatchModule {}
