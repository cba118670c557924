import assert from 'node:assert/strict';
import { PassThrough } from 'node:stream';
import { test } from 'node:test';
import { readBounded } from '../../src/common/read-bounded.js';

const tooLarge = (limit: number) => new Error(`larger than ${limit}`);

test('a stream that ends is read whole, though it closes after its end', async () => {
  const stream = new PassThrough();
  const closed = new Promise((r) => stream.once('close', r));
  const read = readBounded(stream, 100, tooLarge);
  stream.write('abc');
  stream.end('def');
  await closed;
  assert.equal((await read).toString(), 'abcdef');
});

test('a stream closed before its end is an ECONNRESET, not a short answer', async () => {
  const stream = new PassThrough();
  const read = readBounded(stream, 100, tooLarge);
  stream.write('abc');
  setImmediate(() => stream.destroy());
  await assert.rejects(read, (error: NodeJS.ErrnoException) => {
    assert.equal(error.code, 'ECONNRESET');
    assert.match(error.message, /closed before its end/);
    return true;
  });
});

test('past the limit the stream is destroyed and tooLarge(limit) is the error', async () => {
  const stream = new PassThrough();
  const read = readBounded(stream, 5, tooLarge);
  stream.write('abc');
  stream.write('def');
  await assert.rejects(read, /larger than 5/);
  assert.equal(stream.destroyed, true);
});

test('an error of the stream is the error', async () => {
  const stream = new PassThrough();
  const read = readBounded(stream, 100, tooLarge);
  stream.destroy(new Error('socket hang up'));
  await assert.rejects(read, /socket hang up/);
});
