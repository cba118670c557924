import { Module } from '@nestjs/common';
import { ClustersModule } from '../clusters/clusters.module.js';
import { WatchModule } from '../watch/watch.module.js';
import { ListCaches } from './list-caches.js';
import { ListsService } from './lists.service.js';

/** The list caches behind paged list queries and search, on the watch module's reflectors; the list routes stay in resources/. */
@Module({
  imports: [ClustersModule, WatchModule],
  providers: [ListCaches, ListsService],
  exports: [ListCaches, ListsService],
})
export class ListsModule {}
