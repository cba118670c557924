import type { Readable } from 'node:stream';

/**
 * Reads a whole stream into one buffer, but at most `limit` bytes: past that the stream is destroyed
 * and `tooLarge(limit)` is thrown, so an answer can never grow the process without bound.
 */
export async function readBounded(
  stream: Readable,
  limit: number,
  tooLarge: (limit: number) => Error,
): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of stream) {
    size += (chunk as Buffer).length;
    if (size > limit) {
      stream.destroy();
      throw tooLarge(limit);
    }
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks);
}
