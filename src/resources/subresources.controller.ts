import { Body, Controller, Get, Param, Patch, Put, Query, Res, Headers } from '@nestjs/common';
import { ApiBody, ApiOkResponse, ApiParam, ApiTags } from '@nestjs/swagger';
import type { FastifyReply } from 'fastify';
import { Auth, Authenticated } from '../auth/auth.decorators.js';
import type { Caller } from '../access/caller.js';
import { GetResourceQueryDto, PatchResourceQueryDto, WriteResourceQueryDto } from './dto/resource-query.dto.js';
import { OBJECT, PATCH_BODY, ResourceParams, sendAnswer, Target } from './resources.controller.js';
import type { ResourceTarget } from './resources.service.js';
import { SUBRESOURCES, SubresourcesService } from './subresources.service.js';

const SubresourceParam = ApiParam({
  name: 'subresource',
  enum: SUBRESOURCES,
  description: 'A subresource the type serves (its discovery lists it): `scale` (e.g. Deployments) or `status`',
});

/**
 * `scale` and `status` of any type whose discovery lists them, built-in or custom. Authorized as
 * the parent resource: GET needs `get`, PUT `update`, PATCH `patch` (viewers only read).
 */
@ApiTags('Resources')
@Controller()
export class SubresourcesController {
  constructor(private readonly subresources: SubresourcesService) {}

  /** Reads the subresource: a `Scale` (`autoscaling/v1`), or the whole object for `status`. */
  @Authenticated()
  @Get(':resource/:namespace/:name/:subresource')
  @ResourceParams(true)
  @SubresourceParam
  @ApiOkResponse({ description: 'The subresource as the cluster serves it', schema: OBJECT })
  async getSubresource(
    @Auth() caller: Caller,
    @Target() target: ResourceTarget,
    @Param('subresource') subresource: string,
    @Query() query: GetResourceQueryDto,
    @Res() reply: FastifyReply,
  ): Promise<FastifyReply> {
    return sendAnswer(reply, await this.subresources.getSubresource(caller, target, subresource, query));
  }

  /** Replaces the subresource; the body carries `metadata.name` and the current `metadata.resourceVersion`. */
  @Authenticated()
  @Put(':resource/:namespace/:name/:subresource')
  @ResourceParams(true)
  @SubresourceParam
  @ApiBody({ description: 'The subresource as read, changed (e.g. `spec.replicas` of a Scale)', schema: OBJECT })
  @ApiOkResponse({ description: 'The updated subresource', schema: OBJECT })
  async replaceSubresource(
    @Auth() caller: Caller,
    @Target() target: ResourceTarget,
    @Param('subresource') subresource: string,
    @Body() body: unknown,
    @Query() query: WriteResourceQueryDto,
    @Res() reply: FastifyReply,
  ): Promise<FastifyReply> {
    return sendAnswer(reply, await this.subresources.replaceSubresource(caller, target, subresource, body, query));
  }

  /** Patches the subresource: strategic merge (default; built-in types only), `patchType=merge` or `json`. */
  @Authenticated()
  @Patch(':resource/:namespace/:name/:subresource')
  @ResourceParams(true)
  @SubresourceParam
  @ApiBody(PATCH_BODY)
  @ApiOkResponse({ description: 'The patched subresource', schema: OBJECT })
  async patchSubresource(
    @Auth() caller: Caller,
    @Target() target: ResourceTarget,
    @Param('subresource') subresource: string,
    @Body() body: unknown,
    @Query() query: PatchResourceQueryDto,
    @Headers('content-type') contentType: string | undefined,
    @Res() reply: FastifyReply,
  ): Promise<FastifyReply> {
    return sendAnswer(
      reply,
      await this.subresources.patchSubresource(caller, target, subresource, body, query, contentType),
    );
  }
}
