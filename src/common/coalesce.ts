import { pipeline, Transform, type Readable, type TransformCallback } from 'node:stream';

/** At most this much is held back to be sent with what follows; more is sent at once. */
export const COALESCE_BYTES = 256 * 1024;

/**
 * Holds the chunks that arrive within one turn of the event loop and passes them on together at its
 * end (setImmediate), so the response's socket writes them in one system call. A cluster's TLS stream
 * arrives in records of 16 KiB, each its own callback: piped as they come, a 1.2 MiB list left the
 * service in ~90 socket writes, each waking the reader. Back-pressure is kept: at most
 * COALESCE_BYTES wait here, and a full reader holds the source as a plain pipe would.
 */
class Coalescer extends Transform {
  private held: Buffer[] = [];
  private heldBytes = 0;
  private timer: NodeJS.Immediate | undefined;

  constructor() {
    super({ readableHighWaterMark: COALESCE_BYTES, writableHighWaterMark: COALESCE_BYTES });
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, done: TransformCallback): void {
    this.held.push(chunk);
    this.heldBytes += chunk.length;
    if (this.heldBytes >= COALESCE_BYTES) this.release();
    else this.timer ??= setImmediate(() => this.release());
    done();
  }

  override _flush(done: TransformCallback): void {
    this.release();
    done();
  }

  override _destroy(error: Error | null, done: (error?: Error | null) => void): void {
    if (this.timer) clearImmediate(this.timer);
    this.held = [];
    done(error);
  }

  private release(): void {
    if (this.timer) clearImmediate(this.timer);
    this.timer = undefined;
    if (this.heldBytes === 0) return;
    // One buffer, not the chunks one by one: the socket takes one write of up to its high-water mark
    // (16 KiB) before a pipe waits for 'drain', so chunks pushed singly still left in separate writes.
    const batch = this.held.length === 1 ? this.held[0] : Buffer.concat(this.held, this.heldBytes);
    this.held = [];
    this.heldBytes = 0;
    this.push(batch);
  }
}

/**
 * `source` as a stream whose chunks come in batches of what arrived together. Destroying the result
 * (the caller left) destroys the source; an error of the source ends the result with that error.
 */
export function coalesce(source: Readable): Readable {
  const batches = new Coalescer();
  pipeline(source, batches, () => undefined);
  return batches;
}
