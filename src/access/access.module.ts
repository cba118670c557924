import { Global, Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { ClusterEntity } from '../clusters/cluster.entity.js';
import { ResourcesModule } from '../resources/resources.module.js';
import { AccessController } from './access.controller.js';
import { Authorizer } from './authorizer.js';
import { RouteAccess } from './route-access.js';

/** The authorizer, available to every module; and the routes that tell a caller what it may do. */
@Global()
@Module({
  imports: [TypeOrmModule.forFeature([ClusterEntity]), ResourcesModule],
  controllers: [AccessController],
  providers: [Authorizer, RouteAccess],
  exports: [Authorizer],
})
export class AccessModule {}
