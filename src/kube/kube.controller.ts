import {
  applyDecorators,
  Controller,
  Delete,
  Get,
  Param,
  Patch,
  Post,
  Put,
  Query,
  Req,
  Res,
  UseFilters,
} from '@nestjs/common';
import { ApiOperation, ApiParam, ApiProduces, ApiResponse, ApiTags } from '@nestjs/swagger';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { Auth, Authenticated } from '../auth/auth.decorators.js';
import type { Caller } from '../auth/caller.js';
import { KubeStatusFilter } from './kube-status.js';
import { KubeService } from './kube.service.js';
import { RawBody } from './raw-body.js';

const PATH = 'clusters/:name/k8s/*';

/** One passthrough operation per method: a generated client is not this path's user, kubectl is. */
const Passthrough = (method: string) =>
  applyDecorators(
    ApiOperation({
      summary: `${method} on the cluster's Kubernetes API`,
      description:
        "The cluster's Kubernetes API at `path` (`version`, `api`, `apis`, `api/v1/...`, `apis/<group>/<version>/...`, " +
        '`openapi/v2`): what a kubeconfig from `POST /api/v1/auth/kubeconfig` points kubectl, client-go and ' +
        "@kubernetes/client-node at. Parsed as the apiserver parses it and decided by the service's rules before " +
        "anything is sent; sent with the cluster's stored credentials (as the caller on an impersonating cluster); " +
        "the answer streams back unchanged. The service's own refusals and errors are Kubernetes `Status` objects. " +
        "Query parameters are the Kubernetes API's own and are passed on.",
    }),
    ApiParam({ name: 'name', description: 'The cluster', example: 'prod' }),
    ApiParam({
      name: 'path',
      description: 'A Kubernetes API path, e.g. `api/v1/namespaces/default/pods`',
      example: 'api/v1/namespaces/default/pods',
    }),
    ApiProduces('application/json', 'application/yaml', 'application/vnd.kubernetes.protobuf'),
    ApiResponse({
      status: '2XX',
      description: "The cluster's answer, unchanged",
      content: { 'application/json': { schema: { type: 'object', additionalProperties: true } } },
    }),
    ApiResponse({
      status: '4XX',
      description: "A Kubernetes `Status` (the service's refusal, or the cluster's own answer)",
      content: { 'application/json': { schema: { $ref: '#/components/schemas/KubernetesStatus' } } },
    }),
  );

/** `/api/v1/clusters/<name>/k8s/<path>`: the Kubernetes API through the service (CONTRACT §11). */
@ApiTags('Kubernetes API')
@UseFilters(KubeStatusFilter)
@Controller()
export class KubeController {
  constructor(private readonly kube: KubeService) {}

  /** Reads (and `HEAD`): get, list, watch (`?watch=true` and the legacy `/watch/` paths), logs, discovery. */
  @RawBody()
  @Authenticated()
  @Get(PATH)
  @Passthrough('GET')
  kubernetesGet(
    @Auth() caller: Caller,
    @Param('name') name: string,
    @Query() _query: unknown,
    @Req() request: FastifyRequest,
    @Res() reply: FastifyReply,
  ) {
    return this.kube.serve(caller, name, request, reply);
  }

  /** Creates (and answers SelfSubjectAccessReview and SelfSubjectRulesReview itself). */
  @RawBody()
  @Authenticated()
  @Post(PATH)
  @Passthrough('POST')
  kubernetesPost(
    @Auth() caller: Caller,
    @Param('name') name: string,
    @Query() _query: unknown,
    @Req() request: FastifyRequest,
    @Res() reply: FastifyReply,
  ) {
    return this.kube.serve(caller, name, request, reply);
  }

  /** Replaces an object or a subresource. */
  @RawBody()
  @Authenticated()
  @Put(PATH)
  @Passthrough('PUT')
  kubernetesPut(
    @Auth() caller: Caller,
    @Param('name') name: string,
    @Query() _query: unknown,
    @Req() request: FastifyRequest,
    @Res() reply: FastifyReply,
  ) {
    return this.kube.serve(caller, name, request, reply);
  }

  /** Patches: strategic merge, JSON merge, JSON patch and server-side apply, by `Content-Type`. */
  @RawBody()
  @Authenticated()
  @Patch(PATH)
  @Passthrough('PATCH')
  kubernetesPatch(
    @Auth() caller: Caller,
    @Param('name') name: string,
    @Query() _query: unknown,
    @Req() request: FastifyRequest,
    @Res() reply: FastifyReply,
  ) {
    return this.kube.serve(caller, name, request, reply);
  }

  /** Deletes an object, or a collection (`deletecollection`: `kubectl delete --all`). */
  @RawBody()
  @Authenticated()
  @Delete(PATH)
  @Passthrough('DELETE')
  kubernetesDelete(
    @Auth() caller: Caller,
    @Param('name') name: string,
    @Query() _query: unknown,
    @Req() request: FastifyRequest,
    @Res() reply: FastifyReply,
  ) {
    return this.kube.serve(caller, name, request, reply);
  }
}
