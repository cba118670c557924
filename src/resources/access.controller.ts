import type { FastifyRequest } from 'fastify';
import { noteAudit } from '../common/audit-facts.js';
import { Body, Controller, Get, HttpCode, NotFoundException, Post, Query, Req } from '@nestjs/common';
import { ApiOkResponse, ApiTags } from '@nestjs/swagger';
import { InjectRepository } from '@nestjs/typeorm';
import { Repository } from 'typeorm';
import { Auth, Authenticated } from '../auth/auth.decorators.js';
import type { Caller } from '../access/caller.js';
import { ClusterEntity } from '../clusters/cluster.entity.js';
import { ApiErrors } from '../common/api-errors.js';
import { Authorizer } from '../access/authorizer.js';
import { CanIDto, DecisionDto, namespaceOf, PermissionsDto, PermissionsQueryDto } from './dto/access.dto.js';
import { RouteAccess } from './route-access.js';

/**
 * What the caller may do, for a frontend to hide what it cannot. Both answers come from the
 * authorizer the resource routes use, in the same order of checks (a cluster the caller has no rule
 * on is refused before it is looked up; an unknown cluster is a 404).
 */
@ApiTags('Auth')
@Controller('auth')
export class AccessController {
  constructor(
    private readonly authorizer: Authorizer,
    private readonly routes: RouteAccess,
    @InjectRepository(ClusterEntity) private readonly clusters: Repository<ClusterEntity>,
  ) {}

  /** The caller's effective rules on one cluster. */
  @Authenticated()
  @Get('me/permissions')
  @ApiOkResponse({ type: PermissionsDto })
  @ApiErrors(400, 404)
  async getMyPermissions(@Auth() caller: Caller, @Query() query: PermissionsQueryDto): Promise<PermissionsDto> {
    const permissions = this.authorizer.permissions(caller, query.cluster);
    if (permissions.admin || permissions.rules.length) await this.assertExists(query.cluster);
    return { cluster: query.cluster, ...permissions };
  }

  /**
   * Whether the caller may do one thing, and why (the 403 or 400 message a route would give). The
   * type and its scope are resolved through the cluster's discovery as the routes resolve them: an
   * unknown type, a namespace on a cluster-scoped type, `log` on anything but pods or `metrics` with a
   * namespace answer `allowed: false` saying so.
   */
  @Authenticated()
  @Post('can-i')
  @HttpCode(200)
  @ApiOkResponse({ type: DecisionDto })
  @ApiErrors(400, 404, 502, 504)
  async checkPermission(
    @Auth() caller: Caller,
    @Body() dto: CanIDto,
    @Req() request: FastifyRequest,
  ): Promise<DecisionDto> {
    noteAudit(request, { changesState: false }); // a question, not a change: no audit row
    const attempt = this.authorizer.mayAttempt(caller, dto.verb, dto.cluster, {
      resource: dto.resource,
      namespace: namespaceOf(dto),
    });
    if (!attempt.allowed) return attempt;
    await this.assertExists(dto.cluster);
    return this.routes.decide(caller, {
      verb: dto.verb,
      cluster: dto.cluster,
      resource: dto.resource,
      namespace: namespaceOf(dto),
    });
  }

  private async assertExists(name: string): Promise<void> {
    if (!(await this.clusters.exists({ where: { name } }))) throw new NotFoundException(`cluster '${name}' not found`);
  }
}
