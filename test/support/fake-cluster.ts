// An in-memory stand-in for a ClusterClient, for the unit tier only: one collection with a resourceVersion counter,
// paged lists (also exactly at a version), watches from a version (410 below the compaction floor), and handles to
// break or end a watch. It is a test double of the service's own client seam, not of the Kubernetes API: everything
// the service does against a real cluster is tested end to end against the harness's control plane.
import { PassThrough } from 'node:stream';
import type { ClusterResponse } from '../../src/clusters/gateway/answer.js';
import type { ClusterCall, ClusterClient } from '../../src/clusters/gateway/cluster-client.js';

type Obj = Record<string, any>;

interface Change {
  type: 'ADDED' | 'MODIFIED' | 'DELETED';
  rv: number;
  object: Obj;
}

function response(statusCode: number, body?: string): ClusterResponse {
  const stream = new PassThrough() as unknown as ClusterResponse;
  stream.statusCode = statusCode;
  stream.headers = { 'content-type': 'application/json' };
  if (body !== undefined) (stream as unknown as PassThrough).end(body);
  return stream;
}

const status = (code: number, reason: string, message: string) =>
  JSON.stringify({ kind: 'Status', apiVersion: 'v1', status: 'Failure', code, reason, message });

export class FakeCollection {
  /** Every change since the start; lists at a version replay it. */
  readonly log: Change[] = [];
  private rv = 100;
  /** Versions below this one are gone (410), as after an etcd compaction. */
  floor = 0;
  readonly watches = new Set<PassThrough>();
  /** Calls received, in order: `list <query>` or `watch <query>`. */
  readonly calls: string[] = [];
  /** When set, every call gets this status instead. */
  refuseWith?: number;

  constructor(readonly kind = 'ConfigMap') {}

  get resourceVersion(): string {
    return String(this.rv);
  }

  private stateAt(rv: number): Map<string, Obj> {
    const state = new Map<string, Obj>();
    for (const change of this.log) {
      if (change.rv > rv) break;
      const key = `${change.object.metadata.namespace ?? ''}/${change.object.metadata.name}`;
      if (change.type === 'DELETED') state.delete(key);
      else state.set(key, change.object);
    }
    return state;
  }

  /** Writes an object (created or modified) or deletes it, and tells every open watch. */
  write(type: Change['type'], namespace: string, name: string, extra: Obj = {}): string {
    const rv = ++this.rv;
    const object = {
      apiVersion: 'v1',
      kind: this.kind,
      ...extra,
      metadata: { namespace, name, resourceVersion: String(rv), ...(extra.metadata ?? {}) },
    };
    this.log.push({ type, rv, object });
    const line = JSON.stringify({ type, object }) + '\n';
    for (const watch of this.watches) watch.write(line);
    return String(rv);
  }

  bookmark(): void {
    const line = JSON.stringify({
      type: 'BOOKMARK',
      object: { kind: this.kind, metadata: { resourceVersion: String(this.rv) } },
    });
    for (const watch of this.watches) watch.write(line + '\n');
  }

  /** The cluster ends every watch cleanly (its time-out). */
  endWatches(): void {
    for (const watch of [...this.watches]) {
      this.watches.delete(watch);
      watch.end();
    }
  }

  /** Every watch connection breaks. */
  breakWatches(): void {
    for (const watch of [...this.watches]) watch.destroy(new Error('connection reset'));
  }

  /** The cluster sends an ERROR event (410 Expired) on every watch. */
  expireWatches(): void {
    const line = JSON.stringify({
      type: 'ERROR',
      object: JSON.parse(status(410, 'Expired', 'too old resource version')),
    });
    for (const watch of [...this.watches]) {
      this.watches.delete(watch);
      watch.write(line + '\n');
      watch.end();
    }
  }

  handle(call: ClusterCall): ClusterResponse {
    const query = call.query ?? new URLSearchParams();
    const isWatch = query.get('watch') === 'true';
    this.calls.push(`${isWatch ? 'watch' : 'list'} ${query}`);
    if (this.refuseWith) return response(this.refuseWith, status(this.refuseWith, 'Forbidden', 'refused by the fake'));
    const asked = Number(query.get('resourceVersion') ?? '0');
    if (isWatch) {
      if (asked < this.floor) return response(410, status(410, 'Expired', 'too old resource version'));
      const stream = response(200);
      const pass = stream as unknown as PassThrough;
      for (const change of this.log) {
        if (change.rv > asked) pass.write(JSON.stringify({ type: change.type, object: change.object }) + '\n');
      }
      this.watches.add(pass);
      pass.on('close', () => this.watches.delete(pass));
      return stream;
    }
    const exact = query.get('resourceVersionMatch') === 'Exact';
    const token = query.get('continue');
    let at = this.rv;
    let offset = 0;
    if (token) [at, offset] = token.split(':').map(Number);
    else if (exact) {
      if (asked < this.floor) return response(410, status(410, 'Expired', 'too old resource version'));
      at = asked;
    }
    const items = [...this.stateAt(at).values()].sort((a, b) =>
      `${a.metadata.namespace}/${a.metadata.name}`.localeCompare(`${b.metadata.namespace}/${b.metadata.name}`),
    );
    const limit = Number(query.get('limit') ?? items.length) || items.length;
    const page = items.slice(offset, offset + limit);
    const metadataOnly = (call.accept ?? '').includes('PartialObjectMetadataList');
    const next = offset + limit < items.length ? `${at}:${offset + limit}` : undefined;
    return response(
      200,
      JSON.stringify({
        kind: `${this.kind}List`,
        metadata: { resourceVersion: String(at), ...(next ? { continue: next } : {}) },
        items: page.map((o) =>
          metadataOnly ? { metadata: o.metadata } : { ...o, apiVersion: undefined, kind: undefined },
        ),
      }),
    );
  }
}

/** A ClusterClient whose every call is answered by `collection` (only what reflectors and caches use). */
export function fakeClusterClient(collection: FakeCollection, name = 'fake'): ClusterClient {
  const client = {
    conn: { clusterName: name, clusterId: 1, generation: 1 },
    identity: undefined,
    name,
    target: `cluster '${name}'`,
    async send(call: ClusterCall) {
      return collection.handle(call);
    },
    async read(res: ClusterResponse) {
      const chunks: Buffer[] = [];
      for await (const chunk of res) chunks.push(chunk as Buffer);
      return Buffer.concat(chunks);
    },
    parse(body: Buffer) {
      return JSON.parse(body.toString('utf8'));
    },
  };
  return client as unknown as ClusterClient;
}
