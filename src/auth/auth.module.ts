import { Module } from '@nestjs/common';
import { APP_GUARD } from '@nestjs/core';
import { TypeOrmModule } from '@nestjs/typeorm';
import { RoleEntity } from '../users/role.entity.js';
import { UserEntity } from '../users/user.entity.js';
import { UsersModule } from '../users/users.module.js';
import { ApiKeyEntity } from './api-key.entity.js';
import { ApiKeysService } from './api-keys.service.js';
import { ApiKeysController, AuthController, OwnApiKeysController } from './auth.controller.js';
import { AuthGuard } from './auth.guard.js';
import { AuthService } from './auth.service.js';
import { CredentialsService } from './credentials.service.js';
import { LoginThrottleEntity } from './login-throttle.entity.js';
import { OidcController } from './oidc/oidc.controller.js';
import { OidcService } from './oidc/oidc.service.js';
import { SessionEntity } from './session.entity.js';

@Module({
  imports: [
    TypeOrmModule.forFeature([SessionEntity, ApiKeyEntity, LoginThrottleEntity, UserEntity, RoleEntity]),
    UsersModule,
  ],
  controllers: [AuthController, ApiKeysController, OwnApiKeysController, OidcController],
  providers: [
    AuthService,
    ApiKeysService,
    CredentialsService,
    OidcService,
    { provide: APP_GUARD, useClass: AuthGuard },
  ],
  exports: [CredentialsService, ApiKeysService],
})
export class AuthModule {}
