import { applyDecorators } from '@nestjs/common';
import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { IsOptional, ValidateBy, type ValidationArguments } from 'class-validator';
import {
  commandProblem,
  containerNameProblem,
  imageProblem,
  MAX_COMMAND_ARG,
  MAX_COMMAND_ARGS,
  MAX_CONTAINER_NAME,
  MAX_IMAGE,
} from '../../k8s/container-input.js';

/** A class-validator rule from one of debug-input's checks: the message names what is wrong. */
function Checked(name: string, problem: (value: unknown, field: string) => string | null) {
  return ValidateBy({
    name,
    validator: {
      validate: (value: unknown, args?: ValidationArguments) => problem(value, args?.property ?? name) === null,
      defaultMessage: (args?: ValidationArguments) => problem(args?.value, args?.property ?? name) ?? '',
    },
  });
}

const ContainerName = (description: string) =>
  applyDecorators(
    ApiPropertyOptional({ maxLength: MAX_CONTAINER_NAME, pattern: '^[a-z0-9]([-a-z0-9]*[a-z0-9])?$', description }),
    IsOptional(),
    Checked('containerName', (value, field) => containerNameProblem(field, value)),
  );

export class DebugPodDto {
  /** The debug container's image: a reference (`busybox:1.36`, `registry.example.com/tools/netshoot@sha256:…`). */
  @ApiProperty({ maxLength: MAX_IMAGE, example: 'busybox:1.36' })
  @Checked('image', (value) => imageProblem(value))
  image: string;

  @ContainerName("The pod's container whose processes the debug container sees (its process namespace); default none")
  target?: string;

  /** The program and its arguments (never a shell line: each is one argv entry); default the image's entrypoint. */
  @ApiPropertyOptional({
    type: [String],
    minItems: 1,
    maxItems: MAX_COMMAND_ARGS,
    items: { type: 'string', maxLength: MAX_COMMAND_ARG },
    example: ['sh'],
  })
  @IsOptional()
  @Checked('command', (value) => commandProblem(value))
  command?: string[];

  @ContainerName(
    "The debug container's name; default `debugger-<5 characters>`. Another container of the pod with it is a 409",
  )
  name?: string;
}

export class DebugContainerDto {
  /** The debug container's name: attach with `GET /api/v1/pods/<ns>/<pod>/attach?container=<name>`. */
  @ApiProperty({ example: 'debugger-x7k2p' })
  name: string;
  @ApiProperty({ example: 'busybox:1.36' })
  image: string;
  @ApiProperty({ type: String, nullable: true, example: 'app' })
  target: string | null;
  @ApiProperty({ example: 'web-0' })
  pod: string;
  @ApiProperty({ example: 'default' })
  namespace: string;
  @ApiProperty({ example: 'prod' })
  cluster: string;
  /** The object the cluster's subresource took: `EphemeralContainers` (v1.16–v1.21) or `Pod` (v1.22 on). */
  @ApiProperty({ enum: ['EphemeralContainers', 'Pod'] })
  api: 'EphemeralContainers' | 'Pod';
  /** The terminal route that attaches to it (a WebSocket; add `cluster=` when the header cannot be sent). */
  @ApiProperty({
    example: '/api/v1/pods/default/web-0/attach?container=debugger-x7k2p&stdin=true&stdout=true&tty=true',
  })
  attach: string;
}
