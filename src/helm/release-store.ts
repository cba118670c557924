// What the list cache keeps of each Helm storage Secret: the revision's gzip and, once a query needed it, the
// revision decoded (once per revision: a new resourceVersion is a new entry). Large revisions are decoded on a
// worker thread.
import type { Entry, EntryType } from '../lists/entries.js';
import { serveTask, WorkerTasks } from '../common/worker-task.js';
import { type ResourceType } from '../k8s/resource-path.js';
import {
  releaseText,
  releaseTextSync,
  revisionOf,
  type Revision,
  type StoredRevision,
  storedRevision,
} from './release.js';

/** An entry of the Helm view of the Secrets' cache. */
export interface ReleaseEntry extends Entry {
  /** null: a Secret of Helm's type that Helm's storage would not read (no `owner=helm`, no data). */
  readonly stored: StoredRevision | null;
}

/** The Secrets as the list caches know them: Helm's storage is read through their reflector. */
export const SECRETS: ResourceType = {
  group: '',
  version: 'v1',
  plural: 'secrets',
  kind: 'Secret',
  namespaced: true,
  verbs: ['get', 'list', 'watch'],
};

/** Revisions decoded beyond this many bytes of JSON are decoded on a worker thread. */
export const THREAD_DECODE_BYTES = 512 * 1024;
/** A revision's JSON beyond this is not decoded at all (Secrets hold 1 MiB: gzip ratios past 64 are not Helm's). */
export const MAX_DECODED_BYTES = 64 * 1024 * 1024;

const decodeThreads = new WorkerTasks<{ payload: Uint8Array; namespace: string }, Revision>(
  new URL(import.meta.url),
  'helm-decode',
  { threads: 2, waiting: 64, heapMb: 512, timeoutMs: 30_000 },
);

serveTask<{ payload: Uint8Array; namespace: string }, Revision>('helm-decode', ({ payload, namespace }) =>
  revisionOf(releaseTextSync(Buffer.from(payload)), namespace),
);

/** The entry of a Helm storage Secret: its facts, the revision's gzip; its `bytes` count the decoded JSON too. */
export function releaseEntry(object: Record<string, any>, type: EntryType): ReleaseEntry {
  const metadata = object.metadata ?? {};
  const stored = storedRevision(object);
  const namespace = type.intern(String(metadata.namespace ?? ''));
  const name = String(metadata.name ?? '');
  const release = stored?.release ?? '';
  return {
    namespace,
    name,
    labels: stored ? { name: release, owner: 'helm', status: stored.status, version: String(stored.revision) } : {},
    haystack: release.toLowerCase(),
    json: '',
    metadataEnd: 0,
    bytes: stored ? stored.payload.length + stored.decodedBytes : 0,
    resourceVersion: String(metadata.resourceVersion ?? ''),
    created: typeof metadata.creationTimestamp === 'string' ? metadata.creationTimestamp : null,
    stored,
  };
}

const decoded = new WeakMap<ReleaseEntry, Promise<Revision>>();

/** The entry's revision, decoded once (the same promise for every query until the entry is replaced). */
export function decodeEntry(entry: ReleaseEntry): Promise<Revision> {
  let found = decoded.get(entry);
  if (!found) {
    found = decode(entry);
    found.catch(() => undefined);
    decoded.set(entry, found);
  }
  return found;
}

async function decode(entry: ReleaseEntry): Promise<Revision> {
  const stored = entry.stored!;
  if (stored.decodedBytes > MAX_DECODED_BYTES) {
    throw new Error(`revision ${stored.revision} of release '${stored.release}' is too large to decode`);
  }
  if (stored.decodedBytes > THREAD_DECODE_BYTES) {
    return decodeThreads.run({ payload: stored.payload, namespace: entry.namespace });
  }
  return revisionOf(await releaseText(stored.payload), entry.namespace);
}
