import { Controller, Get, Query } from '@nestjs/common';
import { ApiOkResponse, ApiTags } from '@nestjs/swagger';
import { Authenticated } from '../auth/auth.decorators.js';
import { ApiErrors } from '../common/api-errors.js';
import { AuditService } from './audit.service.js';
import { AuditEventListDto, ListAuditEventsQueryDto } from './dto/audit.dto.js';

@ApiTags('Audit')
@Controller('admin/audit')
export class AuditController {
  constructor(private readonly audit: AuditService) {}

  /**
   * The audit log, newest first: every call that changed (or tried to change) state, and every
   * refused one. Filtered by actor, operation, cluster and time (`since` ≤ time < `until`), paged.
   */
  @Authenticated({ admin: true })
  @Get()
  @ApiOkResponse({ type: AuditEventListDto })
  @ApiErrors(400)
  listAuditEvents(@Query() query: ListAuditEventsQueryDto): Promise<AuditEventListDto> {
    return this.audit.listAuditEvents(query);
  }
}
