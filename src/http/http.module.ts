import { Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { AuditModule } from '../audit/audit.module.js';
import { AuthModule } from '../auth/auth.module.js';
import { StreamsModule } from '../streams/streams.module.js';
import { TerminalModule } from '../terminal/terminal.module.js';
import { UserEntity } from '../users/user.entity.js';
import { HttpEdge } from './edge.js';

@Module({
  imports: [TypeOrmModule.forFeature([UserEntity]), AuthModule, AuditModule, StreamsModule, TerminalModule],
  providers: [HttpEdge],
})
export class HttpModule {}
