import { Controller, Get } from '@nestjs/common';
import { ApiOkResponse, ApiProperty, ApiServiceUnavailableResponse, ApiTags } from '@nestjs/swagger';
import { HealthCheck, HealthCheckService, TypeOrmHealthIndicator, type HealthCheckResult } from '@nestjs/terminus';
import { Public } from '../auth/auth.decorators.js';

class LivenessDto {
  @ApiProperty({ enum: ['ok'], description: 'Always `ok` while the process serves requests' })
  status: 'ok';
}

@ApiTags('Health')
@Controller()
export class HealthController {
  constructor(
    private readonly health: HealthCheckService,
    private readonly db: TypeOrmHealthIndicator,
  ) {}

  /** Liveness: the process is up. */
  @Public()
  @Get('healthz')
  @ApiOkResponse({ type: LivenessDto })
  getHealth(): LivenessDto {
    return { status: 'ok' };
  }

  /** Readiness: the database answers. */
  @Public()
  @Get('readyz')
  @HealthCheck()
  @ApiServiceUnavailableResponse({ description: 'The database does not answer' })
  getReadiness(): Promise<HealthCheckResult> {
    return this.health.check([() => this.db.pingCheck('database', { timeout: 3000 })]);
  }
}
