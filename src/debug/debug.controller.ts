import { ApiTargetCluster } from '../clusters/target-cluster.js';
import { BadRequestException, Body, Controller, Get, Headers, Param, Post, Req } from '@nestjs/common';
import { ApiCreatedResponse, ApiHeader, ApiParam, ApiQuery, ApiResponse, ApiTags } from '@nestjs/swagger';
import type { FastifyRequest } from 'fastify';
import { noteAudit } from '../common/audit-facts.js';
import { Auth, Authenticated } from '../auth/auth.decorators.js';
import type { Caller } from '../access/caller.js';
import { ApiErrors } from '../common/api-errors.js';
import { allowedProtocols, BEARER_PROTOCOL_PREFIX } from '../terminal/terminal-protocol.js';
import { DebugService } from './debug.service.js';
import { DebugContainerDto, DebugPodDto } from './dto/debug.dto.js';

/**
 * Debugging (docs/TERMINAL.md): an ephemeral debug container added to a pod, and a shell on a node.
 * Each needs a rule that names it — `update` on `pods/ephemeralcontainers`, `create` on `nodes/shell` —
 * which no `*` covers.
 */
@ApiTags('Terminal')
@Controller()
export class DebugController {
  constructor(private readonly debug: DebugService) {}

  /**
   * Adds an ephemeral debug container to a pod (sharing the target container's process namespace) and
   * answers once it runs; attach to it with the `attach` route it names. Needs `update` on
   * `pods/ephemeralcontainers` in the namespace. An ephemeral container cannot be removed: it ends
   * when its process does.
   */
  @Authenticated()
  @Post('pods/:namespace/:name/debug')
  @ApiTargetCluster()
  @ApiParam({ name: 'namespace', type: String, example: 'default' })
  @ApiParam({ name: 'name', type: String, description: 'The pod', example: 'web-0' })
  @ApiCreatedResponse({ type: DebugContainerDto, description: 'The debug container runs' })
  @ApiErrors(400, 404, 502, {
    409: "The cluster's version has no ephemeral containers (named), or the pod has a container of that name",
    422: "The container was added but cannot start: the kubelet's reason (`ErrImagePull: …`)",
    504: 'The cluster did not answer in time, or the container did not run within CAS_DEBUG_START_SECONDS',
  })
  debugPod(
    @Auth() caller: Caller,
    @Headers('x-cluster-name') cluster: string | undefined,
    @Param('namespace') namespace: string,
    @Param('name') name: string,
    @Body() dto: DebugPodDto,
    @Req() request: FastifyRequest,
  ): Promise<DebugContainerDto> {
    return this.debug.addDebugContainer(caller, cluster, namespace, name, dto, (facts) =>
      noteAudit(request, {
        object: {
          cluster: facts.cluster,
          resource: 'pods/ephemeralcontainers',
          namespace: facts.namespace,
          name: facts.pod,
        },
        detail: facts.detail,
      }),
    );
  }

  /**
   * A shell on a node, over a WebSocket (the exec channel protocols): the service creates a privileged pod
   * on the node (`CAS_NODE_SHELL_NAMESPACE`, image `CAS_NODE_SHELL_IMAGE`) as the caller, runs
   * `nsenter -t 1 -m -u -i -n -p -- sh -l` in it, and deletes it when the session ends. Needs `create` on
   * `nodes/shell` (namespaces `*`); off (404) unless CAS_NODE_SHELL_NAMESPACE is set.
   */
  @Authenticated()
  @Get('nodes/_all/:node/shell')
  @ApiHeader({
    name: 'x-cluster-name',
    required: false,
    description: 'The cluster (or query `cluster`: browsers cannot set headers on a WebSocket)',
  })
  @ApiQuery({
    name: 'cluster',
    required: false,
    type: String,
    description: 'The cluster, when `x-cluster-name` cannot be sent',
  })
  @ApiParam({ name: 'node', type: String, example: 'node-1' })
  @ApiResponse({
    status: 101,
    description:
      `Switching Protocols: a WebSocket speaking \`${allowedProtocols('exec').join('`, `')}\` (a tty: resize on channel 4). ` +
      'Authenticate with `Authorization`, or the subprotocol `' +
      BEARER_PROTOCOL_PREFIX +
      "<token, base64url without padding>`, or the session cookie (only from the service's own origin or `CORS_ORIGINS`). " +
      'The pod is created after the upgrade: a failure to start it (`ErrImagePull: …`) ends the session with a Status on channel 3.',
  })
  @ApiResponse({ status: 200, description: 'Never sent: the route answers the upgrade (101) or an error' })
  @ApiErrors(400, 401, 403, 404, 429, 502, 504)
  nodeShell(): never {
    throw new BadRequestException([
      `the node shell is a WebSocket upgrade: send 'Connection: Upgrade' and 'Upgrade: websocket' with a subprotocol (${allowedProtocols('exec').join(', ')})`,
    ]);
  }
}
