import { Controller, Get, Param, Query, Req, Res } from '@nestjs/common';
import { ApiOkResponse, ApiParam, ApiProduces, ApiTags } from '@nestjs/swagger';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { Auth, Authenticated } from '../auth/auth.decorators.js';
import { presentedSecret } from '../auth/auth.guard.js';
import type { Caller } from '../access/caller.js';
import { ApiErrors, ResourceResponses } from '../common/api-errors.js';
import { exemptFromIdleTimeout } from '../common/timeouts.js';
import { PodLogQueryDto } from './dto/pod-log-query.dto.js';
import { PodLogsService } from './pod-logs.service.js';
import { refuseHead, sendAnswer } from './resources.controller.js';
import { ApiTargetCluster } from '../clusters/target-cluster.js';

/** Pod logs, streamed from the cluster named in `x-cluster-name`. */
@ApiTags('Resources')
@Controller()
export class LogsController {
  constructor(private readonly logs: PodLogsService) {}

  /**
   * The log of a pod's container as `text/plain`, streamed as the cluster sends it; with
   * `follow=true` the stream stays open and carries new lines as they are written. Needs verb `log`
   * on `pods` (viewers have it). While it runs the caller is re-authorized every 5 s: a revoked
   * session, a disabled user, a deleted key, a lost permission or a changed cluster ends the stream,
   * as does the service shutting down (clients reconnect). Errors of the cluster pass through (400
   * when the pod has several containers and none is named, 404 for an unknown pod).
   */
  @Authenticated()
  @Get('pods/:namespace/:name/log')
  @ApiTargetCluster()
  @ApiParam({ name: 'namespace', type: String, description: 'Namespace of the pod', example: 'default' })
  @ApiParam({ name: 'name', type: String, description: 'Name of the pod', example: 'web-0' })
  @ApiProduces('text/plain', 'application/json')
  @ApiOkResponse({
    description: 'The log text; with `follow=true` a stream that stays open',
    content: { 'text/plain': { schema: { type: 'string' } } },
  })
  @ResourceResponses()
  @ApiErrors(429)
  async getPodLog(
    @Auth() caller: Caller,
    @Req() request: FastifyRequest,
    @Param('namespace') namespace: string,
    @Param('name') name: string,
    @Query() query: PodLogQueryDto,
    @Res() reply: FastifyReply,
  ): Promise<FastifyReply> {
    refuseHead(request);
    const answer = await this.logs.readLog(
      caller,
      presentedSecret(request),
      { cluster: request.headers['x-cluster-name'], namespace, name },
      query,
    );
    if (answer.kind === 'cluster') return sendAnswer(reply, answer.response);
    // A followed log may be quiet for long: the connection's idle time-out must not cut it.
    exemptFromIdleTimeout(request);
    // Fastify writes the head of a streamed reply with its first byte: a followed log that is quiet
    // would leave the client without even a status. 'pipe' comes once every header is set.
    reply.raw.once('pipe', () => {
      if (!reply.raw.headersSent) reply.raw.flushHeaders();
    });
    return reply
      .status(200)
      .header('content-type', answer.contentType)
      .header('cache-control', 'no-store')
      .header('x-accel-buffering', 'no') // a proxy in front must not hold followed lines back
      .send(answer.body);
  }
}
