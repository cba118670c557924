import { applyDecorators } from '@nestjs/common';
import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { Type } from 'class-transformer';
import {
  ArrayMaxSize,
  IsArray,
  IsOptional,
  IsString,
  Matches,
  MaxLength,
  ValidateBy,
  ValidateNested,
  type ValidationArguments,
} from 'class-validator';
import { ANY, NAMED_ONLY_SUBRESOURCES, VERBS } from '../../access/rules.js';
import { CLUSTER_NAME_PATTERN } from '../../clusters/cluster-name.js';
import { ROLE_NAME_PATTERN } from '../role.entity.js';

export const MAX_RULES = 50;
const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
/** `<plural>` or `<plural>.<group>`, optionally `/status` (writing status is granted apart). */
const RESOURCE_ID = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*(\/status)?$/;

type ListKind = 'clusters' | 'namespaces' | 'resources' | 'verbs';

/** What each list of a rule accepts, besides `*`. Lengths are checked before any pattern runs. */
const LISTS: Record<ListKind, { max: number; what: string; valid: (v: string) => boolean; example: string[] }> = {
  clusters: {
    max: 50,
    what: 'a cluster name (1–253 printable characters without spaces)',
    valid: (v) => v.length <= 253 && CLUSTER_NAME_PATTERN.test(v),
    example: ['prod'],
  },
  namespaces: {
    max: 100,
    what: 'a namespace (a DNS label of at most 63 characters)',
    valid: (v) => v.length <= 63 && DNS_LABEL.test(v),
    example: ['shop'],
  },
  resources: {
    max: 100,
    what: "a resource: '<plural>' or '<plural>.<group>' (configmaps, deployments.apps), its status ('pods/status'), 'pods/ephemeralcontainers' or 'nodes/shell'",
    valid: (v) => v.length <= 253 && (RESOURCE_ID.test(v) || NAMED_ONLY_SUBRESOURCES.has(v)),
    example: ['deployments.apps', 'pods'],
  },
  verbs: {
    max: VERBS.length + 1,
    what: `a verb (${VERBS.join(', ')})`,
    valid: (v) => (VERBS as readonly string[]).includes(v),
    example: ['get', 'list', 'patch'],
  },
};

function listProblem(kind: ListKind, value: unknown): string | null {
  const spec = LISTS[kind];
  if (!Array.isArray(value)) return 'must be an array of strings';
  if (value.length === 0) return "must not be empty (use '*' for every value)";
  if (value.length > spec.max) return `must have at most ${spec.max} entries`;
  const seen = new Set<string>();
  for (const item of value) {
    if (typeof item !== 'string') return 'must hold only strings';
    const shown = item.length > 40 ? `${item.slice(0, 40)}…` : item;
    if (item !== ANY && !spec.valid(item)) return `entry '${shown}' is neither '*' nor ${spec.what}`;
    if (seen.has(item)) return `has '${shown}' twice`;
    seen.add(item);
  }
  return null;
}

function RuleList(kind: ListKind, description: string) {
  const spec = LISTS[kind];
  return applyDecorators(
    ApiProperty({
      type: [String],
      minItems: 1,
      maxItems: spec.max,
      uniqueItems: true,
      example: spec.example,
      description,
      ...(kind === 'verbs' ? { items: { type: 'string', enum: [...VERBS, ANY] } } : {}),
    }),
    ValidateBy({
      name: `ruleList.${kind}`,
      validator: {
        validate: (value: unknown) => listProblem(kind, value) === null,
        defaultMessage: (args?: ValidationArguments) => `${args?.property} ${listProblem(kind, args?.value)}`,
      },
    }),
  );
}

/** One grant: every combination of the listed clusters, namespaces, resources and verbs. */
export class RoleRuleDto {
  @RuleList('clusters', "Cluster names, or '*' for every cluster")
  clusters: string[];

  @RuleList(
    'namespaces',
    "Namespaces, or '*' for every namespace; cluster-scoped resources and lists across all namespaces (`_all`) need '*'",
  )
  namespaces: string[];

  @RuleList(
    'resources',
    "Resources as the routes name them (`configmaps`, `deployments.apps`), or '*' for every resource except `secrets`, `metrics`, `helmreleases` (the Helm routes) and status (`pods/status`, `deployments.apps/status`: writing an object's status needs `update`/`patch` on it), which a rule must name",
  )
  resources: string[];

  @RuleList('verbs', "Verbs, or '*' for all of them")
  verbs: string[];
}

function ValidateRoleName(options: { optional?: boolean } = {}) {
  const api = { minLength: 1, maxLength: 32, pattern: ROLE_NAME_PATTERN.source, example: 'shop-dev' };
  return applyDecorators(
    ...(options.optional ? [ApiPropertyOptional(api), IsOptional()] : [ApiProperty(api)]),
    IsString(),
    MaxLength(32),
    Matches(ROLE_NAME_PATTERN, {
      message:
        'name must be 1–32 lower-case letters, digits, dots, underscores or hyphens, starting and ending with a letter or digit',
    }),
  );
}

function ValidateRules(options: { optional?: boolean } = {}) {
  return applyDecorators(
    ...(options.optional
      ? [ApiPropertyOptional({ type: [RoleRuleDto], maxItems: MAX_RULES }), IsOptional()]
      : [ApiProperty({ type: [RoleRuleDto], maxItems: MAX_RULES })]),
    IsArray(),
    ArrayMaxSize(MAX_RULES),
    ValidateNested({ each: true }),
    Type(() => RoleRuleDto),
  );
}

export class CreateRoleDto {
  /** Unique; users and API keys name it in their roles. */
  @ValidateRoleName()
  name: string;

  @ApiPropertyOptional({ maxLength: 200 })
  @IsOptional()
  @IsString()
  @MaxLength(200)
  description?: string;

  /** What the role grants; nothing else is allowed (deny by default). At most 50 rules. */
  @ValidateRules()
  rules: RoleRuleDto[];
}

/** Only the properties sent change. */
export class UpdateRoleDto {
  @ValidateRoleName({ optional: true })
  name?: string;

  @ApiPropertyOptional({ maxLength: 200 })
  @IsOptional()
  @IsString()
  @MaxLength(200)
  description?: string;

  /** Replaces all of the role's rules. */
  @ValidateRules({ optional: true })
  rules?: RoleRuleDto[];
}

export class RoleRuleResponseDto {
  clusters: string[];
  namespaces: string[];
  resources: string[];
  verbs: string[];
}

export class RoleDetailDto {
  @ApiProperty({ type: 'integer' })
  id: number;
  name: string;
  description: string;
  /** `admin` and `viewer` are built in: they cannot be changed or deleted. */
  builtin: boolean;
  rules: RoleRuleResponseDto[];
}
