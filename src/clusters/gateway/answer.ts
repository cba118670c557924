import type { IncomingHttpHeaders } from 'node:http';
import { performance } from 'node:perf_hooks';
import { Readable } from 'node:stream';
import type { Dispatcher } from 'undici';

/** A cluster's answer, its body unread: a stream with the status and the headers (names in lower case). */
export interface ClusterResponse extends Readable {
  statusCode: number;
  headers: IncomingHttpHeaders;
}

/** A cluster's whole answer, read before it is handed on (a small one). */
export interface SettledAnswer {
  statusCode: number;
  contentType: string;
  body: Buffer;
  /** The answer's Warning headers (the apiserver's deprecation notices), as received. */
  warning?: string | string[];
}

/** What a call answers: read whole when small enough, or streamed as it arrives. */
export type ClusterAnswer = ClusterResponse | SettledAnswer;

/** How much of an answer is gathered before it is handed on. */
export interface Gather {
  /** Answers that end within this many bytes come back whole; 0: every answer streams. */
  upTo: number;
  /** Whether an answer without a Content-Length is gathered too (else it streams at once). */
  unsized: boolean;
}

export const STREAM: Gather = Object.freeze({ upTo: 0, unsized: false });

/** When the answer's status line and headers came (performance.now()); 0 until then. */
export interface Answered {
  at: number;
}

const EMPTY = Buffer.alloc(0);

/**
 * Receives one answer through undici's public dispatch API. An answer that ends within `gather.upTo`
 * bytes is handed on whole (no stream is made for it); any other becomes a Readable that resumes the
 * connection as it is read, holding the bytes gathered so far first. Destroying that stream aborts
 * the request, so nothing keeps reading from a cluster for a caller who left.
 */
export class AnswerHandler implements Dispatcher.DispatchHandler {
  private controller?: Dispatcher.DispatchController;
  private stream?: ClusterResponse;
  private settled?: SettledAnswer;
  private headers?: IncomingHttpHeaders;
  private chunks: Buffer[] = [];
  private gathered = 0;
  private done = false;

  constructor(
    private readonly method: string,
    private readonly gather: Gather,
    readonly answered: Answered,
    private readonly resolve: (answer: ClusterAnswer) => void,
    private readonly reject: (error: Error) => void,
  ) {}

  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.controller = controller;
  }

  /** Gives up before the answer started (a deadline): the request is aborted once it is under way. */
  abort(error: Error): void {
    if (this.answered.at !== 0 || this.done) return;
    this.done = true;
    this.controller?.abort(error);
    this.reject(error);
  }

  onResponseStart(controller: Dispatcher.DispatchController, statusCode: number, headers: IncomingHttpHeaders): void {
    if (statusCode < 200 || this.done) return;
    this.answered.at = performance.now();
    const length = headers['content-length'] === undefined ? NaN : Number(headers['content-length']);
    const { upTo, unsized } = this.gather;
    if (this.method === 'HEAD' || upTo === 0 || length > upTo || (Number.isNaN(length) && !unsized)) {
      this.streamOn(controller, statusCode, headers);
      return;
    }
    const contentType = headers['content-type'];
    this.settled = {
      statusCode,
      contentType: typeof contentType === 'string' ? contentType : 'application/json',
      body: EMPTY,
      warning: headers.warning,
    };
    this.headers = headers;
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    if (this.stream) {
      if (!this.stream.push(chunk)) controller.pause();
      return;
    }
    if (!this.settled) return;
    this.chunks.push(chunk);
    this.gathered += chunk.length;
    if (this.gathered <= this.gather.upTo) return;
    // Larger than it may be held: it streams from here, the bytes gathered so far first.
    const chunks = this.chunks;
    this.chunks = [];
    const stream = this.streamOn(controller, this.settled.statusCode, this.headers!);
    let more = true;
    for (const gathered of chunks) more = stream.push(gathered);
    if (!more) controller.pause();
  }

  onResponseEnd(): void {
    if (this.stream) {
      this.stream.push(null);
      return;
    }
    const settled = this.settled;
    if (!settled || this.done) return;
    this.done = true;
    settled.body = this.chunks.length === 1 ? this.chunks[0] : Buffer.concat(this.chunks, this.gathered);
    this.resolve(settled);
  }

  onResponseError(_controller: Dispatcher.DispatchController, error: Error): void {
    const stream = this.stream;
    if (stream) {
      if (!stream.destroyed) stream.destroy(error);
      return;
    }
    if (this.done) return;
    this.done = true;
    this.reject(error);
  }

  private streamOn(
    controller: Dispatcher.DispatchController,
    statusCode: number,
    headers: IncomingHttpHeaders,
  ): ClusterResponse {
    let ended = false;
    const stream = new Readable({
      read: () => controller.resume(),
      destroy: (error, callback) => {
        if (!ended && !controller.aborted) controller.abort(error ?? new Error('the answer was not read to its end'));
        callback(error);
      },
    }) as ClusterResponse;
    stream.once('end', () => (ended = true));
    stream.statusCode = statusCode;
    stream.headers = headers;
    this.stream = stream;
    this.done = true;
    this.resolve(stream);
    return stream;
  }
}
