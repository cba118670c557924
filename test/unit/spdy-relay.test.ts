// The SPDY relay between two real socket pairs on loopback: bytes that came with the upgrades are read
// in step with what follows, and a session the service ends gets its Status between two whole frames
// of the cluster's, never inside one.
import assert from 'node:assert/strict';
import net from 'node:net';
import { describe, test } from 'node:test';
import { randomBytes } from 'node:crypto';
import zlib from 'node:zlib';
import { dataFrame, DICTIONARY, SpdyFrameReader } from '../../src/terminal/spdy-frames.js';
import { SpdyRelay } from '../../src/terminal/spdy-relay.js';
import type { SessionEnd } from '../../src/terminal/terminal-session.js';

/** Two connected sockets on loopback. */
async function socketPair(): Promise<[net.Socket, net.Socket]> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const accepted = new Promise<net.Socket>((resolve) => server.once('connection', resolve));
  const near = net.connect((server.address() as net.AddressInfo).port, '127.0.0.1');
  const far = await accepted;
  server.close();
  return [near, far];
}

/** SYN_STREAMs opening streams 1, 3, 5… with these headers, header blocks in one zlib context as client-go writes them. */
async function synStreams(sets: Array<Array<[string, string]>>): Promise<Buffer> {
  const deflate = zlib.createDeflate({ dictionary: DICTIONARY });
  const out: Buffer[] = [];
  deflate.on('data', (c: Buffer) => out.push(c));
  const frames: Buffer[] = [];
  for (const [i, headers] of sets.entries()) {
    const parts: Buffer[] = [u32(headers.length)];
    for (const [name, value] of headers) {
      parts.push(u32(Buffer.byteLength(name)), Buffer.from(name), u32(Buffer.byteLength(value)), Buffer.from(value));
    }
    deflate.write(Buffer.concat(parts));
    await new Promise<void>((resolve) => deflate.flush(zlib.constants.Z_SYNC_FLUSH, () => resolve()));
    const body = Buffer.concat([Buffer.alloc(10), ...out.splice(0)]);
    body.writeUInt32BE(2 * i + 1, 0);
    const head = Buffer.alloc(8);
    head.writeUInt16BE(0x8003, 0);
    head.writeUInt16BE(1, 2);
    head.writeUInt32BE(body.length, 4);
    frames.push(head, body);
  }
  deflate.close();
  return Buffer.concat(frames);
}

function u32(n: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(n);
  return b;
}

const streamTypes = (...types: string[]) => types.map((t): Array<[string, string]> => [['streamtype', t]]);

function collect(socket: net.Socket): { bytes: () => Buffer; ended: Promise<void> } {
  const chunks: Buffer[] = [];
  socket.on('data', (c: Buffer) => chunks.push(c));
  return { bytes: () => Buffer.concat(chunks), ended: new Promise((resolve) => socket.on('close', () => resolve())) };
}

const until = async (what: string, ok: () => boolean) => {
  for (let i = 0; i < 200 && !ok(); i++) await new Promise((r) => setTimeout(r, 10));
  assert.ok(ok(), what);
};

describe('the SPDY relay', () => {
  test('heads read in step; an ended session gets its Status after whole frames only', async () => {
    const [kubectl, clientSide] = await socketPair();
    const [upstreamSide, kubelet] = await socketPair();
    const toKubelet = collect(kubelet);
    const toKubectl = collect(kubectl);
    const ends: SessionEnd[] = [];
    const opening = await synStreams(streamTypes('error', 'stdout'));
    const stdout = dataFrame(3, Buffer.from('hello from the pod'), false);
    const relay = new SpdyRelay({
      kind: 'exec',
      caller: {} as never,
      secret: '',
      cluster: {} as never,
      access: [],
      client: clientSide,
      // The client's first bytes split between its upgrade request and the connection.
      clientHead: opening.subarray(0, 20),
      upstream: upstreamSide,
      // The cluster's first frame split between its 101 and the connection.
      upstreamHead: stdout.subarray(0, 11),
      protocol: 'v4.channel.k8s.io',
      pingMs: 30_000,
      idleMs: 60_000,
      maxMs: 60_000,
      onEnd: (end) => ends.push(end),
    });
    kubectl.write(opening.subarray(20));
    kubelet.write(stdout.subarray(11));
    await until('the opening frames at the kubelet', () => toKubelet.bytes().equals(opening));
    await until('the stdout frame at kubectl', () => toKubectl.bytes().equals(stdout));

    // Half a frame from the cluster, then the service ends the session.
    const half = dataFrame(3, Buffer.alloc(1000, 0x61), false).subarray(0, 500);
    kubelet.write(half);
    await new Promise((r) => setTimeout(r, 50));
    relay.end(403, 'Forbidden', 'the rule is gone; the stream has ended');
    await toKubectl.ended;

    const { frames, whole } = new SpdyFrameReader().push(toKubectl.bytes());
    assert.equal(whole.length, toKubectl.bytes().length, 'only whole frames reached kubectl');
    assert.deepEqual(
      frames.map((f) => [f.streamId, f.flags]),
      [
        [3, 0],
        [1, 1],
      ],
    );
    const status = JSON.parse(frames[1].body.toString('utf8')) as { status: string; reason: string; message: string };
    assert.deepEqual(
      { status: status.status, reason: status.reason, message: status.message },
      { status: 'Failure', reason: 'Forbidden', message: 'the rule is gone; the stream has ended' },
    );
    assert.equal(ends.length, 1);
    assert.equal(ends[0].reason, 'the rule is gone; the stream has ended');
    kubectl.destroy();
    kubelet.destroy();
  });

  test('a port-forward past the header bound goes on, its later ports unread and the end row saying so', async () => {
    const [kubectl, clientSide] = await socketPair();
    const [upstreamSide, kubelet] = await socketPair();
    const toKubelet = collect(kubelet);
    const ends: Array<{ ports?: number[]; portsTruncated?: boolean }> = [];
    new SpdyRelay({
      kind: 'portforward',
      caller: {} as never,
      secret: '',
      cluster: {} as never,
      access: [],
      client: clientSide,
      clientHead: Buffer.alloc(0),
      upstream: upstreamSide,
      upstreamHead: Buffer.alloc(0),
      protocol: 'portforward.k8s.io',
      pingMs: 30_000,
      idleMs: 60_000,
      maxMs: 60_000,
      onEnd: (end) => ends.push(end),
    });
    // 40 connections' streams with 3,000 random header bytes each: past the 64 KiB of headers read.
    const sets = Array.from({ length: 40 }, (_, i): Array<[string, string]> => [
      ['port', String(8000 + i)],
      ['requestid', randomBytes(2250).toString('base64')],
      ['streamtype', 'data'],
    ]);
    const opening = await synStreams(sets);
    const after = dataFrame(79, Buffer.from('still relayed'), false);
    kubectl.write(Buffer.concat([opening, after]));
    await until('everything at the kubelet', () => toKubelet.bytes().length === opening.length + after.length);
    assert.ok(toKubelet.bytes().subarray(opening.length).equals(after));
    kubectl.destroy();
    await until('the end row', () => ends.length === 1);
    assert.equal(ends[0].portsTruncated, true);
    const ports = ends[0].ports ?? [];
    assert.ok(ports.length > 0 && ports.length < 40, `${ports.length} ports read`);
    assert.deepEqual(
      ports,
      sets.slice(0, ports.length).map((_, i) => 8000 + i),
    );
    kubelet.destroy();
  });
});
