import { applyDecorators } from '@nestjs/common';
import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { Type } from 'class-transformer';
import { IsBoolean, IsIn, IsInt, IsOptional, IsString, Max, MaxLength, Min } from 'class-validator';
import { QueryBoolean } from '../../resources/dto/resource-query.dto.js';
import { PageSize } from '../../common/page-size.js';

/** Helm numbers revisions from 1 in an int32. */
export const MAX_REVISION = 2_147_483_647;

/** An optional revision in a query (a string on the wire, a number once validated). */
const OptionalRevision = (example: number) =>
  applyDecorators(
    ApiPropertyOptional({ type: 'integer', minimum: 1, maximum: MAX_REVISION, example }),
    IsOptional(),
    Type(() => Number),
    IsInt(),
    Min(1),
    Max(MAX_REVISION),
  );

export const HELM_SORT_KEYS = ['name', 'namespace', 'updated', 'status', 'chart'] as const;
export type HelmSortKey = (typeof HELM_SORT_KEYS)[number];
/** Helm's release statuses (`helm status`). */
export const HELM_STATUSES = [
  'unknown',
  'deployed',
  'uninstalled',
  'superseded',
  'failed',
  'uninstalling',
  'pending-install',
  'pending-upgrade',
  'pending-rollback',
] as const;

export class ListHelmReleasesQueryDto {
  /** The page to answer, from 1. */
  @ApiPropertyOptional({ type: 'integer', minimum: 1, maximum: 1_000_000, example: 1 })
  @IsOptional()
  @Type(() => Number)
  @IsInt()
  @Min(1)
  @Max(1_000_000)
  page?: number;

  /** Releases per page (default 50). */
  @PageSize()
  size?: number;

  /** What to sort by (default `name`); ties are broken by namespace, then name. `updated` is the last deployment. */
  @ApiPropertyOptional({ enum: HELM_SORT_KEYS })
  @IsOptional()
  @IsIn(HELM_SORT_KEYS)
  sortBy?: HelmSortKey;

  /** `asc` (default) or `desc`. */
  @ApiPropertyOptional({ enum: ['asc', 'desc'] })
  @IsOptional()
  @IsIn(['asc', 'desc'])
  sortOrder?: 'asc' | 'desc';

  /** A case-insensitive substring of the release's name or its chart's name. */
  @ApiPropertyOptional({ maxLength: 256, example: 'web' })
  @IsOptional()
  @IsString()
  @MaxLength(256)
  search?: string;

  /** Only releases whose latest revision has this status. */
  @ApiPropertyOptional({ enum: HELM_STATUSES })
  @IsOptional()
  @IsIn(HELM_STATUSES)
  status?: string;
}

export class HelmDiffQueryDto {
  /** The earlier revision (default: the one before `to`). */
  @OptionalRevision(1)
  from?: number;

  /** The later revision (default: the latest). */
  @OptionalRevision(2)
  to?: number;
}

export class HelmChartRefDto {
  @ApiProperty({ example: 'web' })
  name: string;
  @ApiProperty({ example: '1.2.0' })
  version: string;
  /** '' when the chart names none. */
  @ApiProperty({ example: '2.4.1' })
  appVersion: string;
}

export class HelmReleaseSummaryDto {
  @ApiProperty({ example: 'web' })
  name: string;
  @ApiProperty({ example: 'shop' })
  namespace: string;
  @ApiProperty({ type: 'integer', example: 3 })
  revision: number;
  /** Helm's status of the revision (`deployed`, `superseded`, `failed`, `uninstalled`, `pending-upgrade`, …). */
  @ApiProperty({ example: 'deployed' })
  status: string;
  /** When the revision was last deployed (RFC 3339, as Helm stored it). */
  @ApiProperty({ example: '2026-11-27T20:15:03.123456789Z' })
  updated: string;
  /** Helm's description of what was done (`Install complete`, `Upgrade complete`, `Rollback to 1`). */
  @ApiProperty({ example: 'Upgrade complete' })
  description: string;
  @ApiProperty({ type: HelmChartRefDto })
  chart: HelmChartRefDto;
}

export class HelmReleasePageDto {
  @ApiProperty({ type: [HelmReleaseSummaryDto] })
  items: HelmReleaseSummaryDto[];
  /** Every match the caller may see. */
  @ApiProperty({ type: 'integer', minimum: 0, example: 1 })
  total: number;
  @ApiProperty({ type: 'integer', minimum: 1, example: 1 })
  page: number;
  @ApiProperty({ type: 'integer', minimum: 1, example: 50 })
  size: number;
}

export class HelmHistoryDto {
  /** Every revision Helm keeps, newest first. */
  @ApiProperty({ type: [HelmReleaseSummaryDto] })
  items: HelmReleaseSummaryDto[];
}

export class HelmChartDto extends HelmChartRefDto {
  /** The chart's `Chart.yaml` as Helm stored it (`apiVersion`, `description`, `type`, `dependencies`, …). */
  @ApiProperty({ type: 'object', additionalProperties: true })
  metadata: Record<string, unknown>;
}

export class HelmReleaseInfoDto {
  @ApiProperty({ example: '2026-11-27T20:10:00Z' })
  firstDeployed: string;
  @ApiProperty({ example: '2026-11-27T20:15:03Z' })
  lastDeployed: string;
  /** '' unless the release was uninstalled with its history kept. */
  @ApiProperty({ example: '' })
  deleted: string;
  @ApiProperty({ example: 'deployed' })
  status: string;
  @ApiProperty({ example: 'Upgrade complete' })
  description: string;
}

export class HelmManifestObjectDto {
  @ApiProperty({ example: 'apps/v1' })
  apiVersion: string;
  @ApiProperty({ example: 'Deployment' })
  kind: string;
  @ApiProperty({ example: 'web' })
  name: string;
  /** '' when the manifest leaves it to the release's namespace (or the object is cluster-scoped). */
  @ApiProperty({ example: '' })
  namespace: string;
  /** The chart's template it was rendered from. */
  @ApiProperty({ example: 'web/templates/deployment.yaml' })
  source: string;
}

export class HelmHookRunDto {
  @ApiProperty({ example: '2026-11-27T20:10:01Z' })
  startedAt: string;
  @ApiProperty({ example: '2026-11-27T20:10:04Z' })
  completedAt: string;
  /** `Succeeded`, `Failed`, `Running`, or '' when it never ran. */
  @ApiProperty({ example: 'Succeeded' })
  phase: string;
}

export class HelmHookDto {
  @ApiProperty({ example: 'web-migrate' })
  name: string;
  @ApiProperty({ example: 'Job' })
  kind: string;
  @ApiProperty({ example: 'web/templates/migrate.yaml' })
  path: string;
  @ApiProperty({ type: [String], example: ['pre-upgrade'] })
  events: string[];
  @ApiProperty({ type: 'integer', example: 0 })
  weight: number;
  @ApiProperty({ type: [String], example: ['before-hook-creation'] })
  deletePolicies: string[];
  @ApiProperty({ type: HelmHookRunDto })
  lastRun: HelmHookRunDto;
}

export class HelmReleaseDto extends HelmReleaseSummaryDto {
  @ApiProperty({ type: HelmChartDto })
  declare chart: HelmChartDto;
  @ApiProperty({ type: HelmReleaseInfoDto })
  info: HelmReleaseInfoDto;
  /** The user-supplied values (`helm get values`). */
  @ApiProperty({ type: 'object', additionalProperties: true })
  values: Record<string, unknown>;
  /** The values the revision was rendered with: the chart's defaults under the user's (`helm get values --all`). */
  @ApiProperty({ type: 'object', additionalProperties: true })
  computedValues: Record<string, unknown>;
  /** The rendered manifest (`helm get manifest`), Secrets included: reading a release is reading Secrets. */
  @ApiProperty({ example: '---\n# Source: web/templates/service.yaml\napiVersion: v1\nkind: Service\n…' })
  manifest: string;
  /** Each object of the manifest. */
  @ApiProperty({ type: [HelmManifestObjectDto] })
  objects: HelmManifestObjectDto[];
  /** The chart's rendered notes (`helm get notes`). */
  @ApiProperty({ example: 'Visit http://web.shop/' })
  notes: string;
  @ApiProperty({ type: [HelmHookDto] })
  hooks: HelmHookDto[];
}

export class HelmObjectDiffDto {
  @ApiProperty({ example: 'apps/v1' })
  apiVersion: string;
  @ApiProperty({ example: 'Deployment' })
  kind: string;
  @ApiProperty({ example: 'web' })
  name: string;
  @ApiProperty({ example: '' })
  namespace: string;
  @ApiProperty({ enum: ['added', 'removed', 'changed'] })
  change: 'added' | 'removed' | 'changed';
  /** A unified diff of the object as YAML; a Secret's values shown as `***` (`*** (changed)` where they differ). */
  @ApiProperty({
    example: '--- a/Deployment/web\n+++ b/Deployment/web\n@@ -5,1 +5,1 @@\n-  replicas: 1\n+  replicas: 2\n',
  })
  diff: string;
}

export class HelmDiffDto {
  @ApiProperty({ type: 'integer', example: 1 })
  from: number;
  @ApiProperty({ type: 'integer', example: 2 })
  to: number;
  /** The objects added, removed or changed, in the order of the later manifest (removed ones last). */
  @ApiProperty({ type: [HelmObjectDiffDto] })
  objects: HelmObjectDiffDto[];
  /** How many objects are the same in both. */
  @ApiProperty({ type: 'integer', example: 4 })
  unchanged: number;
  /** A unified diff of the user-supplied values as YAML ('' when equal). */
  @ApiProperty({ example: '--- a/values.yaml\n+++ b/values.yaml\n@@ -1,1 +1,1 @@\n-replicas: 1\n+replicas: 2\n' })
  values: string;
}

const BOOLEAN_QUERY = (description: string) => QueryBoolean(description);

/** Installing: from a chart repository (JSON), or (`application/gzip`) an uploaded archive with these in the query. */
export class InstallHelmReleaseDto {
  /** The release's name: at most 53 lower-case letters, digits, `-` and `.`. */
  @ApiProperty({ maxLength: 53, example: 'web' })
  @IsString()
  @MaxLength(53)
  name: string;

  /** The chart's name in the repository `repo`. */
  @ApiProperty({ maxLength: 100, example: 'nginx' })
  @IsString()
  @MaxLength(100)
  chart: string;

  /** The chart's version (default: the repository's newest). */
  @ApiPropertyOptional({ maxLength: 64, example: '1.2.0' })
  @IsOptional()
  @IsString()
  @MaxLength(64)
  version?: string;

  /** The chart repository: an https URL (its `index.yaml` is read). */
  @ApiProperty({ maxLength: 2048, example: 'https://charts.example.com/stable' })
  @IsString()
  @MaxLength(2048)
  repo: string;

  /** The user-supplied values (an object), as `helm install -f` takes them. */
  @ApiPropertyOptional({ type: 'object', additionalProperties: true, example: { replicas: 2 } })
  @IsOptional()
  values?: Record<string, unknown>;

  /** `true`: render and diff against the live objects; nothing changes. */
  @ApiPropertyOptional({ example: false })
  @IsOptional()
  @IsBoolean()
  dryRun?: boolean;
}

/** The query of an install or upgrade whose body is an uploaded chart archive (`application/gzip`). */
export class HelmArchiveQueryDto {
  /** Install with an archive: the release's name. */
  @ApiPropertyOptional({ maxLength: 53, example: 'web' })
  @IsOptional()
  @IsString()
  @MaxLength(53)
  name?: string;

  /** With an archive: the user-supplied values as a JSON object (at most 8 KiB; send larger ones with a repository chart). */
  @ApiPropertyOptional({ maxLength: 8192, example: '{"replicas":2}' })
  @IsOptional()
  @IsString()
  @MaxLength(8192)
  values?: string;

  @BOOLEAN_QUERY('With an archive: `true` renders and diffs against the live objects; nothing changes.')
  dryRun?: boolean;

  @BOOLEAN_QUERY("Upgrade with an archive: `true` keeps the release's last values, merged with `values`.")
  reuseValues?: boolean;
}

/** Upgrading: with a repository chart, or the release's own chart as Helm stored it (no `chart`). */
export class UpgradeHelmReleaseDto {
  /** The chart's name in the repository `repo`; omitted: the chart of the release's latest revision. */
  @ApiPropertyOptional({ maxLength: 100, example: 'nginx' })
  @IsOptional()
  @IsString()
  @MaxLength(100)
  chart?: string;

  @ApiPropertyOptional({ maxLength: 64, example: '1.3.0' })
  @IsOptional()
  @IsString()
  @MaxLength(64)
  version?: string;

  /** The chart repository (https), with `chart`. */
  @ApiPropertyOptional({ maxLength: 2048, example: 'https://charts.example.com/stable' })
  @IsOptional()
  @IsString()
  @MaxLength(2048)
  repo?: string;

  /** The user-supplied values (an object). */
  @ApiPropertyOptional({ type: 'object', additionalProperties: true, example: { replicas: 3 } })
  @IsOptional()
  values?: Record<string, unknown>;

  /** `true`: the last revision's values, with `values` merged over them (`helm upgrade --reuse-values`). */
  @ApiPropertyOptional({ example: false })
  @IsOptional()
  @IsBoolean()
  reuseValues?: boolean;

  @ApiPropertyOptional({ example: false })
  @IsOptional()
  @IsBoolean()
  dryRun?: boolean;
}

export class RollbackHelmReleaseDto {
  /** The revision to roll back to. */
  @ApiProperty({ type: 'integer', minimum: 1, maximum: MAX_REVISION, example: 1 })
  @IsInt()
  @Min(1)
  @Max(MAX_REVISION)
  revision: number;

  @ApiPropertyOptional({ example: false })
  @IsOptional()
  @IsBoolean()
  dryRun?: boolean;

  /** Wait until the objects are ready (`helm rollback --wait`). */
  @ApiPropertyOptional({ example: false })
  @IsOptional()
  @IsBoolean()
  wait?: boolean;

  /** With `wait`: how long (default 300, at most CAS_HELM_TIMEOUT_SECONDS). */
  @ApiPropertyOptional({ type: 'integer', minimum: 1, maximum: 3600, example: 120 })
  @IsOptional()
  @IsInt()
  @Min(1)
  @Max(3600)
  timeoutSeconds?: number;
}

export class UninstallHelmReleaseQueryDto {
  @BOOLEAN_QUERY("`true`: keep the release's history (status `uninstalled`), as `helm uninstall --keep-history`.")
  keepHistory?: boolean;

  @BOOLEAN_QUERY('`true`: list what would be removed; nothing changes.')
  dryRun?: boolean;
}

export class HelmChangeDto {
  @ApiProperty({ type: String, nullable: true, example: 'apps/v1' })
  apiVersion: string | null;
  @ApiProperty({ type: String, nullable: true, example: 'Deployment' })
  kind: string | null;
  @ApiProperty({ type: String, nullable: true, example: 'shop' })
  namespace: string | null;
  @ApiProperty({ type: String, nullable: true, example: 'web' })
  name: string | null;
  /** `created`, `configured`, `unchanged` (as apply says), `removed`, or `error` (the cluster's refusal, in `diff`). */
  @ApiProperty({ example: 'configured' })
  action: string;
  /** A unified diff of the live object and what it would become; a Secret's values are `***`. */
  @ApiProperty({ example: '--- a/shop/deployments.apps/web\n+++ b/shop/deployments.apps/web\n' })
  diff: string;
}

export class HelmOperationDto {
  @ApiProperty({ enum: ['install', 'upgrade', 'rollback', 'uninstall'] })
  operation: 'install' | 'upgrade' | 'rollback' | 'uninstall';
  @ApiProperty({ example: false })
  dryRun: boolean;
  /**
   * The revision made (in a dry run, the one that would be); after an uninstall, the last revision as
   * `uninstalled` (kept in Helm's storage only with `keepHistory`).
   */
  @ApiProperty({ type: HelmReleaseSummaryDto })
  release: HelmReleaseSummaryDto;
  /** The rendered notes. */
  @ApiProperty({ example: 'Visit http://web.shop/' })
  notes: string;
  /** Dry run: the rendered manifest, a Secret's values shown as `***` ('' otherwise). */
  @ApiProperty({ example: '' })
  manifest: string;
  /** Dry run: each object against the live one (server-side dry run, as apply shows it). */
  @ApiProperty({ type: [HelmChangeDto] })
  changes: HelmChangeDto[];
}
