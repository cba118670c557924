// Helm's storage, read: a release revision is a Secret of type `helm.sh/release.v1` (labels `owner=helm`,
// `name`, `version`, `status`) whose `data.release` is base64 of gzip of the release's JSON, as Helm's
// storage driver writes it. Pure: no I/O, no Nest.
import { gunzip, gunzipSync } from 'node:zlib';
import { promisify } from 'node:util';

export const HELM_SECRET_TYPE = 'helm.sh/release.v1';
/** What the cluster is asked for: only Helm's storage Secrets (the `type` field selects them). */
export const HELM_FIELD_SELECTOR = `type=${HELM_SECRET_TYPE}`;

const gunzipAsync = promisify(gunzip);
const GZIP_MAGIC = [0x1f, 0x8b, 0x08];

export interface ChartRef {
  name: string;
  version: string;
  appVersion: string;
}

/** One revision as the list and history routes show it. */
export interface ReleaseSummary {
  name: string;
  namespace: string;
  revision: number;
  status: string;
  /** When the revision was last deployed (RFC 3339, as Helm stored it). */
  updated: string;
  description: string;
  chart: ChartRef;
}

export interface ReleaseInfo {
  firstDeployed: string;
  lastDeployed: string;
  /** '' unless uninstalled with its history kept. */
  deleted: string;
  status: string;
  description: string;
}

export interface ManifestObject {
  apiVersion: string;
  kind: string;
  name: string;
  /** '' when the manifest leaves it to the release's namespace (or the object is cluster-scoped). */
  namespace: string;
  /** The chart's template it came from (`# Source:`). */
  source: string;
}

export interface ReleaseHook {
  name: string;
  kind: string;
  path: string;
  events: string[];
  weight: number;
  deletePolicies: string[];
  lastRun: { startedAt: string; completedAt: string; phase: string };
}

/** A revision decoded: what the routes need of it, without the chart's templates and files (never served). */
export interface Revision extends ReleaseSummary {
  info: ReleaseInfo;
  chartMetadata: Record<string, unknown>;
  /** The chart's default values, for the computed values. */
  chartValues: Record<string, unknown>;
  /** The user-supplied values (`helm get values`). */
  values: Record<string, unknown>;
  manifest: string;
  objects: ManifestObject[];
  notes: string;
  hooks: ReleaseHook[];
}

export class ReleaseDecodeError extends Error {}

/** A revision as Helm's storage names it (from the Secret's labels), before it is decoded. */
export interface StoredRevision {
  release: string;
  revision: number;
  /** The `status` label (Helm keeps it equal to the release's status). */
  status: string;
  /** The gzip of the release's JSON (or the JSON itself, as Helm reads both). */
  payload: Buffer;
  /** Bytes of the release's JSON once decoded (the gzip trailer says it). */
  decodedBytes: number;
}

const isObject = (value: unknown): value is Record<string, any> =>
  value !== null && typeof value === 'object' && !Array.isArray(value);

const str = (value: unknown): string => (typeof value === 'string' ? own(value) : '');

/** A string of its own: JSON.parse hands out slices of the text it parsed, which would keep all of it alive. */
const own = (value: string): string => (value.length < 13 ? value : Buffer.from(value, 'utf8').toString('utf8'));

/** What Helm stored in a Secret, or null when it is not a release revision Helm's storage would read. */
export function storedRevision(secret: Record<string, any>): StoredRevision | null {
  const labels = isObject(secret.metadata?.labels) ? secret.metadata.labels : {};
  const data = secret.data?.release;
  if (secret.type !== HELM_SECRET_TYPE || labels.owner !== 'helm' || typeof data !== 'string') return null;
  // The Secret's data is base64 (Kubernetes'), of base64 (Helm's) of gzip.
  const payload = Buffer.from(Buffer.from(data, 'base64').toString('latin1'), 'base64');
  const version = Number(labels.version);
  return {
    release: own(String(labels.name ?? '')),
    revision: Number.isSafeInteger(version) ? version : 0,
    status: String(labels.status ?? ''),
    payload,
    decodedBytes: decodedSize(payload),
  };
}

const isGzip = (payload: Buffer) => GZIP_MAGIC.every((byte, i) => payload[i] === byte);

/** The JSON's size: gzip's trailer holds it (modulo 4 GiB, far beyond any Secret). */
export function decodedSize(payload: Buffer): number {
  return isGzip(payload) && payload.length >= 18 ? payload.readUInt32LE(payload.length - 4) : payload.length;
}

/** The release's JSON text, gunzipped on the thread pool (never on the event loop). */
export async function releaseText(payload: Buffer): Promise<string> {
  try {
    return (isGzip(payload) ? await gunzipAsync(payload) : payload).toString('utf8');
  } catch (error) {
    throw new ReleaseDecodeError(`the release's data is not gzip Helm can read: ${(error as Error).message}`);
  }
}

/** As releaseText, synchronously (in a worker thread). */
export function releaseTextSync(payload: Buffer): string {
  try {
    return (isGzip(payload) ? gunzipSync(payload) : payload).toString('utf8');
  } catch (error) {
    throw new ReleaseDecodeError(`the release's data is not gzip Helm can read: ${(error as Error).message}`);
  }
}

/** A revision from the release's JSON text. */
export function revisionOf(text: string, namespace: string): Revision {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    throw new ReleaseDecodeError("the release's data is not JSON");
  }
  if (!isObject(raw)) throw new ReleaseDecodeError("the release's data is not a JSON object");
  const info = isObject(raw.info) ? raw.info : {};
  const chart = isObject(raw.chart) ? raw.chart : {};
  const metadata = isObject(chart.metadata) ? chart.metadata : {};
  const manifest = str(raw.manifest);
  const summaryInfo: ReleaseInfo = {
    firstDeployed: str(info.first_deployed),
    lastDeployed: str(info.last_deployed),
    deleted: str(info.deleted),
    status: str(info.status),
    description: str(info.description),
  };
  return {
    name: str(raw.name),
    namespace: str(raw.namespace) || namespace,
    revision: typeof raw.version === 'number' ? raw.version : 0,
    status: summaryInfo.status,
    updated: summaryInfo.lastDeployed,
    description: summaryInfo.description,
    chart: { name: str(metadata.name), version: str(metadata.version), appVersion: str(metadata.appVersion) },
    info: summaryInfo,
    // Copies: what JSON.parse made holds slices of the whole text, the chart's templates and files included.
    chartMetadata: structuredClone(metadata),
    chartValues: isObject(chart.values) ? structuredClone(chart.values) : {},
    values: isObject(raw.config) ? structuredClone(raw.config) : {},
    manifest,
    objects: manifestObjects(manifest),
    notes: str(info.notes),
    hooks: (Array.isArray(raw.hooks) ? raw.hooks : []).filter(isObject).map(hookOf),
  };
}

function hookOf(hook: Record<string, any>): ReleaseHook {
  const run = isObject(hook.last_run) ? hook.last_run : {};
  const strings = (value: unknown) => (Array.isArray(value) ? value.map((v) => own(String(v))) : []);
  return {
    name: str(hook.name),
    kind: str(hook.kind),
    path: str(hook.path),
    events: strings(hook.events),
    weight: typeof hook.weight === 'number' ? hook.weight : 0,
    deletePolicies: strings(hook.delete_policies),
    lastRun: { startedAt: str(run.started_at), completedAt: str(run.completed_at), phase: str(run.phase) },
  };
}

/** A top-level scalar of a YAML document (`kind: Secret`), unquoted. */
function topScalar(doc: string, key: string, indent = ''): string {
  const match = new RegExp(`^${indent}${key}:[ \\t]*(.*)$`, 'm').exec(doc);
  return match ? unquote(match[1]) : '';
}

function unquote(value: string): string {
  const v = value.replace(/[ \t]+#.*$/, '').trim();
  if ((v.startsWith('"') && v.endsWith('"')) || (v.startsWith("'") && v.endsWith("'"))) return v.slice(1, -1);
  return v;
}

/**
 * Each object of a rendered manifest: its kind, name and namespace, read from the document's text as Helm
 * renders it (`---` between documents, `# Source:` first, `metadata:` a block mapping). A scan, not a YAML
 * parse: a large manifest's list of objects costs a pass over its lines.
 */
export function manifestObjects(manifest: string): ManifestObject[] {
  const objects: ManifestObject[] = [];
  for (const doc of manifest.split(/^---[ \t]*$/m)) {
    const kind = topScalar(doc, 'kind');
    if (!kind) continue;
    let name = '';
    let namespace = '';
    const metadata = /^metadata:[ \t]*\r?\n/m.exec(doc);
    if (metadata) {
      const rest = doc.slice(metadata.index + metadata[0].length);
      const indent = /^([ \t]+)\S/.exec(rest)?.[1];
      if (indent) {
        const lines = rest.split('\n');
        const end = lines.findIndex((l) => l.trim() !== '' && !l.startsWith(indent) && !l.startsWith('#'));
        const text = (end === -1 ? lines : lines.slice(0, end)).join('\n');
        name = topScalar(text, 'name', indent);
        namespace = topScalar(text, 'namespace', indent);
      }
    }
    objects.push({
      apiVersion: topScalar(doc, 'apiVersion'),
      kind,
      name,
      namespace,
      source: /^# Source: (.*)$/m.exec(doc)?.[1]?.trim() ?? '',
    });
  }
  return objects;
}

/**
 * The values a revision was rendered with (`helm get values --all`): the chart's defaults under the
 * user's values, as Helm coalesces them: maps merge, a user's value wins, a user's null removes the default.
 */
export function computedValues(chartValues: Record<string, unknown>, values: Record<string, unknown>) {
  return coalesce(structuredClone(values), chartValues);
}

function coalesce(dst: Record<string, unknown>, src: Record<string, unknown>): Record<string, unknown> {
  for (const [key, value] of Object.entries(src)) {
    if (!(key in dst)) dst[key] = structuredClone(value);
    else if (dst[key] === null) delete dst[key];
    else if (isObject(dst[key]) && isObject(value)) coalesce(dst[key] as Record<string, unknown>, value);
  }
  return dst;
}

export function summaryOf(revision: Revision): ReleaseSummary {
  const { name, namespace, status, updated, description, chart } = revision;
  return { name, namespace, revision: revision.revision, status, updated, description, chart };
}
