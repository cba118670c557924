import { Global, Module } from '@nestjs/common';
import { Authorizer } from './authorizer.js';

/** The authorizer, available to every module. */
@Global()
@Module({ providers: [Authorizer], exports: [Authorizer] })
export class AccessModule {}
