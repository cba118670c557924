import { Global, Module } from '@nestjs/common';
import { Authorizer } from './authorizer.js';

/**
 * The authorizer, available to every module. The routes that tell a caller what it may do (`can-i`,
 * `me/permissions`) live with the resource routes (src/resources/access.controller.ts), whose own
 * resolution they use; the namespaces route with the clusters.
 */
@Global()
@Module({
  providers: [Authorizer],
  exports: [Authorizer],
})
export class AccessModule {}
