import { BadGatewayException, BadRequestException, Injectable, NotFoundException } from '@nestjs/common';
import type { Verb } from '../access/authorizer.js';
import type { Caller } from '../access/caller.js';
import { clusterNameOf } from '../clusters/cluster-name.js';
import type { ClusterClient } from '../clusters/gateway/cluster-client.js';
import { ClusterGateway } from '../clusters/gateway/cluster-gateway.js';
import { ALL_NAMESPACES } from '../k8s/resource-path.js';
import type { ListCache } from '../lists/list-cache.js';
import { type CacheView, ListCaches } from '../lists/list-caches.js';
import type {
  HelmDiffDto,
  HelmDiffQueryDto,
  HelmHistoryDto,
  HelmReleaseDto,
  HelmReleasePageDto,
  HelmSortKey,
  ListHelmReleasesQueryDto,
} from './dto/helm.dto.js';
import { HelmAccess } from './helm-access.js';
import { diffManifests } from './release-diff.js';
import { decodeEntry, releaseEntry, type ReleaseEntry, SECRETS } from './release-store.js';
import { computedValues, HELM_FIELD_SELECTOR, type ReleaseSummary, type Revision, summaryOf } from './release.js';

/** The Helm view of the Secrets' list cache: only Helm's storage, kept as revisions. */
export const HELM_VIEW: CacheView = { name: 'helm', fieldSelector: HELM_FIELD_SELECTOR, toEntry: releaseEntry };

const NAMESPACE = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
/** Helm's own rule for release names (at most 53 characters, DNS-1123 subdomain characters). */
export const RELEASE_NAME = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const DEFAULT_SIZE = 50;

/** Every revision of each release of a cache, newest first, worked out once per version of the cache. */
interface Releases {
  version: number;
  byRelease: Map<string, ReleaseEntry[]>;
}

const releaseKey = (namespace: string, name: string) => `${namespace}/${name}`;

export function validateNamespaceName(namespace: string): void {
  if (namespace.length > 63 || !NAMESPACE.test(namespace)) {
    throw new BadRequestException([`namespace '${namespace.slice(0, 63)}' is not a valid namespace name`]);
  }
}

export function validateReleaseName(name: string): void {
  if (name.length > 53 || !RELEASE_NAME.test(name)) {
    throw new BadRequestException([
      `release name '${name.slice(0, 53)}' is not valid: at most 53 lower-case letters, digits, '-' and '.', starting and ending with a letter or digit`,
    ]);
  }
}

/**
 * Helm releases read from Helm's own storage (the Secrets of type `helm.sh/release.v1`), through the list cache
 * of those Secrets: what the caller may read of them (HelmAccess), pages of the latest revisions, one revision,
 * the history, the diff of two revisions. Every revision is decoded once and kept decoded while its Secret is
 * unchanged, within the list caches' bounds.
 */
@Injectable()
export class HelmReleasesService {
  private readonly grouped = new WeakMap<ListCache, Releases>();

  constructor(
    private readonly gateway: ClusterGateway,
    private readonly caches: ListCaches,
    private readonly access: HelmAccess,
  ) {}

  /** The cluster named in `x-cluster-name`, for the caller. */
  client(caller: Caller, cluster: unknown): Promise<ClusterClient> {
    return this.gateway.clientFor(caller, clusterNameOf(cluster));
  }

  /** The cache of Helm's storage on the cluster, caught up (`atLeast`: a write's resourceVersion). */
  async cache(client: ClusterClient, atLeast?: bigint): Promise<ListCache> {
    const cache = this.caches.cacheFor(client.conn, SECRETS, HELM_VIEW);
    await cache.fresh(atLeast);
    return cache;
  }

  async listReleases(
    caller: Caller,
    cluster: unknown,
    namespace: string,
    query: ListHelmReleasesQueryDto,
  ): Promise<HelmReleasePageDto> {
    const client = await this.client(caller, cluster);
    let allowed: Set<string> | null;
    let cache: ListCache;
    if (namespace === ALL_NAMESPACES) {
      // The rules first: a caller who may list no release never starts a cache.
      const byRules = this.access.ruleScope(caller, client.name);
      cache = await this.cache(client);
      allowed = await this.access.listScope(caller, client, () => cache.namespaces(), byRules);
    } else {
      validateNamespaceName(namespace);
      await this.access.require(caller, client, 'list', namespace);
      cache = await this.cache(client);
      allowed = new Set([namespace]);
    }
    const latest: ReleaseEntry[] = [];
    for (const revisions of this.releases(cache).values()) {
      if (allowed === null || allowed.has(revisions[0].namespace)) latest.push(revisions[0]);
    }
    let summaries = await Promise.all(latest.map((entry) => this.summary(entry)));
    const search = query.search?.toLowerCase();
    if (search) {
      summaries = summaries.filter(
        (s) => s.name.toLowerCase().includes(search) || s.chart.name.toLowerCase().includes(search),
      );
    }
    if (query.status) summaries = summaries.filter((s) => s.status === query.status);
    const sortBy = query.sortBy ?? 'name';
    const sign = query.sortOrder === 'desc' ? -1 : 1;
    const keyOf = SORT_KEYS[sortBy];
    const keys = new Map(summaries.map((s) => [s, keyOf(s)]));
    summaries.sort((a, b) => sign * compare(keys.get(a)!, keys.get(b)!) || byPlace(a, b));
    const page = query.page ?? 1;
    const size = query.size ?? DEFAULT_SIZE;
    return { items: summaries.slice((page - 1) * size, page * size), total: summaries.length, page, size };
  }

  /** One revision (the latest without `revision`), with everything a release screen shows. */
  async getRelease(
    caller: Caller,
    cluster: unknown,
    namespace: string,
    name: string,
    revision?: number,
  ): Promise<HelmReleaseDto> {
    const { revisions } = await this.readable(caller, cluster, namespace, name);
    const found = await decodeOrFail(pick(revisions, name, revision));
    return {
      ...summaryOf(found),
      chart: { ...found.chart, metadata: found.chartMetadata },
      info: found.info,
      values: found.values,
      computedValues: computedValues(found.chartValues, found.values),
      manifest: found.manifest,
      objects: found.objects,
      notes: found.notes,
      hooks: found.hooks,
    };
  }

  /** Every revision Helm keeps of the release, newest first (`helm history`). */
  async history(caller: Caller, cluster: unknown, namespace: string, name: string): Promise<HelmHistoryDto> {
    const { revisions } = await this.readable(caller, cluster, namespace, name);
    return { items: await Promise.all(revisions.map((entry) => this.summary(entry))) };
  }

  /** What changed from revision `from` to `to`: each object's diff (Secret values hidden) and the values'. */
  async diff(
    caller: Caller,
    cluster: unknown,
    namespace: string,
    name: string,
    query: HelmDiffQueryDto,
  ): Promise<HelmDiffDto> {
    const { revisions } = await this.readable(caller, cluster, namespace, name);
    const to = query.to ?? revisions[0].stored!.revision;
    const from = query.from ?? to - 1;
    if (from < 1) throw new BadRequestException([`release '${name}' has no revision before ${to} to compare with`]);
    const [a, b] = await Promise.all([
      decodeOrFail(pick(revisions, name, from)),
      decodeOrFail(pick(revisions, name, to)),
    ]);
    const changes = await diffManifests({
      before: a.manifest,
      after: b.manifest,
      namespace,
      beforeValues: a.values,
      afterValues: b.values,
    });
    return { from, to, ...changes };
  }

  /**
   * The revisions of a release the caller may `verb` (read: `get`), newest first: 404 when there is none. Refused
   * before the cache is looked at, so a refusal says nothing about whether the release exists.
   */
  async readable(
    caller: Caller,
    cluster: unknown,
    namespace: string,
    name: string,
    verb: Verb = 'get',
  ): Promise<{ client: ClusterClient; cache: ListCache; revisions: ReleaseEntry[] }> {
    const client = await this.client(caller, cluster);
    validateNamespaceName(namespace);
    validateReleaseName(name);
    await this.access.require(caller, client, verb, namespace);
    const cache = await this.cache(client);
    const revisions = this.releases(cache).get(releaseKey(namespace, name));
    if (!revisions) throw new NotFoundException(`no Helm release '${name}' in namespace '${namespace}'`);
    return { client, cache, revisions };
  }

  /** The revisions of each release in the cache, newest first. */
  releases(cache: ListCache): Map<string, ReleaseEntry[]> {
    const kept = this.grouped.get(cache);
    if (kept && kept.version === cache.version) return kept.byRelease;
    const byRelease = new Map<string, ReleaseEntry[]>();
    for (const entry of cache.all() as IterableIterator<ReleaseEntry>) {
      if (!entry.stored) continue;
      const k = releaseKey(entry.namespace, entry.stored.release);
      const list = byRelease.get(k);
      if (list) list.push(entry);
      else byRelease.set(k, [entry]);
    }
    for (const list of byRelease.values()) list.sort((a, b) => b.stored!.revision - a.stored!.revision);
    this.grouped.set(cache, { version: cache.version, byRelease });
    return byRelease;
  }

  /** A revision's summary; one Helm could not read shows what its labels say. */
  private async summary(entry: ReleaseEntry): Promise<ReleaseSummary> {
    try {
      return summaryOf(await decodeEntry(entry));
    } catch {
      const stored = entry.stored!;
      return {
        name: stored.release,
        namespace: entry.namespace,
        revision: stored.revision,
        status: stored.status || 'unknown',
        updated: '',
        description: 'the stored release cannot be decoded',
        chart: { name: '', version: '', appVersion: '' },
      };
    }
  }
}

function pick(revisions: ReleaseEntry[], name: string, revision?: number): ReleaseEntry {
  if (revision === undefined) return revisions[0];
  const found = revisions.find((entry) => entry.stored!.revision === revision);
  if (!found) {
    const kept = revisions.map((entry) => entry.stored!.revision).reverse();
    throw new NotFoundException(`release '${name}' has no revision ${revision} (it has ${kept.join(', ')})`);
  }
  return found;
}

async function decodeOrFail(entry: ReleaseEntry): Promise<Revision> {
  try {
    return await decodeEntry(entry);
  } catch (error) {
    throw new BadGatewayException(
      `revision ${entry.stored!.revision} of release '${entry.stored!.release}' cannot be read from its Secret ${entry.name}: ${(error as Error).message}`,
    );
  }
}

type Key = string | number;

const SORT_KEYS: Record<HelmSortKey, (s: ReleaseSummary) => Key> = {
  name: (s) => s.name,
  namespace: (s) => s.namespace,
  // Helm writes times with the offset of the machine it ran on: compared as instants.
  updated: (s) => Date.parse(s.updated) || 0,
  status: (s) => s.status,
  chart: (s) => `${s.chart.name}\0${s.chart.version}`,
};

function compare(a: Key, b: Key): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

function byPlace(a: ReleaseSummary, b: ReleaseSummary): number {
  return compare(a.namespace, b.namespace) || compare(a.name, b.name);
}
