import { applyDecorators } from '@nestjs/common';
import { ApiPropertyOptional } from '@nestjs/swagger';
import { Transform, Type } from 'class-transformer';
import { IsBoolean, IsIn, IsInt, IsOptional, IsString, Matches, Max, MaxLength, Min } from 'class-validator';
import { PageSize } from '../../common/page-size.js';

/** A boolean query parameter: `true` or `false` (what a client serialises a boolean to); anything else is a 400. */
export function QueryBoolean(description: string) {
  return applyDecorators(
    ApiPropertyOptional({ type: 'boolean', description }),
    IsOptional(),
    Transform(({ value }) => (value === 'true' ? true : value === 'false' ? false : value)),
    IsBoolean({ message: ({ property }) => `${property} must be true or false` }),
  );
}

/** Passed through to the cluster's list call; `watch=true` streams the changes instead. */
export class ListResourcesQueryDto {
  @QueryBoolean(
    '`true`: stream watch events instead of answering with a list: newline-delimited JSON (`Accept: application/json`, the default, or `application/x-ndjson`), or Server-Sent Events (`Accept: text/event-stream`). Without `resourceVersion` the stream starts with every current object as ADDED.',
  )
  watch?: boolean;

  @QueryBoolean('With `watch=true`: also send BOOKMARK events (the latest resourceVersion, to resume from).')
  allowWatchBookmarks?: boolean;

  /** e.g. `app=web,tier!=cache` */
  @IsOptional()
  @IsString()
  @MaxLength(4096)
  labelSelector?: string;

  /** e.g. `metadata.name=x,status.phase=Running` */
  @IsOptional()
  @IsString()
  @MaxLength(4096)
  fieldSelector?: string;

  /** Page size; the answer's `metadata.continue` fetches the next page. */
  @ApiPropertyOptional({ type: 'integer', minimum: 1, maximum: 1_000_000_000 })
  @IsOptional()
  @Type(() => Number)
  @IsInt()
  @Min(1)
  @Max(1_000_000_000)
  limit?: number;

  /** The `metadata.continue` token of the previous page. */
  @IsOptional()
  @IsString()
  @MaxLength(8192)
  continue?: string;

  /**
   * List: the version to read at. Watch: stream the changes after this version (older than the service keeps → 410).
   * Paged query with `watch=true`: the `metadata.resourceVersion` of the page the watch follows (a `CHANGED` notice
   * comes at once when the list changed after it).
   */
  @IsOptional()
  @IsString()
  @MaxLength(64)
  resourceVersion?: string;

  @ApiPropertyOptional({ enum: ['NotOlderThan', 'Exact'] })
  @IsOptional()
  @IsIn(['NotOlderThan', 'Exact'])
  resourceVersionMatch?: string;

  /** List: the cluster's time-out for the call. Watch: the stream ends after this many seconds. */
  @ApiPropertyOptional({ type: 'integer', minimum: 1, maximum: 3600 })
  @IsOptional()
  @Type(() => Number)
  @IsInt()
  @Min(1)
  @Max(3600)
  timeoutSeconds?: number;

  /** Paged query (any of `page`, `size`, `sortBy`, `sortOrder`, `search`): the page to answer, from 1. */
  @ApiPropertyOptional({ type: 'integer', minimum: 1, maximum: 1_000_000, example: 1 })
  @IsOptional()
  @Type(() => Number)
  @IsInt()
  @Min(1)
  @Max(1_000_000)
  page?: number;

  /** Paged query: objects per page (default 50). */
  @PageSize()
  size?: number;

  /** Paged query: the dotted field path to sort by (default `metadata.name`), e.g. `metadata.creationTimestamp`, `status.phase`. */
  @ApiPropertyOptional({ example: 'metadata.creationTimestamp', maxLength: 256 })
  @IsOptional()
  @IsString()
  @MaxLength(256)
  @Matches(/^[A-Za-z0-9_$-]+(\.[A-Za-z0-9_$/-]+)*$/, {
    message: 'sortBy must be a dotted field path such as metadata.name',
  })
  sortBy?: string;

  /** Paged query: `asc` (default) or `desc`; ties are broken by namespace, then name. */
  @ApiPropertyOptional({ enum: ['asc', 'desc'] })
  @IsOptional()
  @IsIn(['asc', 'desc'])
  sortOrder?: 'asc' | 'desc';

  /** Paged query: a case-insensitive substring of the name, the namespace or a label value. */
  @ApiPropertyOptional({ maxLength: 256, example: 'web' })
  @IsOptional()
  @IsString()
  @MaxLength(256)
  search?: string;

  @QueryBoolean(
    'Paged query: `true` keeps `metadata.managedFields` in the items (left out by default: they are often a third of an object and of use to few pages).',
  )
  showManagedFields?: boolean;
}

/** The query parameters that make a list call a paged query (docs/LISTS.md). */
export const PAGE_PARAMS = ['page', 'size', 'sortBy', 'sortOrder', 'search'] as const;

/** The events of one object; `watch=true` streams them like a watch of a list. */
export class ObjectEventsQueryDto {
  @QueryBoolean("`true`: stream the object's events (core/v1 Event watch events) instead of answering with a list.")
  watch?: boolean;

  @QueryBoolean('With `watch=true`: also send BOOKMARK events.')
  allowWatchBookmarks?: boolean;

  /** With `watch=true`: stream the changes after this version. */
  @IsOptional()
  @IsString()
  @MaxLength(64)
  resourceVersion?: string;

  /** With `watch=true`: the stream ends after this many seconds. */
  @ApiPropertyOptional({ type: 'integer', minimum: 1, maximum: 3600 })
  @IsOptional()
  @Type(() => Number)
  @IsInt()
  @Min(1)
  @Max(3600)
  timeoutSeconds?: number;
}

/** Query parameters that only make sense in one of the two modes of a list route: named in a 400 otherwise. */
export function watchQueryProblems(q: {
  watch?: boolean;
  showManagedFields?: boolean;
  allowWatchBookmarks?: boolean;
  limit?: number;
  continue?: string;
  resourceVersionMatch?: string;
  resourceVersion?: string;
  timeoutSeconds?: number;
}): string[] {
  const watching = q.watch === true;
  const problems: string[] = [];
  if (q.showManagedFields !== undefined) {
    problems.push('showManagedFields needs a paged query (page, size, sortBy, sortOrder or search)');
  }
  if (watching) {
    for (const name of ['limit', 'continue', 'resourceVersionMatch'] as const) {
      if (q[name] !== undefined) problems.push(`${name} cannot be used with watch=true`);
    }
  } else if (q.allowWatchBookmarks !== undefined) {
    problems.push('allowWatchBookmarks needs watch=true');
  }
  return problems;
}

export class GetResourceQueryDto {
  @IsOptional()
  @IsString()
  @MaxLength(64)
  resourceVersion?: string;
}

/** Passed through to the cluster on create, replace and patch. */
export class WriteResourceQueryDto {
  /** `All`: the cluster validates and answers without storing anything. */
  @ApiPropertyOptional({ enum: ['All'] })
  @IsOptional()
  @IsIn(['All'])
  dryRun?: string;

  /** Name of the actor making the change, recorded in managedFields; a `cas:` name other than your own is a 403. */
  @IsOptional()
  @IsString()
  @MaxLength(128)
  fieldManager?: string;
}

export class PatchResourceQueryDto extends WriteResourceQueryDto {
  /**
   * `strategic`: strategic merge patch; `merge`: JSON merge patch (RFC 7386); `json`: JSON patch (RFC 6902);
   * `apply`: server-side apply (the body, YAML or JSON, is the object as you want it; `fieldManager` defaults to
   * `cas:<username>`, `cas:key:<name>` for API keys). Absent: the request's Content-Type decides
   * (`application/merge-patch+json`, `application/json-patch+json`, `application/strategic-merge-patch+json`,
   * `application/apply-patch+yaml`; plain `application/json` is a strategic merge patch).
   */
  @ApiPropertyOptional({ enum: ['strategic', 'merge', 'json', 'apply'] })
  @IsOptional()
  @IsIn(['strategic', 'merge', 'json', 'apply'], {
    message: "patchType must be 'strategic', 'merge', 'json' or 'apply' (or absent: the Content-Type decides)",
  })
  patchType?: 'strategic' | 'merge' | 'json' | 'apply';

  @QueryBoolean(
    "Server-side apply only: `true` takes over the fields another manager owns instead of answering the cluster's 409 conflict.",
  )
  force?: boolean;
}

export class DeleteResourceQueryDto {
  @QueryBoolean('`true`: delete with a grace period of 0 (default `false`).')
  force?: boolean;

  @QueryBoolean('`false`: orphan the dependents; otherwise (default `true`) Foreground deletion, dependents first.')
  cascade?: boolean;

  @QueryBoolean(
    "`false`: answer at once with the cluster's answer; otherwise (default `true`) wait until the object is gone.",
  )
  wait?: boolean;

  /** How long to wait for the object to be gone (default 60); on time-out 504, and the object stays marked for deletion. */
  @ApiPropertyOptional({ type: 'integer', minimum: 1, maximum: 300, default: 60 })
  @IsOptional()
  @Type(() => Number)
  @IsInt()
  @Min(1)
  @Max(300)
  timeoutSeconds?: number;

  @ApiPropertyOptional({ enum: ['All'] })
  @IsOptional()
  @IsIn(['All'])
  dryRun?: string;
}
