import { CLUSTER_NAME_PATTERN } from '../../clusters/cluster-name.js';
import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { IsISO8601, IsOptional, IsString, Length, Matches } from 'class-validator';
import { ValidatePage, ValidatePageSize } from '../../common/validation.js';

/** A date (`2026-01-31`, midnight UTC) or a date-time with `Z` or an offset. */
/** An audited name (resource, namespace, object name) as stored: 1–253 printable ASCII characters without spaces. */
const PRINTABLE_253 = /^[\x21-\x7e]{1,253}$/;
/** `404`, `4xx` (any case), comma-separated, at most 10. */
export const STATUS_FILTER = /^(?:[1-5][0-9]{2}|[1-5][xX]{2})(?:,(?:[1-5][0-9]{2}|[1-5][xX]{2})){0,9}$/;

const TIMESTAMP = /^\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:\d{2}))?$/;

export class ListAuditEventsQueryDto {
  /** Page number, from 1. */
  @ValidatePage()
  page: number = 1;

  /** Events per page, 1–100. */
  @ValidatePageSize()
  size: number = 20;

  /** Only events of this actor: a username or an API key name, ignoring case. */
  @ApiPropertyOptional({ minLength: 1, maxLength: 256 })
  @IsOptional()
  @IsString()
  @Length(1, 256)
  actor?: string;

  /** Only events of this operation (an operationId: `createUser`, `patchResource`, `login`, …). */
  @ApiPropertyOptional({ pattern: '^[A-Za-z][A-Za-z0-9]{0,63}$', example: 'deleteResource' })
  @IsOptional()
  @IsString()
  @Matches(/^[A-Za-z][A-Za-z0-9]{0,63}$/, { message: 'operation must be an operationId such as createUser' })
  operation?: string;

  /** Only resource calls to this cluster (by name). */
  @ApiPropertyOptional({ minLength: 1, maxLength: 253 })
  @IsOptional()
  @IsString()
  @Matches(CLUSTER_NAME_PATTERN, { message: 'cluster must be a cluster name: 1–253 printable characters' })
  cluster?: string;

  /** Only resource calls on this resource, as recorded: as the route's path named it (`configmaps`, `deployments.apps`). */
  @ApiPropertyOptional({ minLength: 1, maxLength: 253 })
  @IsOptional()
  @IsString()
  @Matches(PRINTABLE_253, { message: 'resource must be 1–253 printable characters without spaces' })
  resource?: string;

  /** Only resource calls in this namespace (`_all` for cluster-scoped objects and lists across namespaces). */
  @ApiPropertyOptional({ minLength: 1, maxLength: 253 })
  @IsOptional()
  @IsString()
  @Matches(PRINTABLE_253, { message: 'namespace must be 1–253 printable characters without spaces' })
  namespace?: string;

  /** Only resource calls on the object of this name; with `cluster`, `resource` and `namespace`, one object's history. */
  @ApiPropertyOptional({ minLength: 1, maxLength: 253 })
  @IsOptional()
  @IsString()
  @Matches(PRINTABLE_253, { message: 'name must be 1–253 printable characters without spaces' })
  name?: string;

  /**
   * Only events that ended with one of these statuses, comma-separated: an exact code (`404`) or a class
   * (`4xx`); at most 10. `403,5xx`: refusals and the service's or the cluster's failures.
   */
  @ApiPropertyOptional({ pattern: STATUS_FILTER.source })
  @IsOptional()
  @IsString()
  @Matches(STATUS_FILTER, {
    message: "status must be status codes (404) or classes (4xx), comma-separated, at most 10: e.g. '403,5xx'",
  })
  status?: string;

  /** Only events at or after this time (ISO 8601: a date, or a date-time with `Z` or an offset). */
  @ApiPropertyOptional({ type: String, format: 'date-time', example: '2026-01-31T00:00:00Z' })
  @IsOptional()
  @IsString()
  @Matches(TIMESTAMP, { message: 'since must be an ISO 8601 date or date-time with Z or an offset' })
  @IsISO8601({ strict: true }, { message: 'since must be a valid date' })
  since?: string;

  /** Only events before this time (same format as `since`; must be later than it). */
  @ApiPropertyOptional({ type: String, format: 'date-time', example: '2026-02-01T00:00:00Z' })
  @IsOptional()
  @IsString()
  @Matches(TIMESTAMP, { message: 'until must be an ISO 8601 date or date-time with Z or an offset' })
  @IsISO8601({ strict: true }, { message: 'until must be a valid date' })
  until?: string;
}

export class AuditActorDto {
  /** `user`, `apiKey`, `bootstrap` (first-time setup before any user exists) or `anonymous`. */
  @ApiProperty({ enum: ['user', 'apiKey', 'bootstrap', 'anonymous'] })
  kind: string;
  /** User id or API key id; null when not known (a failed login of an unknown user). */
  @ApiProperty({ type: 'integer', nullable: true })
  id: number | null;
  /** Username or API key name; for a login, the username that was tried. */
  @ApiProperty({ type: String, nullable: true })
  name: string | null;
}

export class AuditTargetDto {
  /** What `id` names on admin and auth routes: `user`, `cluster`, `apiKey`, `role`; null on resource routes. */
  @ApiProperty({ type: String, nullable: true })
  kind: string | null;
  @ApiProperty({ type: String, nullable: true })
  id: string | null;
  /** Resource routes: the cluster named in `x-cluster-name`. */
  @ApiProperty({ type: String, nullable: true })
  cluster: string | null;
  /** Resource routes: the resource as in the path (`configmaps`, `deployments.apps`). */
  @ApiProperty({ type: String, nullable: true })
  resource: string | null;
  /** Resource routes: the namespace, or `_all`. */
  @ApiProperty({ type: String, nullable: true })
  namespace: string | null;
  /** Resource routes: the object's name (null on create and list). */
  @ApiProperty({ type: String, nullable: true })
  name: string | null;
}

/** One audited call. Never a body: no passwords, tokens, keys, kubeconfigs or object data. */
export class AuditEventDto {
  @ApiProperty({ type: 'integer' })
  id: number;
  /** When the call was received (ISO 8601 UTC). */
  @ApiProperty({ type: String, format: 'date-time' })
  at: string;
  actor: AuditActorDto;
  /** The client's address (from `X-Forwarded-For` only with `CAS_TRUST_PROXY`). */
  @ApiProperty({ type: String, nullable: true })
  clientAddress: string | null;
  /** The route's operationId. */
  operation: string;
  /** The HTTP method. */
  method: string;
  /** The outcome: the HTTP status of the answer (also when the caller hung up before receiving it). */
  @ApiProperty({ type: 'integer' })
  statusCode: number;
  /** The request's `x-request-id`. */
  requestId: string;
  target: AuditTargetDto;
  /** Resource writes: the object's uid after the write. */
  @ApiProperty({ type: String, nullable: true })
  uid: string | null;
  /** Resource writes: the object's resourceVersion after the write. */
  @ApiProperty({ type: String, nullable: true })
  resourceVersion: string | null;
  /**
   * How many calls the event stands for: 1, except for logins refused before any password check
   * (429, 503), tallied per username, client address and login throttle window (`at` is the first).
   * Past 10 usernames per address the name is null; past 10,000 tallies the address is null too.
   */
  @ApiProperty({ type: 'integer', minimum: 1 })
  count: number;
  /**
   * Terminal sessions (exec, attach, port-forward): on the start row `event: "start"`, `container`,
   * `command`, `tty`, `ports`; on the end row `event: "end"`, `durationMs`, `exitCode` (when the channel
   * carried one), `bytesIn`, `bytesOut`, `reason`, `ports` of a SPDY port-forward (`portsTruncated: true` when a
   * long one opened more streams than were read), and `recording: true` when
   * `GET /api/v1/admin/audit/{id}/recording` has its output; `event: "abandoned"` when the cluster had
   * started the command but the client left before its upgrade completed. A write asked as a dry run (`dryRun=All`
   * on a resource route, apply or the Kubernetes path): `{ "dryRun": true }` (nothing was changed).
   * Null for every other call.
   */
  @ApiProperty({
    type: 'object',
    additionalProperties: true,
    nullable: true,
    example: { event: 'end', durationMs: 5230, exitCode: 0, bytesIn: 12, bytesOut: 40, recording: true },
  })
  detail: Record<string, unknown> | null;
}

export class AuditEventListDto {
  /** Newest first. */
  events: AuditEventDto[];
  /** How many events match the filters, over all pages. */
  @ApiProperty({ type: 'integer' })
  total: number;
  @ApiProperty({ type: 'integer' })
  page: number;
  @ApiProperty({ type: 'integer' })
  size: number;
}
