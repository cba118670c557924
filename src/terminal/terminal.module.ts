import { Module } from '@nestjs/common';
import { AuditModule } from '../audit/audit.module.js';
import { AuthModule } from '../auth/auth.module.js';
import { ClustersModule } from '../clusters/clusters.module.js';
import { StreamsModule } from '../streams/streams.module.js';
import { TerminalController } from './terminal.controller.js';
import { ResumableSessions } from './resumable-sessions.js';
import { SessionForwarding } from './session-forwarding.js';
import { TerminalService } from './terminal.service.js';

/** Exec, attach and port-forward over WebSocket (docs/TERMINAL.md); the edge hands it every upgrade. */
@Module({
  imports: [AuthModule, ClustersModule, StreamsModule, AuditModule],
  controllers: [TerminalController],
  providers: [TerminalService, ResumableSessions, SessionForwarding],
  exports: [TerminalService],
})
export class TerminalModule {}
