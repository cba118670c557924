import { Controller, Get, Header, Param, Query } from '@nestjs/common';
import { ApiOkResponse, ApiTags } from '@nestjs/swagger';
import { Authenticated } from '../auth/auth.decorators.js';
import { ApiErrors } from '../common/api-errors.js';
import { ApiIdParam, ParseIdPipe } from '../common/id.pipe.js';
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

  /**
   * The output of a terminal session (never its input) as an asciicast v2 recording, by the id of the
   * session's end row (its `detail.recording` is true); kept while the row is. Recorded only with
   * `CAS_EXEC_RECORDING=output`, at most 1 MiB per session (then a marker says it was cut).
   */
  @Authenticated({ admin: true })
  @Get(':id/recording')
  @Header('content-type', 'application/x-asciicast')
  @ApiOkResponse({
    description: 'asciicast v2: a header line, then `[seconds, "o", text]` lines',
    content: { 'application/x-asciicast': { schema: { type: 'string' } } },
  })
  @ApiIdParam("The id of the session's end row")
  @ApiErrors(400, 404)
  getAuditRecording(@Param('id', ParseIdPipe) id: number): Promise<string> {
    return this.audit.getRecording(id);
  }
}
