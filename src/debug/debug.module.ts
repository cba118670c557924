import { Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { AuditModule } from '../audit/audit.module.js';
import { AuthModule } from '../auth/auth.module.js';
import { ClusterEntity } from '../clusters/cluster.entity.js';
import { ClustersModule } from '../clusters/clusters.module.js';
import { StreamsModule } from '../streams/streams.module.js';
import { TerminalModule } from '../terminal/terminal.module.js';
import { DebugController } from './debug.controller.js';
import { DebugService } from './debug.service.js';
import { NodeShellService } from './node-shell.service.js';

/** Ephemeral debug containers and node shells (docs/TERMINAL.md, debugging); the terminal hands node-shell upgrades here. */
@Module({
  imports: [
    TypeOrmModule.forFeature([ClusterEntity]),
    AuthModule,
    ClustersModule,
    StreamsModule,
    AuditModule,
    TerminalModule,
  ],
  controllers: [DebugController],
  providers: [DebugService, NodeShellService],
  exports: [NodeShellService],
})
export class DebugModule {}
