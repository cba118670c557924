import { Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { RoleEntity } from './role.entity.js';
import { UserEntity } from './user.entity.js';
import { ApiKeyEntity } from '../auth/api-key.entity.js';
import { RolesController } from './roles.controller.js';
import { RolesService } from './roles.service.js';
import { UsersController } from './users.controller.js';
import { UsersService } from './users.service.js';
import { BootstrapUserService } from './bootstrap.service.js';
import { PasswordHasher } from '../auth/passwords.js';
import { LoginThrottleEntity } from '../auth/login-throttle.entity.js';
import { LoginThrottleService } from '../auth/login-throttle.service.js';

@Module({
  imports: [TypeOrmModule.forFeature([UserEntity, RoleEntity, ApiKeyEntity, LoginThrottleEntity])],
  controllers: [UsersController, RolesController],
  providers: [UsersService, RolesService, BootstrapUserService, PasswordHasher, LoginThrottleService],
  exports: [UsersService, PasswordHasher, LoginThrottleService],
})
export class UsersModule {}
