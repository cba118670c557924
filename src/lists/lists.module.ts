import { Module } from '@nestjs/common';
import { ClustersModule } from '../clusters/clusters.module.js';
import { ListCaches } from './list-caches.js';
import { ListsService } from './lists.service.js';
import { WriteMarks } from './write-marks.js';

/** The list caches behind paged list queries and search (CONTRACT.md §13); the list routes stay in resources/. */
@Module({
  imports: [ClustersModule],
  providers: [ListCaches, ListsService, WriteMarks],
  exports: [ListCaches, ListsService, WriteMarks],
})
export class ListsModule {}
