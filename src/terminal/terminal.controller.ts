import { applyDecorators, BadRequestException, Controller, Get } from '@nestjs/common';
import { ApiParam, ApiQuery, ApiResponse, ApiTags } from '@nestjs/swagger';
import { Authenticated } from '../auth/auth.decorators.js';
import { ApiErrors } from '../common/api-errors.js';
import { allowedProtocols, BEARER_PROTOCOL_PREFIX, type TerminalKind } from './terminal-protocol.js';
import { ApiTargetCluster } from '../clusters/target-cluster.js';

const BOOLEAN_QUERY = (name: string, description: string) =>
  ApiQuery({ name, required: false, schema: { type: 'boolean' }, description });

/** The documentation of one upgrade; the upgrade itself is served by TerminalService, before any route. */
const Upgrade = (kind: TerminalKind) =>
  applyDecorators(
    ApiTargetCluster(),
    ApiParam({ name: 'namespace', type: String, example: 'default' }),
    ApiParam({ name: 'name', type: String, description: 'The pod', example: 'web-0' }),
    ...(kind === 'portforward'
      ? [ApiQuery({ name: 'ports', required: true, type: String, description: 'Pod port(s) to forward, e.g. `8080`' })]
      : [
          ApiQuery({
            name: 'container',
            required: false,
            type: String,
            description: 'The container (required when the pod has several)',
          }),
          ...(kind === 'exec'
            ? [
                ApiQuery({
                  name: 'command',
                  required: true,
                  type: [String],
                  description: 'The command and its arguments, one `command` each',
                }),
              ]
            : []),
          BOOLEAN_QUERY('stdin', 'Pass stdin (channel 0)'),
          BOOLEAN_QUERY('stdout', 'Return stdout (channel 1)'),
          BOOLEAN_QUERY('stderr', 'Return stderr (channel 2; not with tty)'),
          BOOLEAN_QUERY('tty', 'Allocate a terminal (resize on channel 4)'),
          BOOLEAN_QUERY(
            'resumable',
            'Make the session resumable: the first message is then a text message ' +
              '`{"session": "<id>", "resumeSeconds": N}`, and a dropped connection (anything but a close with 1000) ' +
              'leaves the session open for `resumeSeconds` (docs/TERMINAL.md, Resuming a session)',
          ),
          ApiQuery({
            name: 'resume',
            required: false,
            type: String,
            description:
              'Resume the session with this id (in place of `resumable=true`, with the same route and query): ' +
              'the output after `offset`, then live output. 410 when the session has ended or the output after ' +
              "`offset` is no longer kept; 403 when it is another user's",
          }),
          ApiQuery({
            name: 'offset',
            required: false,
            schema: { type: 'integer', minimum: 0 },
            description: 'With `resume`: the bytes of output received on channels 1 and 2 together',
          }),
        ]),
    ApiResponse({
      status: 101,
      description:
        `Switching Protocols: a WebSocket speaking \`${allowedProtocols(kind).join('`, `')}\`. Authenticate with ` +
        '`Authorization`, or the subprotocol `' +
        BEARER_PROTOCOL_PREFIX +
        '<token, base64url without padding>`, ' +
        "or the session cookie (only from the service's own origin or `CORS_ORIGINS`).",
    }),
    ApiErrors(
      400,
      401,
      403,
      404,
      409,
      ...(kind === 'portforward'
        ? []
        : [{ 410: 'The session to resume has ended, or the output after `offset` is no longer kept' }]),
      429,
      502,
      504,
    ),
  );

function upgradeRequired(kind: TerminalKind): never {
  throw new BadRequestException([
    `${kind} is a WebSocket upgrade: send 'Connection: Upgrade' and 'Upgrade: websocket' with a subprotocol (${allowedProtocols(kind).join(', ')})`,
  ]);
}

/**
 * The terminal's three WebSocket upgrades (docs/TERMINAL.md), documented here; a GET that is not an
 * upgrade reaches these routes and is told to upgrade (400). Needs verb `exec`, `attach` or
 * `portforward` on `pods`, which only a rule naming the verb grants.
 */
@ApiTags('Terminal')
@Controller()
export class TerminalController {
  /** Runs a command in a pod's container over a WebSocket (the Kubernetes channel protocol). */
  @Authenticated()
  @Get('pods/:namespace/:name/exec')
  @Upgrade('exec')
  execPod(): never {
    upgradeRequired('exec');
  }

  /** Attaches to the running process of a pod's container over a WebSocket. */
  @Authenticated()
  @Get('pods/:namespace/:name/attach')
  @Upgrade('attach')
  attachPod(): never {
    upgradeRequired('attach');
  }

  /** Forwards connections to a pod's port(s) over a WebSocket (two channels per port: data and error). */
  @Authenticated()
  @Get('pods/:namespace/:name/portforward')
  @Upgrade('portforward')
  portForwardPod(): never {
    upgradeRequired('portforward');
  }
}
