import { Injectable } from '@nestjs/common';
import { pipeline, Transform } from 'node:stream';
import { parseRequestInfo } from '../../k8s/request-info.js';
import { revision } from '../../k8s/watch-events.js';
import type { ClusterAnswer, ClusterResponse } from './answer.js';
import type { ClusterCall } from './cluster-client.js';

const MAX_MARKS = 10_000;
/** A write's answer larger than this is not kept for its resourceVersion (the apiserver takes 3 MiB objects). */
const MAX_KEPT_ANSWER = 3 * 1024 * 1024;
/** Subresources whose writes change no object of the collection (they run something or pass through). */
const NOT_OBJECT_WRITES = new Set(['exec', 'attach', 'portforward', 'proxy', 'log']);
/** Subresources whose write ends the object (a pod's eviction): the next page recounts, as after a delete. */
const ENDING_WRITES = new Set(['eviction']);

/** The collection a write through the gateway changes: its resource id (`<plural>[.<group>]`), and whether it deletes. */
export interface WrittenCollection {
  resourceId: string;
  deleted: boolean;
}

/**
 * The collection a call toward a cluster writes, or undefined: a read, a dry run, a non-resource path,
 * a review, or a subresource that runs something rather than changing an object. A status or scale
 * write changes its parent object, so it marks the parent's collection.
 */
export function writtenCollection(call: Pick<ClusterCall, 'method' | 'path' | 'query'>): WrittenCollection | undefined {
  if (call.method === 'GET' || call.method === 'HEAD') return undefined;
  const query = call.query ?? new URLSearchParams();
  if (query.getAll('dryRun').length > 0) return undefined;
  let path = call.path;
  try {
    path = decodeURI(path);
  } catch {
    /* the path as sent: only its type's segments matter here */
  }
  let info;
  try {
    info = parseRequestInfo(call.method, path, query);
  } catch {
    return undefined;
  }
  if (!info.isResourceRequest || !info.resource || NOT_OBJECT_WRITES.has(info.subresource)) return undefined;
  if (info.apiGroup === 'authorization.k8s.io' || info.apiGroup === 'authentication.k8s.io') return undefined;
  const resourceId = info.apiGroup ? `${info.resource}.${info.apiGroup}` : info.resource;
  return { resourceId, deleted: info.verb === 'delete' || info.verb === 'deletecollection' || ENDING_WRITES.has(info.subresource) };
}

function isJson(contentType: unknown): boolean {
  return typeof contentType !== 'string' || /json/i.test(contentType);
}

/**
 * Read-your-writes: the resourceVersion of the latest write made through this replica per (cluster,
 * resource type). A page of that type waits until its cache holds it. A deletion whose final version is
 * not known (a foreground delete finishes later) asks the next page to recount against the cluster.
 *
 * Every write toward a cluster marks itself here: the gateway's clients call `observe` with each answer
 * to a call that is not a read (resource routes, subresources such as scale and status, apply, the
 * Kubernetes path), so no route has to remember to.
 */
@Injectable()
export class WriteMarks {
  private readonly marks = new Map<string, { rv: bigint; recount: boolean }>();

  /**
   * The write hook: marks the collection a successful write changed, with the resourceVersion its answer
   * carries. A streamed answer is passed through and read for it as it goes; the mark is made before the
   * answer's end reaches its reader.
   */
  observe(cluster: string, call: ClusterCall, answer: ClusterAnswer): ClusterAnswer {
    if (answer.statusCode >= 300) return answer;
    const written = writtenCollection(call);
    if (!written) return answer;
    if (written.deleted) {
      this.note(cluster, written.resourceId, undefined, true);
      return answer;
    }
    if ('body' in answer && Buffer.isBuffer(answer.body)) {
      if (isJson(answer.contentType)) this.note(cluster, written.resourceId, answer.body);
      return answer;
    }
    const res = answer as ClusterResponse;
    if (!isJson(res.headers['content-type'])) return answer;
    return this.tap(res, (body) => this.note(cluster, written.resourceId, body));
  }

  /** A write answered with this object (or Status): its resourceVersion, when it has one. */
  note(cluster: string, resourceId: string, answerBody: Buffer | undefined, deleted = false): void {
    let rv: bigint | null = null;
    if (answerBody) {
      try {
        rv = revision(JSON.parse(answerBody.toString('utf8'))?.metadata?.resourceVersion);
      } catch {
        /* not JSON: nothing to wait for */
      }
    }
    if (rv === null && !deleted) return;
    const k = `${cluster}\0${resourceId}`;
    const old = this.marks.get(k);
    if (this.marks.size >= MAX_MARKS && !old) this.marks.clear();
    this.marks.set(k, {
      rv: old && rv !== null && old.rv > rv ? old.rv : (rv ?? old?.rv ?? 0n),
      recount: deleted || (old?.recount ?? false),
    });
  }

  /** What a page must wait for; taking a recount clears it. */
  take(cluster: string, resourceId: string): { rv?: bigint; recount: boolean } {
    const k = `${cluster}\0${resourceId}`;
    const mark = this.marks.get(k);
    if (!mark) return { recount: false };
    if (mark.recount) this.marks.set(k, { ...mark, recount: false });
    return { rv: mark.rv, recount: mark.recount };
  }

  /** The answer passed through unchanged, its bytes (up to MAX_KEPT_ANSWER) handed to `ended` before its end is read. */
  private tap(res: ClusterResponse, ended: (body: Buffer) => void): ClusterResponse {
    const chunks: Buffer[] = [];
    let kept = 0;
    const tap = new Transform({
      transform(chunk: Buffer, _encoding, callback) {
        kept += chunk.length;
        if (kept <= MAX_KEPT_ANSWER) chunks.push(chunk);
        callback(null, chunk);
      },
      flush(callback) {
        if (kept <= MAX_KEPT_ANSWER) ended(Buffer.concat(chunks, kept));
        callback();
      },
    });
    // Destroying the tap destroys the answer, which aborts the request, as destroying the answer itself would.
    pipeline(res, tap, () => undefined);
    return Object.assign(tap, { statusCode: res.statusCode, headers: res.headers }) as unknown as ClusterResponse;
  }
}
