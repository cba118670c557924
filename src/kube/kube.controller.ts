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
import { ApiBody, ApiConsumes, ApiOperation, ApiParam, ApiResponse, ApiTags } from '@nestjs/swagger';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { Auth, Authenticated } from '../auth/auth.decorators.js';
import type { Caller } from '../access/caller.js';
import { kubernetesRef } from '../resources/dto/kubernetes-schemas.js';
import { KubeStatusFilter } from './kube-status.js';
import { KubeService } from './kube.service.js';

const PATH = 'clusters/:name/k8s/*';

/** What the service itself answers on this path, each as a Kubernetes `Status`. */
const STATUS_ERRORS: Record<number, string> = {
  400: 'A path the service cannot place (an empty, `.`, `..` or encoded-slash segment), or a bad header',
  401: 'As a `Status` saying which; also the session cookie without `Authorization` (not accepted on this path)',
  403: "The service's rules do not allow it (the message says what is lacking), or an `Impersonate-*` header was sent",
  404: 'An unknown cluster, or a path that names no resource',
  409: 'The cluster is disabled',
  413: 'The request body is larger than 10 MiB',
  502: 'The cluster could not be reached',
  504: 'The cluster did not answer in time',
};

const BODY_TYPES = [
  'application/json',
  'application/yaml',
  'application/strategic-merge-patch+json',
  'application/merge-patch+json',
  'application/json-patch+json',
  'application/apply-patch+yaml',
  'application/vnd.kubernetes.protobuf',
];

/** One passthrough operation per method: a generated client is not this path's user, kubectl is. */
const Passthrough = (method: string, withBody: boolean, what: string) =>
  applyDecorators(
    ApiOperation({
      summary: `${method} on the cluster's Kubernetes API`,
      description:
        `${what} ${method} on the cluster's Kubernetes API at \`path\` (\`version\`, \`api\`, \`apis\`, \`api/v1/...\`, ` +
        '`apis/<group>/<version>/...`, ' +
        '`openapi/v2`): what a kubeconfig from `POST /api/v1/auth/kubeconfig` points kubectl, client-go and ' +
        "@kubernetes/client-node at. Parsed as the apiserver parses it and decided by the service's rules before " +
        "anything is sent; sent with the cluster's stored credentials (as the caller on an impersonating cluster); " +
        "the answer streams back unchanged. The service's own refusals and errors are Kubernetes `Status` objects. " +
        "Query parameters are the Kubernetes API's own and are passed on. Upgrades of `pods/<name>/exec`, " +
        '`attach` and `portforward` (WebSocket, or SPDY/3.1 as kubectl up to 1.29 sends them) are terminal ' +
        'sessions: granted only by a rule naming the verb, audited, and recorded with `CAS_EXEC_RECORDING=output`. ' +
        'A WebSocket upgrade may send its token as the `base64url.bearer.authorization.k8s.io.` subprotocol instead ' +
        'of `Authorization`. Every answer carries ' +
        "`Content-Security-Policy: sandbox` (nothing a cluster serves runs with the service's origin), and a `proxy` " +
        "answer (a pod's, service's or node's pages) `Content-Disposition: attachment`.",
    }),
    ApiParam({ name: 'name', description: 'The cluster', example: 'prod' }),
    ApiParam({
      name: 'path',
      description: 'A Kubernetes API path, e.g. `api/v1/namespaces/default/pods`',
      example: 'api/v1/namespaces/default/pods',
    }),
    ...(withBody
      ? [
          ApiConsumes(...BODY_TYPES),
          ApiBody({
            required: false,
            description: 'A Kubernetes object or patch, passed on as sent',
            schema: { type: 'object', additionalProperties: true },
          }),
        ]
      : []),
    ApiResponse({
      status: '2XX',
      description: "The cluster's answer, unchanged (its errors too, as its own `Status`)",
      content: Object.fromEntries(
        ['application/json', 'application/yaml', 'application/vnd.kubernetes.protobuf', 'text/plain'].map((type) => [
          type,
          { schema: type === 'application/json' ? { type: 'object', additionalProperties: true } : { type: 'string' } },
        ]),
      ),
    }),
    ...Object.entries(STATUS_ERRORS).map(([status, description]) =>
      ApiResponse({
        status: Number(status),
        description,
        content: { 'application/json': { schema: kubernetesRef('KubernetesStatus') } },
      }),
    ),
  );

/** `/api/v1/clusters/<name>/k8s/<path>`: the Kubernetes API through the service (docs/API.md, The Kubernetes API path). */
@ApiTags('Kubernetes API')
@UseFilters(KubeStatusFilter)
@Controller()
export class KubeController {
  constructor(private readonly kube: KubeService) {}

  /** Reads (and `HEAD`): get, list, watch (`?watch=true` and the legacy `/watch/` paths), logs, discovery. */
  @Passthrough('GET', false, 'Reads:')
  @Authenticated({ authorizationOnly: true })
  @Get(PATH)
  getKubernetesApi(
    @Auth() caller: Caller,
    @Param('name') name: string,
    @Query() _query: unknown,
    @Req() request: FastifyRequest,
    @Res() reply: FastifyReply,
  ) {
    return this.kube.serve(caller, name, request, reply);
  }

  /** Creates (and answers SelfSubjectAccessReview, SelfSubjectRulesReview and SelfSubjectReview itself, as JSON or protobuf). */
  @Passthrough('POST', true, 'Creates:')
  @Authenticated({ authorizationOnly: true })
  @Post(PATH)
  postKubernetesApi(
    @Auth() caller: Caller,
    @Param('name') name: string,
    @Query() _query: unknown,
    @Req() request: FastifyRequest,
    @Res() reply: FastifyReply,
  ) {
    return this.kube.serve(caller, name, request, reply);
  }

  /** Replaces an object or a subresource. */
  @Passthrough('PUT', true, 'Replaces:')
  @Authenticated({ authorizationOnly: true })
  @Put(PATH)
  putKubernetesApi(
    @Auth() caller: Caller,
    @Param('name') name: string,
    @Query() _query: unknown,
    @Req() request: FastifyRequest,
    @Res() reply: FastifyReply,
  ) {
    return this.kube.serve(caller, name, request, reply);
  }

  /** Patches: strategic merge, JSON merge, JSON patch and server-side apply, by `Content-Type`. */
  @Passthrough('PATCH', true, 'Patches:')
  @Authenticated({ authorizationOnly: true })
  @Patch(PATH)
  patchKubernetesApi(
    @Auth() caller: Caller,
    @Param('name') name: string,
    @Query() _query: unknown,
    @Req() request: FastifyRequest,
    @Res() reply: FastifyReply,
  ) {
    return this.kube.serve(caller, name, request, reply);
  }

  /** Deletes an object, or a collection (`deletecollection`: `kubectl delete --all`). */
  @Passthrough('DELETE', false, 'Deletes:')
  @Authenticated({ authorizationOnly: true })
  @Delete(PATH)
  deleteKubernetesApi(
    @Auth() caller: Caller,
    @Param('name') name: string,
    @Query() _query: unknown,
    @Req() request: FastifyRequest,
    @Res() reply: FastifyReply,
  ) {
    return this.kube.serve(caller, name, request, reply);
  }
}
