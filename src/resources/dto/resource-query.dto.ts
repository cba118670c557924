import { ApiPropertyOptional } from '@nestjs/swagger';
import { Type } from 'class-transformer';
import { IsIn, IsInt, IsOptional, IsString, Max, MaxLength, Min } from 'class-validator';

const BOOLEAN = ['true', 'false'];

/** Passed through to the cluster's list call; `watch=true` streams the changes instead. */
export class ListResourcesQueryDto {
  /**
   * `true`: stream watch events instead of answering with a list: newline-delimited JSON (`Accept:
   * application/json`, the default, or `application/x-ndjson`), or Server-Sent Events (`Accept:
   * text/event-stream`). Without `resourceVersion` the stream starts with every current object as ADDED.
   */
  @ApiPropertyOptional({ enum: BOOLEAN })
  @IsOptional()
  @IsIn(BOOLEAN)
  watch?: string;

  /** With `watch=true`: also send BOOKMARK events (the latest resourceVersion, to resume from). */
  @ApiPropertyOptional({ enum: BOOLEAN })
  @IsOptional()
  @IsIn(BOOLEAN)
  allowWatchBookmarks?: string;

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
  @ApiPropertyOptional({ minimum: 1 })
  @IsOptional()
  @Type(() => Number)
  @IsInt()
  @Min(1)
  limit?: number;

  /** The `metadata.continue` token of the previous page. */
  @IsOptional()
  @IsString()
  @MaxLength(8192)
  continue?: string;

  /** List: the version to read at. Watch: stream the changes after this version (older than the service keeps → 410). */
  @IsOptional()
  @IsString()
  @MaxLength(64)
  resourceVersion?: string;

  @ApiPropertyOptional({ enum: ['NotOlderThan', 'Exact'] })
  @IsOptional()
  @IsIn(['NotOlderThan', 'Exact'])
  resourceVersionMatch?: string;

  /** List: the cluster's time-out for the call. Watch: the stream ends after this many seconds. */
  @ApiPropertyOptional({ minimum: 1, maximum: 3600 })
  @IsOptional()
  @Type(() => Number)
  @IsInt()
  @Min(1)
  @Max(3600)
  timeoutSeconds?: number;
}

/** The events of one object; `watch=true` streams them like a watch of a list. */
export class ObjectEventsQueryDto {
  /** `true`: stream the object's events (core/v1 Event watch events) instead of answering with a list. */
  @ApiPropertyOptional({ enum: BOOLEAN })
  @IsOptional()
  @IsIn(BOOLEAN)
  watch?: string;

  /** With `watch=true`: also send BOOKMARK events. */
  @ApiPropertyOptional({ enum: BOOLEAN })
  @IsOptional()
  @IsIn(BOOLEAN)
  allowWatchBookmarks?: string;

  /** With `watch=true`: stream the changes after this version. */
  @IsOptional()
  @IsString()
  @MaxLength(64)
  resourceVersion?: string;

  /** With `watch=true`: the stream ends after this many seconds. */
  @ApiPropertyOptional({ minimum: 1, maximum: 3600 })
  @IsOptional()
  @Type(() => Number)
  @IsInt()
  @Min(1)
  @Max(3600)
  timeoutSeconds?: number;
}

/** Query parameters that only make sense in one of the two modes of a list route: named in a 400 otherwise. */
export function watchQueryProblems(q: {
  watch?: string;
  allowWatchBookmarks?: string;
  limit?: number;
  continue?: string;
  resourceVersionMatch?: string;
  resourceVersion?: string;
  timeoutSeconds?: number;
}): string[] {
  const watching = q.watch === 'true';
  const problems: string[] = [];
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

  /** Name of the actor making the change, recorded in managedFields. */
  @IsOptional()
  @IsString()
  @MaxLength(128)
  fieldManager?: string;
}

export class PatchResourceQueryDto extends WriteResourceQueryDto {
  /** Absent: strategic merge patch; `merge`: JSON merge patch (RFC 7386); `json`: JSON patch (RFC 6902). */
  @ApiPropertyOptional({ enum: ['merge', 'json'] })
  @IsOptional()
  @IsIn(['merge', 'json'], { message: "patchType must be 'merge' or 'json' (or absent for a strategic merge patch)" })
  patchType?: 'merge' | 'json';
}

export class DeleteResourceQueryDto {
  /** `true`: delete with a grace period of 0. */
  @ApiPropertyOptional({ enum: BOOLEAN })
  @IsOptional()
  @IsIn(BOOLEAN)
  force?: string;

  /** `false`: orphan the dependents; otherwise Foreground deletion (dependents first). */
  @ApiPropertyOptional({ enum: BOOLEAN })
  @IsOptional()
  @IsIn(BOOLEAN)
  cascade?: string;

  /** `false`: answer at once with the cluster's answer; otherwise wait until the object is gone. */
  @ApiPropertyOptional({ enum: BOOLEAN })
  @IsOptional()
  @IsIn(BOOLEAN)
  wait?: string;

  /** How long to wait for the object to be gone (default 60); on time-out 504, and the object stays marked for deletion. */
  @ApiPropertyOptional({ minimum: 1, maximum: 300, default: 60 })
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
