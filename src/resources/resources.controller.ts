import {
  applyDecorators,
  Body,
  Controller,
  createParamDecorator,
  Delete,
  type ExecutionContext,
  Get,
  Headers,
  BadRequestException,
  HttpException,
  Patch,
  Post,
  Put,
  Query,
  Req,
  Res,
} from '@nestjs/common';
import { ApiBody, ApiCreatedResponse, ApiHeader, ApiOkResponse, ApiParam, ApiResponse, ApiTags } from '@nestjs/swagger';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { Readable } from 'node:stream';
import { isWriteMethod, noteAudit, peekWriteAnswer } from '../common/audit-facts.js';
import { Auth, Authenticated } from '../auth/auth.decorators.js';
import type { Caller } from '../access/caller.js';
import { ApiErrors, ResourceResponses } from '../common/api-errors.js';
import { kubernetesRef } from './dto/kubernetes-schemas.js';
import type { WatchFormat } from '../watch/watch-stream.js';
import {
  DeleteResourceQueryDto,
  GetResourceQueryDto,
  ListResourcesQueryDto,
  ObjectEventsQueryDto,
  PAGE_PARAMS,
  PatchResourceQueryDto,
  WriteResourceQueryDto,
} from './dto/resource-query.dto.js';
import { ALL_NAMESPACES } from '../k8s/resource-path.js';
import type { ClusterAnswer } from '../clusters/gateway/answer.js';
import { DIFF_MEDIA_TYPE, type ResourceTarget, ResourcesService } from './resources.service.js';
import { JSON_TYPE, READ_TYPES, YAML_TYPE } from './yaml-answer.js';
import { negotiate, notAcceptable } from '../common/negotiate.js';
import { ApiTargetCluster } from '../clusters/target-cluster.js';

/** The target of a resource call: the `x-cluster-name` header (or `?cluster=`, see target-cluster.ts) and the path's resource, namespace and name. */
export const Target = createParamDecorator((_data: unknown, context: ExecutionContext): ResourceTarget => {
  const request = context.switchToHttp().getRequest<FastifyRequest>();
  const { resource, namespace, name } = request.params as Record<string, string>;
  return { cluster: request.headers['x-cluster-name'], resource, namespace, name };
});

/** Headers of the cluster's answer that reach the caller; everything else stays behind. */
const FORWARDED_HEADERS = ['content-type', 'content-length', 'warning'];

/**
 * Streams the cluster's answer to the caller as it arrives: status, body bytes, content type. The
 * answer to a write (one object) is also peeked at, bounded, for the audit row's uid and resourceVersion.
 */
export function sendAnswer(reply: FastifyReply, answer: ClusterAnswer): FastifyReply {
  const write = isWriteMethod(reply.request.method);
  if (answer instanceof Readable) {
    reply.status(answer.statusCode);
    for (const name of FORWARDED_HEADERS) {
      const value = answer.headers[name];
      if (value !== undefined) reply.header(name, value);
    }
    return reply.send(write ? peekWriteAnswer(reply.request, answer) : answer);
  }
  if (write) noteAudit(reply.request, { answer: answer.body });
  if (answer.warning !== undefined) reply.header('warning', answer.warning);
  return reply.status(answer.statusCode).header('content-type', answer.contentType).send(answer.body);
}

/**
 * A streaming route (a watch, a log) answers HEAD with 405: Fastify serves HEAD from the GET handler and
 * throws the body away, which would hold a stream (and its upstream connection) open with no reader.
 */
export function refuseHead(request: FastifyRequest): void {
  if (request.method === 'HEAD') {
    throw new HttpException({ message: 'HEAD is not served on a streaming route: send GET', allow: 'GET' }, 405);
  }
}

export const OBJECT = kubernetesRef('KubernetesObject');
/**
 * A patch body: an object (strategic merge or JSON merge patch) or an array of operations (JSON patch).
 * `completeDocument()` documents it under each Kubernetes patch content type, with an example for each.
 */
export const PATCH_BODY = {
  description:
    'The patch. `patchType` chooses its kind: absent, a strategic merge patch (an object); `merge`, a JSON merge ' +
    'patch (an object); `json`, a JSON patch (an array of operations); `apply`, a server-side apply (the object as ' +
    'you want it, YAML or JSON). Send it as `application/json` or as the content type of its kind ' +
    '(`application/strategic-merge-patch+json`, `application/merge-patch+json`, `application/json-patch+json`, ' +
    '`application/apply-patch+yaml`) with the matching `patchType`.',
  schema: {
    oneOf: [
      { type: 'object', additionalProperties: true, description: 'A strategic merge or JSON merge patch' },
      { type: 'array', items: kubernetesRef('JsonPatchOperation'), description: 'A JSON patch' },
    ],
  },
} as const;
/**
 * The 200 of replace and patch: the object, or with `dryRun=All` and `Accept: text/x-diff` the diff of a dry
 * run (a second media type, so generated clients that read every type see the union: openapi-fetch's
 * `createClient<paths, 'application/json'>` keeps the object's type).
 */
const WrittenOrDiff = (description: string) =>
  ApiResponse({
    status: 200,
    description:
      `${description}. With \`dryRun=All\` and \`Accept: ${DIFF_MEDIA_TYPE}\`: nothing is stored, and the answer is ` +
      'the unified diff of the object before and after as YAML, as `POST /api/v1/apply` shows it (empty when ' +
      "nothing would change; without `managedFields`, `resourceVersion`, `generation`, `uid`, `creationTimestamp`; a Secret's values `***`)",
    content: {
      'application/json': { schema: OBJECT },
      [DIFF_MEDIA_TYPE]: {
        schema: {
          type: 'string',
          example:
            '--- a/shop/configmaps/settings\n+++ b/shop/configmaps/settings\n@@ -1,5 +1,5 @@\n apiVersion: v1\n data:\n-  mode: slow\n+  mode: fast\n',
        },
      },
    },
  });

/** A delete answers with the object (still being deleted, or as it was) or a success `Status`. */
const DELETED = { anyOf: [OBJECT, kubernetesRef('KubernetesStatus')] };

/** What a read (get, list) answers in, by `Accept`: JSON (the default) or YAML; 406 for anything else. */
function readMediaType(request: FastifyRequest): string {
  const chosen = negotiate(request.headers.accept, READ_TYPES);
  if (!chosen) throw notAcceptable(READ_TYPES);
  return chosen;
}

/**
 * Whether a write asked for the diff of a dry run (`Accept: text/x-diff` with `dryRun=All`) rather than
 * the object; the diff without a dry run is a 400.
 */
function wantsDiff(request: FastifyRequest, dryRun: string | undefined): boolean {
  if (negotiate(request.headers.accept, [JSON_TYPE, DIFF_MEDIA_TYPE]) !== DIFF_MEDIA_TYPE) return false;
  if (dryRun !== 'All') {
    throw new BadRequestException([
      `Accept: ${DIFF_MEDIA_TYPE} answers a dry run only: add dryRun=All, or ask for ${JSON_TYPE}`,
    ]);
  }
  return true;
}

/** The stream format a watch caller asked for with `Accept`. */
function watchFormat(request: FastifyRequest): WatchFormat {
  const accept = String(request.headers.accept ?? '').toLowerCase();
  if (accept.includes('text/event-stream')) return 'sse';
  if (accept.includes('application/x-ndjson')) return 'ndjson';
  return 'json';
}

/**
 * The 200 of a route that answers with a document, or with `watch=true` a stream of watch events. Only the
 * document has a schema: a second media type on the 200 would make generated clients (openapi-typescript with
 * openapi-fetch) type every answer as the union, so `data.items` would need a guard on every list call. The
 * streams are described in words instead.
 */
const ListOrWatchResponse = (listDescription: string, yaml = false) =>
  applyDecorators(
    ApiResponse({
      status: 200,
      description:
        `${listDescription}.\n\n` +
        'With `watch=true` the answer is a stream of watch events instead, each ' +
        '`{"type": "ADDED" | "MODIFIED" | "DELETED" | "BOOKMARK" | "ERROR", "object": {…}}` exactly as the cluster ' +
        "sends it (ERROR carries the cluster's `Status`; 410 means list again): one JSON object per line as " +
        '`application/json` (the default, as kubectl and client-go expect) or `application/x-ndjson`, or ' +
        'Server-Sent Events with `Accept: text/event-stream` (`event: <type>`, `id: <resourceVersion>`, ' +
        '`data: <the event>`, a `: heartbeat` comment every 15 s; a reconnection sends `Last-Event-ID` to resume).',
      content: {
        'application/json': { schema: kubernetesRef('KubernetesList') },
        // The same List written as YAML: one schema, so generated clients still type the answer as the List.
        ...(yaml ? { [YAML_TYPE]: { schema: kubernetesRef('KubernetesList') } } : {}),
      },
    }),
    ...(yaml ? [ApiErrors(406)] : []),
    ApiHeader({
      name: 'Last-Event-ID',
      required: false,
      description: 'SSE watch: resume after this event id (a resourceVersion); takes the place of `resourceVersion`',
    }),
    ApiErrors(429),
  );

/** The header and path parameters of every resource route, and its responses (the cluster's errors pass through). */
export const ResourceParams = (withName: boolean) =>
  applyDecorators(
    ApiTargetCluster(),
    ApiParam({
      name: 'resource',
      type: String,
      description:
        'Plural resource name the cluster serves (`configmaps`), or `<plural>.<group>` (`deployments.apps`, `widgets.example.com`)',
      example: 'configmaps',
    }),
    ApiParam({
      name: 'namespace',
      type: String,
      description: `Namespace, or \`${ALL_NAMESPACES}\` for cluster-scoped resources (and to list across all namespaces)`,
      example: 'default',
    }),
    ...(withName ? [ApiParam({ name: 'name', type: String, description: 'Object name', example: 'my-config' })] : []),
    ResourceResponses(),
  );

/**
 * Generic access to any resource the cluster named in `x-cluster-name` serves, built-in or custom.
 * Viewers may list and get anything but Secrets; everything else needs the admin role.
 */
@ApiTags('Resources')
@Controller()
export class ResourcesController {
  constructor(private readonly resources: ResourcesService) {}

  /**
   * Lists objects: the cluster's List object, verbatim. With `watch=true`, streams the changes
   * instead: each replica watches a collection once, whatever the callers' label selectors (applied
   * per caller), and shares that watch with every caller and with the collection's paged-list cache; a
   * field selector goes to the cluster and is watched on its own.
   */
  @Authenticated()
  @Get(':resource/:namespace')
  @ResourceParams(false)
  @ListOrWatchResponse(
    "The cluster's List object (`apiVersion`, `kind`, `metadata`, `items`); as YAML with `Accept: application/yaml`",
    true,
  )
  async listResources(
    @Auth() caller: Caller,
    @Target() target: ResourceTarget,
    @Query() query: ListResourcesQueryDto,
    @Req() request: FastifyRequest,
    @Res() reply: FastifyReply,
  ): Promise<FastifyReply> {
    // A watch answers in its own formats (watchFormat); a list in JSON or YAML.
    const mediaType = query.watch === true ? JSON_TYPE : readMediaType(request);
    if (PAGE_PARAMS.some((name) => query[name] !== undefined)) {
      if (query.watch === true) refuseHead(request);
      const answer = await this.resources.pagedList(
        caller,
        target,
        query,
        { request, reply, format: watchFormat(request) },
        mediaType,
      );
      return answer ? sendAnswer(reply, answer) : reply;
    }
    if (query.watch === true) {
      refuseHead(request);
      const refusal = await this.resources.watchResources(caller, target, query, {
        request,
        reply,
        format: watchFormat(request),
      });
      return refusal ? sendAnswer(reply, refusal) : reply;
    }
    return sendAnswer(reply, await this.resources.listResources(caller, target, query, mediaType));
  }

  /**
   * The events of one object (built-in or custom): core/v1 and events.k8s.io Events whose involved
   * object has its uid, deduplicated, newest first. `watch=true` streams them like a list watch.
   */
  @Authenticated()
  @Get(':resource/:namespace/:name/events')
  @ResourceParams(true)
  @ListOrWatchResponse('An `EventList` of core/v1 Events, newest first')
  async listObjectEvents(
    @Auth() caller: Caller,
    @Target() target: ResourceTarget,
    @Query() query: ObjectEventsQueryDto,
    @Req() request: FastifyRequest,
    @Res() reply: FastifyReply,
  ): Promise<FastifyReply> {
    if (query.watch === true) refuseHead(request);
    const answer = await this.resources.objectEvents(caller, target, query, {
      request,
      reply,
      format: watchFormat(request),
    });
    return answer ? sendAnswer(reply, answer) : reply;
  }

  /** Reads one object. */
  @Authenticated()
  @Get(':resource/:namespace/:name')
  @ResourceParams(true)
  @ApiResponse({
    status: 200,
    description: 'The object; as YAML with `Accept: application/yaml`',
    content: { 'application/json': { schema: OBJECT }, [YAML_TYPE]: { schema: OBJECT } },
  })
  @ApiErrors(406)
  async getResource(
    @Auth() caller: Caller,
    @Target() target: ResourceTarget,
    @Query() query: GetResourceQueryDto,
    @Req() request: FastifyRequest,
    @Res() reply: FastifyReply,
  ): Promise<FastifyReply> {
    const mediaType = readMediaType(request);
    return sendAnswer(reply, await this.resources.getResource(caller, target, query, mediaType));
  }

  /** Creates an object; the namespace comes from the path (a different `metadata.namespace` is a 400). */
  @Authenticated()
  @Post(':resource/:namespace')
  @ResourceParams(false)
  @ApiBody({ description: 'The full object', schema: kubernetesRef('KubernetesObjectInput') })
  @ApiCreatedResponse({ description: 'The created object', schema: OBJECT })
  async createResource(
    @Auth() caller: Caller,
    @Target() target: ResourceTarget,
    @Body() body: unknown,
    @Query() query: WriteResourceQueryDto,
    @Res() reply: FastifyReply,
  ): Promise<FastifyReply> {
    return sendAnswer(reply, await this.resources.createResource(caller, target, body, query));
  }

  /** Replaces an object; the body must carry the current `metadata.resourceVersion` (a stale one is the cluster's 409). */
  @Authenticated()
  @Put(':resource/:namespace/:name')
  @ResourceParams(true)
  @ApiBody({
    description: 'The full object, with metadata.name and metadata.resourceVersion',
    schema: kubernetesRef('KubernetesObjectInput'),
  })
  @WrittenOrDiff('The updated object')
  async replaceResource(
    @Auth() caller: Caller,
    @Target() target: ResourceTarget,
    @Body() body: unknown,
    @Query() query: WriteResourceQueryDto,
    @Req() request: FastifyRequest,
    @Res() reply: FastifyReply,
  ): Promise<FastifyReply> {
    const diff = wantsDiff(request, query.dryRun);
    return sendAnswer(reply, await this.resources.replaceResource(caller, target, body, query, diff));
  }

  /**
   * Patches an object: the patch kind from `patchType`, or else from a Kubernetes patch Content-Type
   * (`application/merge-patch+json`, `application/json-patch+json`, `application/strategic-merge-patch+json`,
   * `application/apply-patch+yaml`); plain `application/json` is a strategic merge patch. A `patchType` that
   * contradicts the Content-Type is a 400. Server-side apply (`apply`) applies as `fieldManager`, by default
   * `cas:<username>` (`cas:key:<name>` for an API key); `force=true` takes over conflicting fields, else the
   * cluster's 409 conflict passes through.
   */
  @Authenticated()
  @Patch(':resource/:namespace/:name')
  @ResourceParams(true)
  @ApiBody(PATCH_BODY)
  @WrittenOrDiff('The patched object')
  @ApiCreatedResponse({ description: 'Server-side apply (`apply`) created the object', schema: OBJECT })
  async patchResource(
    @Auth() caller: Caller,
    @Target() target: ResourceTarget,
    @Body() body: unknown,
    @Query() query: PatchResourceQueryDto,
    @Headers('content-type') contentType: string | undefined,
    @Req() request: FastifyRequest,
    @Res() reply: FastifyReply,
  ): Promise<FastifyReply> {
    const diff = wantsDiff(request, query.dryRun);
    return sendAnswer(reply, await this.resources.patchResource(caller, target, body, query, contentType, diff));
  }

  /**
   * Deletes an object: Foreground unless `cascade=false` (Orphan); `force=true` sets grace period 0;
   * by default waits until the object is gone (`timeoutSeconds`, 60 by default), `wait=false` answers at once.
   */
  @Authenticated()
  @Delete(':resource/:namespace/:name')
  @ResourceParams(true)
  @ApiOkResponse({ description: "The cluster's answer to the delete (the object, or a `Status`)", schema: DELETED })
  @ApiResponse({
    status: 202,
    description: 'With `wait=false`: the cluster accepted the deletion (the object, still being deleted)',
    schema: DELETED,
  })
  async deleteResource(
    @Auth() caller: Caller,
    @Target() target: ResourceTarget,
    @Query() query: DeleteResourceQueryDto,
    @Res() reply: FastifyReply,
  ): Promise<FastifyReply> {
    return sendAnswer(reply, await this.resources.deleteResource(caller, target, query));
  }
}
