import { Module } from '@nestjs/common';
import { AuthModule } from '../auth/auth.module.js';
import { ClustersModule } from '../clusters/clusters.module.js';
import { StreamOwner } from './stream-owner.js';

/** The one owner of long-lived responses (watch, logs). */
@Module({
  imports: [AuthModule, ClustersModule],
  providers: [StreamOwner],
  exports: [StreamOwner],
})
export class StreamsModule {}
