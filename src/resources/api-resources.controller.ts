import { BadRequestException, Controller, Get, Param, Query, Req } from '@nestjs/common';
import type { FastifyRequest } from 'fastify';
import { ApiBadGatewayResponse, ApiGatewayTimeoutResponse, ApiOkResponse, ApiParam, ApiTags } from '@nestjs/swagger';
import { Auth, Authenticated } from '../auth/auth.decorators.js';
import type { Caller } from '../access/caller.js';
import { ApiErrors } from '../common/api-errors.js';
import { ErrorResponseDto } from '../common/error-response.dto.js';
import { ApiResourcesService } from './api-resources.service.js';
import { ApiResourceListDto, ApiResourceSchemaDto, ApiResourcesQueryDto } from './dto/api-resources.dto.js';

const ClusterParam = ApiParam({
  name: 'name',
  type: String,
  description: 'Name of the cluster',
  example: 'production',
});

/** What a cluster serves, and what the caller may do with it: the navigation and forms of a console. */
@ApiTags('Clusters')
@Controller('clusters/:name/api-resources')
export class ApiResourcesController {
  constructor(private readonly apiResources: ApiResourcesService) {}

  /**
   * Every resource type the cluster serves (from its discovery, at most a second old, so a CRD
   * created a moment ago is listed), each with the verbs the caller may use on it. Any caller with
   * a role that may use the cluster.
   */
  @Authenticated()
  @Get()
  @ClusterParam
  @ApiOkResponse({ type: ApiResourceListDto })
  @ApiErrors(400, 404, 409)
  @ApiBadGatewayResponse({ description: 'The cluster could not be reached', type: ErrorResponseDto })
  @ApiGatewayTimeoutResponse({ description: 'The cluster did not answer in time', type: ErrorResponseDto })
  listApiResources(
    @Auth() caller: Caller,
    @Param('name') name: string,
    @Query() query: ApiResourcesQueryDto,
  ): Promise<ApiResourceListDto> {
    return this.apiResources.listApiResources(caller, name, query.namespace);
  }

  /**
   * The OpenAPI (v2) schema of one resource type, from the cluster's `/openapi/v2`, with every
   * definition it refers to: for building forms. 404 when the cluster does not serve the type or
   * publishes no schema for it.
   */
  @Authenticated()
  @Get(':resource/schema')
  @ClusterParam
  @ApiParam({
    name: 'resource',
    type: String,
    description: '`<plural>` (core group) or `<plural>.<group>`, as on the resource routes',
    example: 'deployments.apps',
  })
  @ApiOkResponse({ type: ApiResourceSchemaDto })
  @ApiErrors(400, 404, 409)
  @ApiBadGatewayResponse({ description: 'The cluster could not be reached', type: ErrorResponseDto })
  @ApiGatewayTimeoutResponse({ description: 'The cluster did not answer in time', type: ErrorResponseDto })
  getApiResourceSchema(
    @Auth() caller: Caller,
    @Param('name') name: string,
    @Param('resource') resource: string,
    @Req() request: FastifyRequest<{ Querystring: Record<string, unknown> }>,
  ): Promise<ApiResourceSchemaDto> {
    const unknown = Object.keys(request.query ?? {});
    if (unknown.length) throw new BadRequestException(unknown.map((key) => `property ${key} should not exist`));
    return this.apiResources.getApiResourceSchema(caller, name, resource);
  }
}
