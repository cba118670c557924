// The SPDY relay between two real socket pairs on loopback: bytes that came with the upgrades are read
// in step with what follows, and a session the service ends gets its Status between two whole frames
// of the cluster's, never inside one.
import assert from 'node:assert/strict';
import net from 'node:net';
import { describe, test } from 'node:test';
import { randomBytes } from 'node:crypto';
import { dataFrame, FLAG_FIN, SpdyFrameReader } from '../../src/terminal/spdy-frames.js';
import { SpdyRelay, type SpdyRelayOptions } from '../../src/terminal/spdy-relay.js';
import type { SessionEnd } from '../../src/terminal/terminal-session.js';
import { loopHeld, within } from '../support/timing.js';
import * as spdyClient from '../support/spdy-client.js';
import type { Headers } from '../support/spdy-client.js';

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
async function synStreams(sets: Headers[]): Promise<Buffer> {
  return Buffer.concat(await spdyClient.synStreams(sets));
}

const streamTypes = (...types: string[]) => types.map((t): Headers => [['streamtype', t]]);

function collect(socket: net.Socket): { bytes: () => Buffer; ended: Promise<void> } {
  const chunks: Buffer[] = [];
  socket.on('data', (c: Buffer) => chunks.push(c));
  return { bytes: () => Buffer.concat(chunks), ended: new Promise((resolve) => socket.on('close', () => resolve())) };
}

const until = async (what: string, ok: () => boolean) => {
  for (let i = 0; i < 200 && !ok(); i++) await new Promise((r) => setTimeout(r, 10));
  assert.ok(ok(), what);
};

/** A relay between two socket pairs: `kubectl` and `kubelet` are the far ends the test writes and reads. */
async function relayed(
  kind: SpdyRelayOptions['kind'],
  options: Partial<SpdyRelayOptions> = {},
): Promise<{ relay: SpdyRelay; kubectl: net.Socket; kubelet: net.Socket; ends: SessionEnd[] }> {
  const [kubectl, clientSide] = await socketPair();
  const [upstreamSide, kubelet] = await socketPair();
  const ends: SessionEnd[] = [];
  const relay = new SpdyRelay({
    kind,
    caller: {} as never,
    secret: '',
    cluster: {} as never,
    access: [],
    client: clientSide,
    clientHead: Buffer.alloc(0),
    upstream: upstreamSide,
    upstreamHead: Buffer.alloc(0),
    protocol: kind === 'portforward' ? 'portforward.k8s.io' : 'v4.channel.k8s.io',
    pingMs: 30_000,
    idleMs: 60_000,
    maxMs: 60_000,
    onEnd: (end) => ends.push(end),
    ...options,
  });
  return { relay, kubectl, kubelet, ends };
}

describe('the SPDY relay', () => {
  test('heads read in step; an ended session gets its Status after whole frames only', async () => {
    const opening = await synStreams(streamTypes('error', 'stdout'));
    const stdout = dataFrame(3, Buffer.from('hello from the pod'), false);
    const { relay, kubectl, kubelet, ends } = await relayed('exec', {
      // The client's first bytes split between its upgrade request and the connection.
      clientHead: opening.subarray(0, 20),
      // The cluster's first frame split between its 101 and the connection.
      upstreamHead: stdout.subarray(0, 11),
    });
    const toKubelet = collect(kubelet);
    const toKubectl = collect(kubectl);
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
    const { kubectl, kubelet, ends } = await relayed('portforward');
    const toKubelet = collect(kubelet);
    // 40 connections' streams with 3,000 random header bytes each: past the 64 KiB of headers read.
    const sets = Array.from({ length: 40 }, (_, i): Headers => [
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
    const end = ends[0] as SessionEnd & { ports?: number[]; portsTruncated?: boolean };
    assert.equal(end.portsTruncated, true);
    const ports = end.ports ?? [];
    assert.ok(ports.length > 0 && ports.length < 40, `${ports.length} ports read`);
    assert.deepEqual(
      ports,
      sets.slice(0, ports.length).map((_, i) => 8000 + i),
    );
    kubelet.destroy();
  });

  test('one 16 MiB header block and 400 tiny ones: the session ends with a Status naming the bound, the loop never held', async () => {
    const { kubectl, kubelet, ends } = await relayed('exec');
    const toKubelet = collect(kubelet);
    const toKubectl = collect(kubectl);
    const compressor = new spdyClient.HeaderCompressor();
    const opening = await compressor.synStreams(streamTypes('error', 'stdin'));
    const attack = await compressor.synStreams(
      [
        [
          ['streamtype', 'stdout'],
          ['x', 'a'.repeat(16 * 1024 * 1024)],
        ],
        ...Array.from({ length: 400 }, (_, i): Headers => [['streamtype', `s${i}`]]),
      ],
      5,
    );
    compressor.close();
    const wire = Buffer.concat([...opening, ...attack]);
    assert.ok(wire.length < 64 * 1024, `${wire.length} bytes on the wire`);

    const { heldMs } = await loopHeld(async () => {
      kubectl.write(wire);
      await within('the session to end', 20_000, toKubectl.ended);
    });
    assert.ok(heldMs < 100, `the event loop was held for ${heldMs.toFixed(1)} ms`);
    const message = 'a SPDY header block inflates past 16 KiB: the session has ended';
    const { frames } = new SpdyFrameReader().push(toKubectl.bytes());
    assert.deepEqual(
      frames.map((f) => [f.streamId, f.flags]),
      [[1, FLAG_FIN]],
      'the Status on the error stream, and nothing else',
    );
    const status = JSON.parse(frames[0].body.toString('utf8')) as { reason: string; message: string; code: number };
    assert.deepEqual(
      { reason: status.reason, message: status.message, code: status.code },
      { reason: 'BadRequest', message, code: 400 },
    );
    assert.equal(ends.length, 1);
    assert.equal(ends[0].reason, message);
    // The kubelet got the streams opened before the block, and nothing of it or after it.
    await within('the kubelet side to close', 5000, toKubelet.ended);
    assert.ok(
      toKubelet.bytes().equals(Buffer.concat(opening)),
      `${toKubelet.bytes().length} bytes reached the kubelet`,
    );
  });
});
