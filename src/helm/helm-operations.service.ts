import {
  BadRequestException,
  ConflictException,
  ForbiddenException,
  GatewayTimeoutException,
  Inject,
  Injectable,
  NotFoundException,
  type OnModuleDestroy,
  UnprocessableEntityException,
  ValidationPipe,
} from '@nestjs/common';
import { normalize } from 'node:path';
import { stringify } from 'yaml';
import { ApplyService } from '../apply/apply.service.js';
import type { ApplyQueryDto } from '../apply/dto/apply.dto.js';
import type { Verb } from '../access/authorizer.js';
import type { Caller } from '../access/caller.js';
import type { ClusterClient } from '../clusters/gateway/cluster-client.js';
import { APP_CONFIG, type AppConfig } from '../config/config.js';
import type { ListCache } from '../lists/list-cache.js';
import { archiveProblem, ChartRepositories, MAX_CHART_BYTES } from './chart-source.js';
import {
  type HelmArchiveQueryDto,
  type HelmChangeDto,
  type HelmOperationDto,
  InstallHelmReleaseDto,
  type RollbackHelmReleaseDto,
  type UninstallHelmReleaseQueryDto,
  UpgradeHelmReleaseDto,
} from './dto/helm.dto.js';
import { HelmAccess } from './helm-access.js';
import { HelmReleasesService, validateNamespaceName, validateReleaseName } from './helm-releases.service.js';
import { DIR_MARK, type HelmResult, HelmRunner } from './helm-runner.js';
import { compareManifests, maskedManifest } from './release-diff.js';
import { decodeEntry, type ReleaseEntry } from './release-store.js';
import { releaseText, type Revision, revisionOf, summaryOf } from './release.js';

type Obj = Record<string, any>;

const validation = new ValidationPipe({ whitelist: true, forbidNonWhitelisted: true, transform: true });
/** How long a write waits for the cache to show what Helm stored, so that the next read sees it. */
const SETTLE_MS = 5_000;
const MAX_HELM_MESSAGE = 2_000;

const isObject = (value: unknown): value is Obj => value !== null && typeof value === 'object' && !Array.isArray(value);

/** A chart to run Helm with: an archive, or the files of a chart folder (the release's own chart). */
type ChartFiles = { archive: Buffer } | { folder: Record<string, string | Buffer> };

/** Helm's failure as an answer: the cluster's Forbidden a 403, a missing thing a 404, a name in use a 409, … */
export function helmFailure(result: HelmResult, what: string): Error {
  const message = `${what} failed: ${
    result.stderr
      .replace(/^Error: /m, '')
      .trim()
      .slice(0, MAX_HELM_MESSAGE) || `helm exited with ${result.code}`
  }`;
  if (/forbidden/i.test(result.stderr)) return new ForbiddenException(message);
  if (
    /cannot re-use a name that is still in use|another operation \(install\/upgrade\/rollback\) is in progress/i.test(
      result.stderr,
    )
  ) {
    return new ConflictException(message);
  }
  if (/release: not found|has no deployed releases|not found/i.test(result.stderr))
    return new NotFoundException(message);
  if (/timed out|context deadline exceeded/i.test(result.stderr)) return new GatewayTimeoutException(message);
  return new UnprocessableEntityException(message);
}

/**
 * Helm's writes, done by the real Helm CLI (HelmRunner) for the caller: install, upgrade, roll back, uninstall.
 * Every argument is built here from validated input; a chart is an uploaded archive, a repository's chart the
 * service reads itself, or (an upgrade without one) the release's own chart as Helm stored it. A dry run renders
 * (`--dry-run=server`) and shows each object against the live one (apply's server-side dry run and diff, Secret
 * values hidden): nothing changes.
 */
@Injectable()
export class HelmOperationsService implements OnModuleDestroy {
  private readonly repos: ChartRepositories;

  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly runner: HelmRunner,
    private readonly releases: HelmReleasesService,
    private readonly access: HelmAccess,
    private readonly apply: ApplyService,
  ) {
    this.repos = new ChartRepositories({ allowLocal: config.helm.repoAllowLoopback, caFile: config.helm.repoCaFile });
  }

  onModuleDestroy(): Promise<void> {
    return this.repos.close();
  }

  async install(
    caller: Caller,
    cluster: unknown,
    namespace: string,
    body: unknown,
    query: HelmArchiveQueryDto,
  ): Promise<HelmOperationDto> {
    const client = await this.releases.client(caller, cluster);
    validateNamespaceName(namespace);
    let name: string;
    let values: Obj;
    let dryRun: boolean;
    let chart: ChartFiles;
    if (Buffer.isBuffer(body)) {
      if (!query.name) throw new BadRequestException(['name (in the query) is required with a chart archive']);
      name = query.name;
      values = parseValues(query.values);
      dryRun = query.dryRun === true;
      if (query.reuseValues !== undefined) throw new BadRequestException(['reuseValues is for upgrades']);
      validateReleaseName(name);
      await this.access.require(caller, client, 'create', namespace);
      await this.runner.requireBinary();
      chart = { archive: await checkedArchive(body) };
    } else {
      refuseArchiveQuery(query);
      const dto = (await validation.transform(body, {
        type: 'body',
        metatype: InstallHelmReleaseDto,
      })) as InstallHelmReleaseDto;
      name = dto.name;
      values = valuesOf(dto.values);
      dryRun = dto.dryRun === true;
      validateReleaseName(name);
      await this.access.require(caller, client, 'create', namespace);
      await this.runner.requireBinary();
      chart = { archive: await this.repos.fetchChart(dto.repo, dto.chart, dto.version) };
    }
    const args = ['install', name, chartArg(chart), '--namespace', namespace, '--output', 'json'];
    return this.render(caller, client, namespace, name, 'install', args, chart, values, dryRun);
  }

  async upgrade(
    caller: Caller,
    cluster: unknown,
    namespace: string,
    name: string,
    body: unknown,
    query: HelmArchiveQueryDto,
  ): Promise<HelmOperationDto> {
    const client = await this.releases.client(caller, cluster);
    validateNamespaceName(namespace);
    validateReleaseName(name);
    let dto: UpgradeHelmReleaseDto;
    let archive: Buffer | undefined;
    if (Buffer.isBuffer(body)) {
      if (query.name !== undefined) throw new BadRequestException(['name is in the path of an upgrade, not the query']);
      dto = { values: parseValues(query.values), reuseValues: query.reuseValues, dryRun: query.dryRun };
      archive = body;
    } else {
      refuseArchiveQuery(query);
      dto = (await validation.transform(body ?? {}, {
        type: 'body',
        metatype: UpgradeHelmReleaseDto,
      })) as UpgradeHelmReleaseDto;
    }
    const values = valuesOf(dto.values);
    const { revisions } = await this.existing(caller, cluster, namespace, name, 'update');
    await this.runner.requireBinary();
    let chart: ChartFiles;
    if (archive) chart = { archive: await checkedArchive(archive) };
    else if (dto.chart !== undefined) {
      if (!dto.repo) throw new BadRequestException(['repo is required with chart (an https chart repository)']);
      chart = { archive: await this.repos.fetchChart(dto.repo, dto.chart, dto.version) };
    } else {
      if (dto.repo !== undefined || dto.version !== undefined) {
        throw new BadRequestException(['repo and version go with chart']);
      }
      chart = { folder: await storedChart(revisions[0]) };
    }
    const args = ['upgrade', name, chartArg(chart), '--namespace', namespace, '--output', 'json'];
    if (dto.reuseValues) args.push('--reuse-values');
    return this.render(caller, client, namespace, name, 'upgrade', args, chart, values, dto.dryRun === true);
  }

  async rollback(
    caller: Caller,
    cluster: unknown,
    namespace: string,
    name: string,
    dto: RollbackHelmReleaseDto,
  ): Promise<HelmOperationDto> {
    const client = await this.releases.client(caller, cluster);
    validateNamespaceName(namespace);
    validateReleaseName(name);
    const { revisions } = await this.existing(caller, cluster, namespace, name, 'update');
    await this.runner.requireBinary();
    const target = revisions.find((entry) => entry.stored!.revision === dto.revision);
    if (!target) {
      const kept = revisions.map((entry) => entry.stored!.revision).reverse();
      throw new NotFoundException(`release '${name}' has no revision ${dto.revision} (it has ${kept.join(', ')})`);
    }
    const revision = await decodeEntry(target);
    if (dto.dryRun) {
      return {
        operation: 'rollback',
        dryRun: true,
        release: {
          ...summaryOf(revision),
          revision: revisions[0].stored!.revision + 1,
          description: `Rollback to ${dto.revision}`,
        },
        notes: revision.notes,
        manifest: maskedManifest(revision.manifest),
        changes: await this.changes(caller, client, namespace, revision.manifest),
      };
    }
    const args = ['rollback', name, String(dto.revision), '--namespace', namespace];
    if (dto.wait) {
      const seconds = Math.min(dto.timeoutSeconds ?? 300, this.config.helm.timeoutSeconds);
      args.push('--wait', '--timeout', `${seconds}s`);
    }
    const result = await this.runner.run(caller, { cluster: client.name, args });
    if (result.code !== 0) throw helmFailure(result, `helm rollback of '${name}'`);
    const latest = await this.settled(client, namespace, name, revisions[0].stored!.revision + 1);
    return {
      operation: 'rollback',
      dryRun: false,
      // What Helm made, as the cache shows it; else (not seen within SETTLE_MS) what Helm makes of a rollback.
      release: latest
        ? summaryOf(latest)
        : {
            ...summaryOf(revision),
            revision: revisions[0].stored!.revision + 1,
            description: `Rollback to ${dto.revision}`,
          },
      notes: latest?.notes ?? revision.notes,
      manifest: '',
      changes: [],
    };
  }

  async uninstall(
    caller: Caller,
    cluster: unknown,
    namespace: string,
    name: string,
    query: UninstallHelmReleaseQueryDto,
  ): Promise<HelmOperationDto> {
    const client = await this.releases.client(caller, cluster);
    validateNamespaceName(namespace);
    validateReleaseName(name);
    const { revisions } = await this.existing(caller, cluster, namespace, name, 'delete');
    await this.runner.requireBinary();
    const latest = await decodeEntry(revisions[0]);
    if (query.dryRun) {
      const removed = compareManifests({
        before: latest.manifest,
        after: '',
        namespace,
        beforeValues: {},
        afterValues: {},
      });
      return {
        operation: 'uninstall',
        dryRun: true,
        release: { ...summaryOf(latest), status: 'uninstalled', description: 'Uninstallation complete' },
        notes: '',
        manifest: '',
        changes: removed.objects.map((o) => ({ ...o, namespace: o.namespace || namespace, action: 'removed' })),
      };
    }
    const args = ['uninstall', name, '--namespace', namespace];
    if (query.keepHistory) args.push('--keep-history');
    const result = await this.runner.run(caller, { cluster: client.name, args });
    if (result.code !== 0) throw helmFailure(result, `helm uninstall of '${name}'`);
    const after = query.keepHistory
      ? await this.settled(client, namespace, name, latest.revision, 'uninstalled')
      : null;
    if (!query.keepHistory) await this.gone(client, namespace, name);
    return {
      operation: 'uninstall',
      dryRun: false,
      // Without its history the release is gone: its last revision, as uninstalled.
      release: after
        ? summaryOf(after)
        : { ...summaryOf(latest), status: 'uninstalled', description: 'Uninstallation complete' },
      notes: '',
      manifest: '',
      changes: [],
    };
  }

  /** Installs or upgrades (or renders, in a dry run) with Helm: the revision Helm answers with. */
  private async render(
    caller: Caller,
    client: ClusterClient,
    namespace: string,
    name: string,
    operation: 'install' | 'upgrade',
    args: string[],
    chart: ChartFiles,
    values: Obj,
    dryRun: boolean,
  ): Promise<HelmOperationDto> {
    const files: Record<string, string | Buffer> = { 'values.json': JSON.stringify(values) };
    if ('archive' in chart) files['chart.tgz'] = chart.archive;
    else for (const [path, content] of Object.entries(chart.folder)) files[`chart/${path}`] = content;
    args.push('--values', `${DIR_MARK}/values.json`);
    if (dryRun) args.push('--dry-run=server');
    const result = await this.runner.run(caller, { cluster: client.name, args, files });
    if (result.code !== 0) throw helmFailure(result, `helm ${operation} of '${name}'`);
    let revision: Revision;
    try {
      revision = revisionOf(result.stdout, namespace);
    } catch {
      throw new UnprocessableEntityException(`helm ${operation} of '${name}' answered no release`);
    }
    if (dryRun) {
      return {
        operation,
        dryRun: true,
        release: summaryOf(revision),
        notes: revision.notes,
        manifest: maskedManifest(revision.manifest),
        changes: await this.changes(caller, client, namespace, revision.manifest),
      };
    }
    await this.settled(client, namespace, name, revision.revision);
    return { operation, dryRun: false, release: summaryOf(revision), notes: revision.notes, manifest: '', changes: [] };
  }

  /** The manifest's objects against the live ones: apply's server-side dry run, as the caller. */
  private async changes(
    caller: Caller,
    client: ClusterClient,
    namespace: string,
    manifest: string,
  ): Promise<HelmChangeDto[]> {
    if (!manifest.trim()) return [];
    const query = { namespace, dryRun: 'All', force: true } as ApplyQueryDto;
    const { response } = await this.apply.apply(caller, client.name, manifest, query);
    return response.results.map((r) => ({
      apiVersion: r.apiVersion,
      kind: r.kind,
      namespace: r.namespace,
      name: r.name,
      // The dry run applies as the caller's field manager, never Helm's: owners change where nothing else does.
      action: r.action === 'configured' && r.diff === '' ? 'unchanged' : r.action,
      diff: r.action === 'error' ? String(r.status?.message ?? '') : r.diff,
    }));
  }

  /** The release's revisions (404 before any Helm process runs when there is none); `verb` asked already. */
  private existing(caller: Caller, cluster: unknown, namespace: string, name: string, verb: Verb) {
    return this.releases.readable(caller, cluster, namespace, name, verb);
  }

  /** Waits (a little) until the cache holds `revision` of the release: the caller's next read sees it. */
  private async settled(
    client: ClusterClient,
    namespace: string,
    name: string,
    revision: number,
    status?: string,
  ): Promise<Revision | null> {
    const deadline = Date.now() + SETTLE_MS;
    for (;;) {
      // Helm has done it: a cache still catching up only delays the answer (up to SETTLE_MS), never fails it.
      const cache: ListCache | null = await this.releases.cache(client).catch(() => null);
      const latest = cache && this.releases.releases(cache).get(`${namespace}/${name}`)?.[0];
      if (latest && latest.stored!.revision >= revision && (!status || latest.stored!.status === status)) {
        return decodeEntry(latest);
      }
      if (Date.now() > deadline) return null;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }

  private async gone(client: ClusterClient, namespace: string, name: string): Promise<void> {
    const deadline = Date.now() + SETTLE_MS;
    while (Date.now() < deadline) {
      const cache = await this.releases.cache(client).catch(() => null);
      if (cache && !this.releases.releases(cache).has(`${namespace}/${name}`)) return;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }
}

function chartArg(chart: ChartFiles): string {
  return 'archive' in chart ? `${DIR_MARK}/chart.tgz` : `${DIR_MARK}/chart`;
}

function valuesOf(values: unknown): Obj {
  if (values === undefined || values === null) return {};
  if (!isObject(values)) throw new BadRequestException(["values must be an object (of the chart's values)"]);
  return values;
}

function parseValues(text: string | undefined): Obj {
  if (text === undefined) return {};
  let values: unknown;
  try {
    values = JSON.parse(text);
  } catch {
    throw new BadRequestException(['values must be a JSON object']);
  }
  return valuesOf(values);
}

function refuseArchiveQuery(query: HelmArchiveQueryDto): void {
  const given = (['name', 'values', 'dryRun', 'reuseValues'] as const).filter((k) => query[k] !== undefined);
  if (given.length) {
    throw new BadRequestException([
      `${given.join(', ')} in the query go with a chart archive (application/gzip); send them in the JSON body`,
    ]);
  }
}

async function checkedArchive(archive: Buffer): Promise<Buffer> {
  if (archive.length > MAX_CHART_BYTES) throw new BadRequestException(['the chart archive is larger than 10 MiB']);
  const problem = await archiveProblem(archive);
  if (problem) throw new BadRequestException([problem]);
  return archive;
}

/**
 * The chart of a stored revision as a folder Helm reads: its Chart.yaml, values, schema, templates and files, as
 * Helm keeps them in the release. Dependencies are not kept there: such a chart must be sent again.
 */
async function storedChart(entry: ReleaseEntry): Promise<Record<string, string | Buffer>> {
  const raw = JSON.parse(await releaseText(entry.stored!.payload)) as Obj;
  const chart = isObject(raw.chart) ? raw.chart : {};
  const metadata = isObject(chart.metadata) ? chart.metadata : {};
  if (Array.isArray(metadata.dependencies) && metadata.dependencies.length > 0) {
    throw new BadRequestException([
      "the release's chart has dependencies, which Helm does not keep with the release: send the chart (chart and repo, or an archive)",
    ]);
  }
  const files: Record<string, string | Buffer> = {
    'Chart.yaml': stringify(metadata),
    'values.yaml': stringify(isObject(chart.values) ? chart.values : {}),
  };
  if (typeof chart.schema === 'string' && chart.schema)
    files['values.schema.json'] = Buffer.from(chart.schema, 'base64');
  for (const file of [
    ...(Array.isArray(chart.templates) ? chart.templates : []),
    ...(Array.isArray(chart.files) ? chart.files : []),
  ]) {
    const path = typeof file?.name === 'string' ? normalize(file.name) : '';
    if (!path || path.startsWith('..') || path.startsWith('/') || path in files) continue;
    files[path] = Buffer.from(String(file.data ?? ''), 'base64');
  }
  return files;
}
