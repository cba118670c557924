import { Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { AuditEventEntity } from './audit-event.entity.js';
import { AuditRetentionService } from './audit-retention.service.js';
import { AuditController } from './audit.controller.js';
import { AuditService } from './audit.service.js';

/** The audit log: the hook that records calls (see audit.hook.ts), its storage, the list route, retention. */
@Module({
  imports: [TypeOrmModule.forFeature([AuditEventEntity])],
  controllers: [AuditController],
  providers: [AuditService, AuditRetentionService],
  exports: [AuditService],
})
export class AuditModule {}
