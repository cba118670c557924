// Where a chart to install or upgrade with comes from: an uploaded archive (checked to be a gzip tar holding a
// Chart.yaml), or a chart repository over https that the service itself reads (its index, then the archive), so
// that Helm never reaches the network beyond the cluster and every address is checked where it is connected to.
import { BadRequestException, HttpException, HttpStatus, NotFoundException } from '@nestjs/common';
import { readFileSync } from 'node:fs';
import { isIP } from 'node:net';
import { rootCertificates } from 'node:tls';
import { promisify } from 'node:util';
import { gunzip } from 'node:zlib';
import { Agent, request } from 'undici';
import { parse } from 'yaml';
import { policyLookup, refusedAddress } from '../clusters/address-policy.js';

const gunzipAsync = promisify(gunzip);

/** The largest chart archive taken (uploaded or fetched). */
export const MAX_CHART_BYTES = 10 * 1024 * 1024;
/** The largest a chart archive may be once unpacked. */
const MAX_UNPACKED_BYTES = 100 * 1024 * 1024;
/** The largest repository index read. */
const MAX_INDEX_BYTES = 20 * 1024 * 1024;
const FETCH_TIMEOUT_MS = 30_000;
const CHART_NAME = /^[a-z0-9]([-a-z0-9_.]{0,98}[a-z0-9])?$/i;
const CHART_VERSION = /^v?[0-9A-Za-z][0-9A-Za-z.+-]{0,63}$/;

/** Why an uploaded chart archive cannot be a chart, or null: a gzip tar with `<chart>/Chart.yaml`. */
export async function archiveProblem(archive: Buffer): Promise<string | null> {
  if (archive.length < 18 || archive[0] !== 0x1f || archive[1] !== 0x8b) {
    return 'the chart archive is not gzip (send the .tgz that `helm package` writes)';
  }
  let tar: Buffer;
  try {
    tar = await gunzipAsync(archive, { maxOutputLength: MAX_UNPACKED_BYTES });
  } catch (error) {
    return `the chart archive is corrupt or larger than 100 MiB unpacked: ${(error as Error).message}`;
  }
  for (let at = 0; at + 512 <= tar.length;) {
    const header = tar.subarray(at, at + 512);
    if (header.every((b) => b === 0)) break;
    const field = (from: number, to: number) => header.subarray(from, to).toString('latin1').replace(/\0.*$/s, '');
    const name = `${field(345, 500) ? `${field(345, 500)}/` : ''}${field(0, 100)}`;
    const size = parseInt(field(124, 136).trim() || '0', 8);
    if (!Number.isFinite(size) || size < 0) return 'the chart archive is not a tar archive';
    if (/^[^/]+\/Chart\.yaml$/.test(name)) return null;
    at += 512 + Math.ceil(size / 512) * 512;
  }
  return 'the chart archive holds no <chart>/Chart.yaml';
}

/** Whether an address is loopback, private (RFC 1918, fc00::/7) or unspecified. */
export function isLocalAddress(address: string): boolean {
  const bare = address.replace(/^\[|\]$/g, '').toLowerCase();
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/.exec(bare)?.[1];
  const v4 = isIP(bare) === 4 ? bare : mapped;
  if (v4) {
    const [a, b] = v4.split('.').map(Number);
    return a === 127 || a === 10 || a === 0 || (a === 172 && b >= 16 && b <= 31) || (a === 192 && b === 168);
  }
  if (isIP(bare) === 6) return bare === '::1' || bare === '::' || /^f[cd]/.test(bare);
  return false;
}

/** Why the repository (or chart) URL may not be read, or null. */
export function refusedRepoUrl(url: URL, allowLocal: boolean): string | null {
  if (url.protocol !== 'https:') return `only https chart repositories are read, not ${url.protocol.replace(':', '')}`;
  if (url.username || url.password) return 'a chart repository URL carries no credentials';
  const host = url.hostname.replace(/^\[|\]$/g, '');
  const linkLocal = refusedAddress(host, { allowLinkLocal: false });
  if (linkLocal) return `${host} is ${linkLocal}`;
  if (host === 'localhost' || isLocalAddress(host)) {
    if (!allowLocal) return `${host} is a loopback or private address (allowed with CAS_HELM_REPO_ALLOW_LOOPBACK=true)`;
  }
  return null;
}

export interface RepoOptions {
  allowLocal: boolean;
  caFile?: string;
}

/**
 * Reads chart repositories: https only, never a link-local address (checked as each name resolves, so a name
 * cannot point there either), loopback and private ones only when allowed; CAS_HELM_REPO_CA_FILE adds a CA.
 */
export class ChartRepositories {
  private agent?: Agent;

  constructor(private readonly options: RepoOptions) {}

  private dispatcher(): Agent {
    if (!this.agent) {
      const { allowLocal, caFile } = this.options;
      const lookup = policyLookup({ allowLinkLocal: false });
      this.agent = new Agent({
        connect: {
          ...(caFile ? { ca: [...rootCertificates, readFileSync(caFile, 'utf8')] } : {}),
          lookup: ((hostname: string, opts: object, callback: (...args: any[]) => void) =>
            lookup(hostname, opts as never, (error, address, family) => {
              if (error || allowLocal) return callback(error, address, family);
              const all = Array.isArray(address) ? address.map((a) => a.address) : [address];
              const local = all.find((a) => isLocalAddress(a));
              if (local) {
                return callback(
                  new Error(
                    `${hostname} resolves to a loopback or private address (allowed with CAS_HELM_REPO_ALLOW_LOOPBACK=true)`,
                  ),
                  address,
                  family,
                );
              }
              callback(null, address, family);
            })) as never,
        },
      });
    }
    return this.agent;
  }

  /** The archive of `chart` (at `version`, else the newest) from the repository at `repo`. */
  async fetchChart(repo: string, chart: string, version?: string): Promise<Buffer> {
    if (!CHART_NAME.test(chart)) throw new BadRequestException([`chart '${chart.slice(0, 100)}' is not a chart name`]);
    if (version !== undefined && !CHART_VERSION.test(version)) {
      throw new BadRequestException([`version '${version.slice(0, 64)}' is not a chart version`]);
    }
    let base: URL;
    try {
      base = new URL(repo.endsWith('/') ? repo : `${repo}/`);
    } catch {
      throw new BadRequestException([`repo '${repo.slice(0, 200)}' is not a URL`]);
    }
    const refused = refusedRepoUrl(base, this.options.allowLocal);
    if (refused) throw new BadRequestException([`repo: ${refused}`]);
    const indexText = (await this.get(new URL('index.yaml', base), MAX_INDEX_BYTES, 'the repository index')).toString(
      'utf8',
    );
    let index: any;
    try {
      index = parse(indexText, { maxAliasCount: 100 });
    } catch {
      throw new HttpException(`the repository's index.yaml is not YAML`, HttpStatus.BAD_GATEWAY);
    }
    const entries: unknown = index?.entries?.[chart];
    if (!Array.isArray(entries) || entries.length === 0) {
      throw new NotFoundException(`the repository ${base.href} has no chart '${chart}'`);
    }
    const entry = version === undefined ? newest(entries) : entries.find((e) => e?.version === version);
    if (!entry) throw new NotFoundException(`the repository has no version ${version} of chart '${chart}'`);
    const href = Array.isArray(entry.urls) ? entry.urls[0] : undefined;
    if (typeof href !== 'string')
      throw new HttpException(`the repository names no archive of '${chart}'`, HttpStatus.BAD_GATEWAY);
    const url = new URL(href, base);
    const refusedChart = refusedRepoUrl(url, this.options.allowLocal);
    if (refusedChart)
      throw new HttpException(`the chart's archive URL is refused: ${refusedChart}`, HttpStatus.BAD_GATEWAY);
    return this.get(url, MAX_CHART_BYTES, `the archive of '${chart}'`);
  }

  private async get(url: URL, max: number, what: string): Promise<Buffer> {
    let res;
    try {
      res = await request(url, {
        dispatcher: this.dispatcher(),
        headersTimeout: FETCH_TIMEOUT_MS,
        bodyTimeout: FETCH_TIMEOUT_MS,
      } as never);
    } catch (error) {
      const cause = (error as { cause?: Error }).cause?.message ?? (error as Error).message;
      throw new HttpException(`${what} could not be read from ${url.host}: ${cause}`, HttpStatus.BAD_GATEWAY);
    }
    if (res.statusCode === 404) {
      await res.body.dump();
      throw new NotFoundException(`${what} is not at ${url.href} (404)`);
    }
    if (res.statusCode !== 200) {
      await res.body.dump();
      throw new HttpException(`${what} at ${url.host} answered ${res.statusCode}`, HttpStatus.BAD_GATEWAY);
    }
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const chunk of res.body) {
      size += (chunk as Buffer).length;
      if (size > max) {
        res.body.destroy();
        throw new HttpException(`${what} is larger than ${max / 1024 / 1024} MiB`, HttpStatus.PAYLOAD_TOO_LARGE);
      }
      chunks.push(chunk as Buffer);
    }
    return Buffer.concat(chunks);
  }

  close(): Promise<void> {
    return this.agent?.close() ?? Promise.resolve();
  }
}

/** The newest version of an index's entries (Helm's index lists them newest first; prereleases only if alone). */
function newest(entries: any[]): any {
  return entries.find((e) => typeof e?.version === 'string' && !e.version.includes('-')) ?? entries[0];
}
