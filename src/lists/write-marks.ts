import { Injectable } from '@nestjs/common';
import { revision } from '../k8s/watch-events.js';

const MAX_MARKS = 10_000;

/**
 * Read-your-writes: the resourceVersion of the latest write made through this replica per (cluster,
 * resource type). A page of that type waits until its cache holds it. A deletion whose final version is
 * not known (a foreground delete finishes later) asks the next page to recount against the cluster.
 */
@Injectable()
export class WriteMarks {
  private readonly marks = new Map<string, { rv: bigint; recount: boolean }>();

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
}
