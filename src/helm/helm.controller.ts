import { applyDecorators, BadRequestException, Controller, Get, Headers, Param, Query } from '@nestjs/common';
import { ApiHeader, ApiOkResponse, ApiParam, ApiTags } from '@nestjs/swagger';
import { Auth, Authenticated } from '../auth/auth.decorators.js';
import type { Caller } from '../auth/caller.js';
import { ApiErrors } from '../common/api-errors.js';
import {
  HelmDiffDto,
  HelmDiffQueryDto,
  HelmHistoryDto,
  HelmReleaseDto,
  HelmReleasePageDto,
  ListHelmReleasesQueryDto,
} from './dto/helm.dto.js';
import { HelmReleasesService } from './helm-releases.service.js';

/** The header and path parameters of the Helm release routes. */
export const HelmParams = (withName: boolean, allNamespaces = false) =>
  applyDecorators(
    ApiHeader({
      name: 'x-cluster-name',
      required: true,
      description: 'Name of the target cluster',
      schema: { type: 'string', minLength: 1, maxLength: 253 },
    }),
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
  if (!/^[1-9]\d{0,9}$/.test(value) || Number(value) > 2_147_483_647) {
    throw new BadRequestException([`revision must be a positive integer, got '${value.slice(0, 40)}'`]);
  }
  return Number(value);
}

/**
 * Helm releases as Helm stores them (Secrets of type `helm.sh/release.v1`), read from the list cache of those
 * Secrets. Reading a release is reading Secrets: a rule must name `helmreleases` (a `*` does not cover it).
 */
@ApiTags('Helm')
@Controller('helm/releases')
export class HelmController {
  constructor(private readonly releases: HelmReleasesService) {}

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
  @ApiParam({ name: 'revision', schema: { type: 'integer', minimum: 1, maximum: 2_147_483_647 }, example: 2 })
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
}
