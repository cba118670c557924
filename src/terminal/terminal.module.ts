import { Module } from '@nestjs/common';
import { AuditModule } from '../audit/audit.module.js';
import { AuthModule } from '../auth/auth.module.js';
import { ClustersModule } from '../clusters/clusters.module.js';
import { StreamsModule } from '../streams/streams.module.js';
import { TerminalController } from './terminal.controller.js';
import { TerminalService } from './terminal.service.js';

/** Exec, attach and port-forward over WebSocket (docs/TERMINAL.md); the edge hands it every upgrade. */
@Module({
  imports: [AuthModule, ClustersModule, StreamsModule, AuditModule],
  controllers: [TerminalController],
  providers: [TerminalService],
  exports: [TerminalService],
})
export class TerminalModule {}
