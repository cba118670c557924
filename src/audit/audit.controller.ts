import { Controller, Get, Param, Query, Res } from '@nestjs/common';
import type { FastifyReply } from 'fastify';
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
  @ApiOkResponse({
    description: 'asciicast v2: a header line, then `[seconds, "o", text]` lines',
    content: { 'application/x-asciicast': { schema: { type: 'string' } } },
  })
  @ApiIdParam("The id of the session's end row")
  @ApiErrors(400, 404)
  async getAuditRecording(
    @Param('id', ParseIdPipe) id: number,
    @Res({ passthrough: true }) reply: FastifyReply,
  ): Promise<string> {
    const recording = await this.audit.getRecording(id);
    // Set on success only: an error (a bad id, 404) must still leave as JSON in the service's shape.
    void reply.type('application/x-asciicast');
    return recording;
  }
}
