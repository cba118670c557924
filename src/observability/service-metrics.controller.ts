import { Controller, Get, Headers, HttpException, Inject, NotFoundException, Res } from '@nestjs/common';
import { ApiExcludeController } from '@nestjs/swagger';
import type { FastifyReply } from 'fastify';
import { Public } from '../auth/auth.decorators.js';
import { APP_CONFIG, type AppConfig } from '../config/config.js';
import { carriesToken } from './service-endpoint.js';
import { exposition } from './service-metrics.js';

/**
 * `GET /metrics` on the main port when CAS_METRICS_TOKEN is set, to bearers of that token only (a
 * scraper, not a user of the API: it is left out of the OpenAPI document).
 */
@ApiExcludeController()
@Controller()
export class ServiceMetricsController {
  constructor(@Inject(APP_CONFIG) private readonly config: AppConfig) {}

  @Public()
  @Get('metrics')
  async getServiceMetrics(
    @Headers('authorization') authorization: string | undefined,
    @Res() reply: FastifyReply,
  ): Promise<FastifyReply> {
    const token = this.config.metrics.token;
    if (token === undefined) throw new NotFoundException('Cannot GET /metrics');
    if (!carriesToken(authorization, token)) {
      reply.header('www-authenticate', 'Bearer realm="metrics"');
      throw new HttpException('GET /metrics needs the metrics token: Authorization: Bearer <CAS_METRICS_TOKEN>', 401);
    }
    const { contentType, body } = await exposition();
    return reply.header('content-type', contentType).header('cache-control', 'no-store').send(body);
  }
}
