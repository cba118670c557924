import { ApiTargetCluster } from '../clusters/target-cluster.js';
import {
  applyDecorators,
  BadRequestException,
  Body,
  Controller,
  Delete,
  Get,
  Headers,
  HttpCode,
  Param,
  Post,
  Put,
  Query,
  Req,
} from '@nestjs/common';
import { ApiBody, ApiConsumes, ApiExtraModels, ApiOkResponse, ApiParam, ApiTags, getSchemaPath } from '@nestjs/swagger';
import type { FastifyRequest } from 'fastify';
import { noteAudit } from '../common/audit-facts.js';
import { Auth, Authenticated } from '../auth/auth.decorators.js';
import type { Caller } from '../access/caller.js';
import { ApiErrors } from '../common/api-errors.js';
import {
  HelmDiffDto,
  HelmDiffQueryDto,
  HelmHistoryDto,
  HelmReleaseDto,
  HelmArchiveQueryDto,
  HelmOperationDto,
  HelmReleasePageDto,
  InstallHelmReleaseDto,
  ListHelmReleasesQueryDto,
  RollbackHelmReleaseDto,
  UninstallHelmReleaseQueryDto,
  UpgradeHelmReleaseDto,
  MAX_REVISION,
} from './dto/helm.dto.js';
import { HelmOperationsService } from './helm-operations.service.js';
import { HelmReleasesService } from './helm-releases.service.js';

/** The errors of a Helm write: Helm's own failures included (the cluster's Forbidden → 403, a name in use → 409). */
const HelmWriteErrors = () =>
  ApiErrors(400, 404, 409, 413, 502, {
    403: "The caller's rules do not allow it, or Helm failed with the cluster's Forbidden for an object of the chart",
    422: 'Helm refused or failed (its message)',
    429: 'Too many Helm operations of this user (CAS_HELM_MAX_PROCESSES_PER_USER) or replica (CAS_HELM_MAX_PROCESSES)',
    503: 'No Helm binary (CAS_HELM_BINARY), or the service is shutting down',
    504: 'Helm did not finish within CAS_HELM_TIMEOUT_SECONDS (its process was stopped)',
  });

/** A body that is JSON, or a chart archive. */
const chartBody = (json: object) =>
  applyDecorators(
    ApiConsumes('application/json', 'application/gzip'),
    ApiBody({
      required: false,
      description:
        "JSON, or a chart archive (`helm package`'s .tgz, at most 10 MiB: 413 beyond) as `application/gzip` with `name`, `values`, `dryRun` (and `reuseValues`) in the query.",
      schema: { oneOf: [json, { type: 'string', format: 'binary' }] },
    }),
  );

function audit(request: FastifyRequest, cluster: unknown, namespace: string, name: string | null, dryRun: unknown) {
  if (typeof cluster !== 'string') return;
  noteAudit(request, { helm: { cluster, namespace, name, dryRun: dryRun === true || dryRun === 'true' } });
}

const dryRunOf = (body: unknown, query: { dryRun?: unknown }) =>
  query.dryRun ??
  (body && typeof body === 'object' && !Buffer.isBuffer(body) ? (body as { dryRun?: unknown }).dryRun : undefined);
const nameOf = (body: unknown, query: { name?: unknown }) =>
  typeof query.name === 'string'
    ? query.name
    : body && typeof body === 'object' && typeof (body as { name?: unknown }).name === 'string'
      ? (body as { name: string }).name.slice(0, 253)
      : null;

/** The header and path parameters of the Helm release routes. */
export const HelmParams = (withName: boolean, allNamespaces = false) =>
  applyDecorators(
    ApiTargetCluster(),
    ApiParam({
      name: 'namespace',
      type: String,
      description: allNamespaces ? 'The namespace, or `_all` for every namespace the caller may read' : 'The namespace',
      example: 'shop',
    }),
    ...(withName ? [ApiParam({ name: 'name', type: String, description: 'The release', example: 'web' })] : []),
  );

/** A revision in a path: a positive integer. */
export function parseRevision(value: string): number {
  if (!/^[1-9]\d{0,9}$/.test(value) || Number(value) > MAX_REVISION) {
    throw new BadRequestException([`revision must be a positive integer, got '${value.slice(0, 40)}'`]);
  }
  return Number(value);
}

/**
 * Helm releases as Helm stores them (Secrets of type `helm.sh/release.v1`), read from the list cache of those
 * Secrets. Reading a release is reading Secrets: a rule must name `helmreleases` (a `*` does not cover it).
 */
@ApiTags('Helm')
@ApiExtraModels(InstallHelmReleaseDto, UpgradeHelmReleaseDto)
@Controller('helm/releases')
export class HelmController {
  constructor(
    private readonly releases: HelmReleasesService,
    private readonly operations: HelmOperationsService,
  ) {}

  /**
   * The latest revision of each release the caller may read (`list` on `helmreleases`), paged, sorted and
   * searched; with `_all`, across the namespaces the caller may read.
   */
  @Authenticated()
  @Get(':namespace')
  @HelmParams(false, true)
  @ApiOkResponse({ type: HelmReleasePageDto })
  @ApiErrors(400, 403, 404, 409, 502, 504)
  listHelmReleases(
    @Auth() caller: Caller,
    @Headers('x-cluster-name') cluster: unknown,
    @Param('namespace') namespace: string,
    @Query() query: ListHelmReleasesQueryDto,
  ): Promise<HelmReleasePageDto> {
    return this.releases.listReleases(caller, cluster, namespace, query);
  }

  /** The latest revision of a release: values, computed values, manifest and its objects, notes, hooks, chart, info. */
  @Authenticated()
  @Get(':namespace/:name')
  @HelmParams(true)
  @ApiOkResponse({ type: HelmReleaseDto })
  @ApiErrors(400, 403, 404, 409, 502, 504)
  getHelmRelease(
    @Auth() caller: Caller,
    @Headers('x-cluster-name') cluster: unknown,
    @Param('namespace') namespace: string,
    @Param('name') name: string,
  ): Promise<HelmReleaseDto> {
    return this.releases.getRelease(caller, cluster, namespace, name);
  }

  /** One revision of a release, as `getHelmRelease` shows the latest. */
  @Authenticated()
  @Get(':namespace/:name/revisions/:revision')
  @HelmParams(true)
  @ApiParam({ name: 'revision', schema: { type: 'integer', minimum: 1, maximum: MAX_REVISION }, example: 2 })
  @ApiOkResponse({ type: HelmReleaseDto })
  @ApiErrors(400, 403, 404, 409, 502, 504)
  getHelmReleaseRevision(
    @Auth() caller: Caller,
    @Headers('x-cluster-name') cluster: unknown,
    @Param('namespace') namespace: string,
    @Param('name') name: string,
    @Param('revision') revision: string,
  ): Promise<HelmReleaseDto> {
    return this.releases.getRelease(caller, cluster, namespace, name, parseRevision(String(revision)));
  }

  /** Every revision Helm keeps of the release, newest first, as `helm history` lists them. */
  @Authenticated()
  @Get(':namespace/:name/history')
  @HelmParams(true)
  @ApiOkResponse({ type: HelmHistoryDto })
  @ApiErrors(400, 403, 404, 409, 502, 504)
  listHelmReleaseHistory(
    @Auth() caller: Caller,
    @Headers('x-cluster-name') cluster: unknown,
    @Param('namespace') namespace: string,
    @Param('name') name: string,
  ): Promise<HelmHistoryDto> {
    return this.releases.history(caller, cluster, namespace, name);
  }

  /**
   * What changed between two revisions: per object of the manifests a unified diff (added, removed, changed; a
   * Secret's values shown as `***`), and a diff of the user-supplied values.
   */
  @Authenticated()
  @Get(':namespace/:name/diff')
  @HelmParams(true)
  @ApiOkResponse({ type: HelmDiffDto })
  @ApiErrors(400, 403, 404, 409, 502, 504)
  diffHelmRelease(
    @Auth() caller: Caller,
    @Headers('x-cluster-name') cluster: unknown,
    @Param('namespace') namespace: string,
    @Param('name') name: string,
    @Query() query: HelmDiffQueryDto,
  ): Promise<HelmDiffDto> {
    return this.releases.diff(caller, cluster, namespace, name, query);
  }

  /**
   * Installs a release with the real Helm (`create` on `helmreleases`; each object Helm writes is authorized as
   * the caller): a chart from an https chart repository (JSON), or an uploaded chart archive. `dryRun` renders it
   * and shows each object against the live one; nothing changes.
   */
  @Authenticated()
  @Post(':namespace')
  @HttpCode(200)
  @HelmParams(false)
  @chartBody({ $ref: getSchemaPath(InstallHelmReleaseDto) })
  @ApiOkResponse({ type: HelmOperationDto })
  @HelmWriteErrors()
  installHelmRelease(
    @Auth() caller: Caller,
    @Headers('x-cluster-name') cluster: unknown,
    @Param('namespace') namespace: string,
    @Body() body: unknown,
    @Query() query: HelmArchiveQueryDto,
    @Req() request: FastifyRequest,
  ): Promise<HelmOperationDto> {
    audit(request, cluster, namespace, nameOf(body, query), dryRunOf(body, query));
    return this.operations.install(caller, cluster, namespace, body, query);
  }

  /**
   * Upgrades a release (`update` on `helmreleases`): with new values (`reuseValues` merges them over the last
   * ones), and a chart from a repository, an uploaded archive, or else the release's own chart as Helm stored it.
   */
  @Authenticated()
  @Put(':namespace/:name')
  @HelmParams(true)
  @chartBody({ $ref: getSchemaPath(UpgradeHelmReleaseDto) })
  @ApiOkResponse({ type: HelmOperationDto })
  @HelmWriteErrors()
  upgradeHelmRelease(
    @Auth() caller: Caller,
    @Headers('x-cluster-name') cluster: unknown,
    @Param('namespace') namespace: string,
    @Param('name') name: string,
    @Body() body: unknown,
    @Query() query: HelmArchiveQueryDto,
    @Req() request: FastifyRequest,
  ): Promise<HelmOperationDto> {
    audit(request, cluster, namespace, name, dryRunOf(body, query));
    return this.operations.upgrade(caller, cluster, namespace, name, body, query);
  }

  /** Rolls a release back to a revision (`update` on `helmreleases`), as `helm rollback`: a new revision `Rollback to N`. */
  @Authenticated()
  @Post(':namespace/:name/rollback')
  @HttpCode(200)
  @HelmParams(true)
  @ApiOkResponse({ type: HelmOperationDto })
  @HelmWriteErrors()
  rollbackHelmRelease(
    @Auth() caller: Caller,
    @Headers('x-cluster-name') cluster: unknown,
    @Param('namespace') namespace: string,
    @Param('name') name: string,
    @Body() body: RollbackHelmReleaseDto,
    @Req() request: FastifyRequest,
  ): Promise<HelmOperationDto> {
    audit(request, cluster, namespace, name, body.dryRun);
    return this.operations.rollback(caller, cluster, namespace, name, body);
  }

  /** Uninstalls a release (`delete` on `helmreleases`); `keepHistory` keeps its revisions (status `uninstalled`). */
  @Authenticated()
  @Delete(':namespace/:name')
  @HelmParams(true)
  @ApiOkResponse({ type: HelmOperationDto })
  @HelmWriteErrors()
  uninstallHelmRelease(
    @Auth() caller: Caller,
    @Headers('x-cluster-name') cluster: unknown,
    @Param('namespace') namespace: string,
    @Param('name') name: string,
    @Query() query: UninstallHelmReleaseQueryDto,
    @Req() request: FastifyRequest,
  ): Promise<HelmOperationDto> {
    audit(request, cluster, namespace, name, query.dryRun);
    return this.operations.uninstall(caller, cluster, namespace, name, query);
  }
}
