import type { Readable } from 'node:stream';

/**
 * Reads a whole stream into one buffer, but at most `limit` bytes: past that the stream is destroyed
 * and `tooLarge(limit)` is thrown, so an answer can never grow the process without bound.
 */
export function readBounded(stream: Readable, limit: number, tooLarge: (limit: number) => Error): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) {
        stream.off('data', onData);
        stream.destroy();
        reject(tooLarge(limit));
        return;
      }
      chunks.push(chunk);
    };
    let ended = false;
    stream.on('data', onData);
    stream.once('end', () => {
      ended = true;
      resolve(Buffer.concat(chunks, size));
    });
    stream.once('error', reject);
    // Closed before its end (and without an error): what came is not the whole answer. Every stream
    // closes, after its end too: the error is built only when it is one (an Error captures a stack
    // trace, too costly to build for every answer).
    stream.once('close', () => {
      if (!ended) reject(Object.assign(new Error('the stream closed before its end'), { code: 'ECONNRESET' }));
    });
  });
}
