import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import { PassThrough, Readable, Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { after, before, test } from 'node:test';
import { COALESCE_BYTES, coalesce } from '../../src/common/coalesce.js';

const KIB16 = 16 * 1024;
const turn = () => new Promise((r) => setImmediate(r));

/** A source that gives `perTurn` chunks of 16 KiB in each of `turns` turns of the event loop (as TLS records arrive). */
function recordsSource(turns: number, perTurn: number): PassThrough {
  const source = new PassThrough({ highWaterMark: COALESCE_BYTES * 4 });
  void (async () => {
    for (let t = 0; t < turns; t++) {
      for (let i = 0; i < perTurn; i++) source.write(Buffer.alloc(KIB16, 97 + ((t * perTurn + i) % 26)));
      await turn();
      await turn();
    }
    source.end();
  })();
  return source;
}

/** The body of a chunked HTTP answer read off the socket: the size of each chunk as sent, and the bytes. */
function chunkedSizes(raw: Buffer): { sizes: number[]; body: Buffer } {
  const text = raw.toString('latin1');
  let at = text.indexOf('\r\n\r\n') + 4;
  const sizes: number[] = [];
  const parts: Buffer[] = [];
  for (;;) {
    const lineEnd = text.indexOf('\r\n', at);
    const size = parseInt(text.slice(at, lineEnd), 16);
    if (size === 0) break;
    sizes.push(size);
    parts.push(raw.subarray(lineEnd + 2, lineEnd + 2 + size));
    at = lineEnd + 2 + size + 2;
  }
  return { sizes, body: Buffer.concat(parts) };
}

let server: Server;
let port: number;
let served: () => Readable;
before(async () => {
  server = createServer((_req, res) => void pipeline(served(), res).catch(() => undefined));
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  port = (server.address() as AddressInfo).port;
});
after(() => new Promise<void>((r) => server.close(() => r())));

function fetchRaw(): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () =>
      socket.write('GET / HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n'),
    );
    const got: Buffer[] = [];
    socket.on('data', (d) => got.push(d));
    socket.on('end', () => resolve(Buffer.concat(got)));
    socket.on('error', reject);
  });
}

test('what arrives in one turn reaches the caller as one chunk: 64 records of 16 KiB in 4 turns, 4 chunks', async () => {
  served = () => coalesce(recordsSource(4, 16));
  const { sizes, body } = chunkedSizes(await fetchRaw());
  assert.deepEqual(sizes, [256 * 1024, 256 * 1024, 256 * 1024, 256 * 1024]);
  const expected = Buffer.concat(Array.from({ length: 64 }, (_, i) => Buffer.alloc(KIB16, 97 + (i % 26))));
  assert.ok(body.equals(expected), 'the bytes arrive whole and in order');

  // Piped as they come, each record is a chunk (and a socket write) of its own.
  served = () => recordsSource(4, 16);
  assert.equal(chunkedSizes(await fetchRaw()).sizes.length, 64);
});

test('more than COALESCE_BYTES in one turn is passed on in pieces of that size, not held to the end of the turn', async () => {
  const out = coalesce(recordsSource(1, 40)); // 640 KiB in one turn
  const sizes: number[] = [];
  for await (const chunk of out) sizes.push((chunk as Buffer).length);
  assert.deepEqual(sizes, [COALESCE_BYTES, COALESCE_BYTES, 8 * KIB16]);
});

test('a reader that does not read holds the source: at most a few batches wait in between', async () => {
  let produced = 0;
  const source = new Readable({
    read() {
      produced += KIB16;
      this.push(produced > 64 * 1024 * 1024 ? null : Buffer.alloc(KIB16)); // 64 MiB if nothing held it
    },
  });
  const out = coalesce(source);
  const stalled = new Writable({ highWaterMark: 1, write: () => undefined }); // never calls back
  out.pipe(stalled);
  for (let i = 0; i < 50; i++) await turn();
  assert.ok(produced <= 6 * COALESCE_BYTES, `the source made ${produced} bytes for a reader that takes none`);
  const settled = produced;
  for (let i = 0; i < 50; i++) await turn();
  assert.equal(produced, settled, 'and then stops');
  out.destroy();
});

test('the caller leaving (the result destroyed) destroys the source: nothing keeps reading from the cluster', async () => {
  const source = new PassThrough();
  const out = coalesce(source);
  source.write('abc');
  out.destroy();
  await turn();
  assert.equal(source.destroyed, true);
});

test("the source's error ends the result with that error, after what came before it", async () => {
  const source = new PassThrough();
  const out = coalesce(source);
  const got: Buffer[] = [];
  out.on('data', (d: Buffer) => got.push(d));
  const failed = new Promise<Error>((r) => out.once('error', r));
  source.write('abc');
  await turn();
  source.destroy(Object.assign(new Error('reset'), { code: 'ECONNRESET' }));
  assert.equal(((await failed) as NodeJS.ErrnoException).code, 'ECONNRESET');
  assert.equal(Buffer.concat(got).toString(), 'abc');
});
