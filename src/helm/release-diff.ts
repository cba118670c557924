// What changed between two manifests of a release (two revisions, or a revision and what a dry run renders):
// per object a unified diff as apply shows it (Secret values hidden), and a diff of the user-supplied values.
// Large manifests are compared on a worker thread.
import { createTwoFilesPatch } from 'diff';
import { parseAllDocuments, parseDocument, stringify } from 'yaml';
import { redactSecret, unifiedDiff } from '../apply/apply-diff.js';
import { serveTask, WorkerTasks } from '../common/worker-task.js';

type Obj = Record<string, any>;

export interface ObjectDiff {
  apiVersion: string;
  kind: string;
  name: string;
  namespace: string;
  change: 'added' | 'removed' | 'changed';
  diff: string;
}

export interface ManifestDiff {
  objects: ObjectDiff[];
  unchanged: number;
  values: string;
}

export interface DiffInput {
  before: string;
  after: string;
  /** The release's namespace: an object that names none is in it. */
  namespace: string;
  beforeValues: Obj;
  afterValues: Obj;
}

/** Manifests (both together) up to this many characters are compared inline. */
export const INLINE_MANIFEST_CHARS = 256 * 1024;

const isObject = (value: unknown): value is Obj => value !== null && typeof value === 'object' && !Array.isArray(value);

/** The objects of a rendered manifest, by `group/kind/namespace/name`, in the manifest's order. */
export function manifestDocuments(manifest: string, namespace: string): Map<string, Obj> {
  const found = new Map<string, Obj>();
  for (const doc of parseAllDocuments(manifest) as Array<{ toJS: (o: object) => unknown }>) {
    let value: unknown;
    try {
      value = doc.toJS({ maxAliasCount: 100 });
    } catch {
      continue;
    }
    if (!isObject(value) || typeof value.kind !== 'string') continue;
    found.set(objectKey(value, namespace), value.kind === 'Secret' ? asStored(value) : value);
  }
  return found;
}

/**
 * A Secret as the cluster stores it: `stringData` merged into `data` (base64), so that a changed value shows as
 * `*** (changed)` whichever of the two the chart writes it in.
 */
function asStored(secret: Obj): Obj {
  if (!isObject(secret.stringData)) return secret;
  const { stringData, ...rest } = secret;
  const data: Obj = isObject(rest.data) ? { ...rest.data } : {};
  for (const [key, value] of Object.entries(stringData)) data[key] = Buffer.from(String(value)).toString('base64');
  return { ...rest, data };
}

/** An object's identity across revisions: its group (not version), kind, namespace and name. */
export function objectKey(object: Obj, namespace: string): string {
  const group = String(object.apiVersion ?? '').includes('/') ? String(object.apiVersion).split('/')[0] : '';
  return [group, object.kind, object.metadata?.namespace ?? namespace, object.metadata?.name ?? ''].join('/');
}

const labelOf = (object: Obj) => `${object.kind}/${object.metadata?.name ?? ''}`;

/** The diff itself (see diffManifests). */
export function compareManifests(input: DiffInput): ManifestDiff {
  const before = manifestDocuments(input.before, input.namespace);
  const after = manifestDocuments(input.after, input.namespace);
  const objects: ObjectDiff[] = [];
  let unchanged = 0;
  const facts = (object: Obj) => ({
    apiVersion: String(object.apiVersion ?? ''),
    kind: String(object.kind),
    name: String(object.metadata?.name ?? ''),
    namespace: String(object.metadata?.namespace ?? ''),
  });
  for (const [key, object] of after) {
    const old = before.get(key) ?? null;
    const secret = object.kind === 'Secret';
    const diff = unifiedDiff(labelOf(object), old, object, secret) ?? notShown(labelOf(object));
    if (diff === '') unchanged++;
    else objects.push({ ...facts(object), change: old ? 'changed' : 'added', diff });
  }
  for (const [key, object] of before) {
    if (after.has(key)) continue;
    const diff = unifiedDiff(labelOf(object), object, null, object.kind === 'Secret') ?? notShown(labelOf(object));
    objects.push({ ...facts(object), change: 'removed', diff });
  }
  return { objects, unchanged, values: valuesDiff(input.beforeValues, input.afterValues) };
}

function notShown(label: string): string {
  return `--- a/${label}\n+++ b/${label}\n# not shown: the changes take too long to find\n`;
}

/** A unified diff of two sets of values as YAML ('' when equal). */
export function valuesDiff(before: Obj, after: Obj): string {
  const a = Object.keys(before).length ? stringify(before, { lineWidth: 0 }) : '';
  const b = Object.keys(after).length ? stringify(after, { lineWidth: 0 }) : '';
  if (a === b) return '';
  const patch = createTwoFilesPatch('a/values.yaml', 'b/values.yaml', a, b, '', '', { context: 3, timeout: 1_000 });
  return patch === undefined ? '' : patch.slice(patch.indexOf('---'));
}

const threads = new WorkerTasks<DiffInput, ManifestDiff>(new URL(import.meta.url), 'helm-diff', {
  threads: 2,
  waiting: 16,
  heapMb: 512,
  timeoutMs: 30_000,
});

/** What changed from `before` to `after`: inline when small, else on a worker thread. */
export function diffManifests(input: DiffInput): Promise<ManifestDiff> {
  if (input.before.length + input.after.length <= INLINE_MANIFEST_CHARS) {
    return Promise.resolve(compareManifests(input));
  }
  return threads.run(input);
}

serveTask<DiffInput, ManifestDiff>('helm-diff', compareManifests);

/**
 * A rendered manifest with each Secret's values shown as `***`, as apply shows them: the documents of Secrets
 * written again (their `# Source:` line kept), every other document as rendered.
 */
export function maskedManifest(manifest: string): string {
  return manifest
    .split(/^(?=---[ \t]*$)/m)
    .map((doc) => {
      if (!/^kind:[ \t]*["']?Secret["']?[ \t]*$/m.test(doc)) return doc;
      const source = /^# Source: .*$/m.exec(doc)?.[0];
      let value: unknown;
      try {
        value = parseDocument(doc.replace(/^---[ \t]*$/m, '')).toJS({ maxAliasCount: 100 });
      } catch {
        return `---\n${source ? `${source}\n` : ''}# (a Secret that is not YAML: not shown)\n`;
      }
      if (!isObject(value)) return doc;
      return `---\n${source ? `${source}\n` : ''}${stringify(redactSecret(value, true), { lineWidth: 0 })}`;
    })
    .join('');
}
