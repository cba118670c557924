import { Module } from '@nestjs/common';
import { ClustersModule } from '../clusters/clusters.module.js';
import { StreamsModule } from '../streams/streams.module.js';
import { Reflectors } from './reflectors.js';
import { WatchHub } from './watch-hub.js';
import { WatchService } from './watch.service.js';

/** The list-and-watch loops of collections, the shared watches on them, and the client streams fed from them. */
@Module({
  imports: [StreamsModule, ClustersModule],
  providers: [Reflectors, WatchHub, WatchService],
  exports: [WatchService, WatchHub, Reflectors],
})
export class WatchModule {}
