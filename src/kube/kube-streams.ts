import type { Readable } from 'node:stream';
import { PassThrough } from 'node:stream';
import type { Caller } from '../access/caller.js';
import type { ClusterConnection } from '../clusters/cluster-connection.js';
import type { OwnedStream, StreamKind, StreamOwner, StreamTicket } from '../streams/stream-owner.js';

/**
 * A long-lived answer of the Kubernetes path (a watch, a followed log), owned by the stream owner:
 * the cluster's bytes pass through unchanged until the caller leaves, a re-check fails or the service
 * drains; then the caller's answer ends cleanly (kubectl and client-go watch again) and the cluster's
 * request is dropped.
 */
export class KubeStream implements OwnedStream {
  readonly body = new PassThrough();
  readonly access = [];
  private ending = false;

  constructor(
    readonly kind: StreamKind,
    readonly caller: Caller,
    readonly secret: string,
    readonly cluster: ClusterConnection,
    /** The request decided again for the caller as resolved now. */
    readonly clusterCheck: (caller: Caller) => Promise<string | null>,
    private readonly upstream: Readable,
    private readonly owner: StreamOwner,
  ) {}

  start(ticket: StreamTicket): Readable {
    this.upstream.on('error', (error) => {
      if (!this.ending) this.body.destroy(error);
    });
    this.body.once('close', () => {
      this.upstream.destroy();
      this.owner.release(this);
    });
    this.upstream.pipe(this.body);
    this.owner.own(this, ticket);
    return this.body;
  }

  end(): void {
    if (this.ending) return;
    this.ending = true;
    this.upstream.unpipe(this.body);
    this.body.end();
    this.upstream.destroy();
  }
}
