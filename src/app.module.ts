import { DynamicModule, Module } from '@nestjs/common';
import { APP_FILTER, APP_PIPE } from '@nestjs/core';
import { AccessModule } from './access/access.module.js';
import { ApplyModule } from './apply/apply.module.js';
import { AuditModule } from './audit/audit.module.js';
import { AuthModule } from './auth/auth.module.js';
import { ClustersModule } from './clusters/clusters.module.js';
import { HttpErrorFilter } from './common/filters/http-exception.filter.js';
import { AppValidationPipe } from './common/strict-input.js';
import type { AppConfig } from './config/config.js';
import { ConfigModule } from './config/config.module.js';
import { DatabaseModule } from './database/database.module.js';
import { DebugModule } from './debug/debug.module.js';
import { ENTITIES } from './entities.js';
import { HealthModule } from './health/health.module.js';
import { HelmModule } from './helm/helm.module.js';
import { KubeModule } from './kube/kube.module.js';
import { MetricsModule } from './metrics/metrics.module.js';
import { ObservabilityModule } from './observability/observability.module.js';
import { HttpModule } from './http/http.module.js';
import { ResourcesModule } from './resources/resources.module.js';
import { UsersModule } from './users/users.module.js';

@Module({})
export class AppModule {
  static forRoot(config: AppConfig): DynamicModule {
    return {
      module: AppModule,
      imports: [
        ConfigModule.forRoot(config),
        DatabaseModule.forRoot(ENTITIES),
        AccessModule,
        UsersModule,
        AuthModule,
        ClustersModule,
        HealthModule,
        ResourcesModule,
        ApplyModule,
        HelmModule,
        DebugModule,
        MetricsModule,
        ObservabilityModule,
        HttpModule,
        AuditModule,
        KubeModule,
      ],
      providers: [
        {
          provide: APP_PIPE,
          useValue: new AppValidationPipe({
            whitelist: true,
            stopAtFirstError: true,
            forbidNonWhitelisted: true,
            transform: true,
            forbidUnknownValues: true,
            validationError: { target: false, value: false },
          }),
        },
        { provide: APP_FILTER, useClass: HttpErrorFilter },
      ],
    };
  }
}
