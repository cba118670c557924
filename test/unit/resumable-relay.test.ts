// A resumable terminal session between real WebSocket pairs on loopback: the console's socket cut
// (no close frame) again and again while the "kubelet" side prints a counter, each new socket attached
// with the offset the console counted. The output is exactly the counter, with no gap and no duplicate.
// (End to end through the apiserver: test/e2e/terminal-resume.test.ts.)
import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { WebSocket, WebSocketServer } from 'ws';
import type { Caller } from '../../src/access/caller.js';
import type { AppConfig } from '../../src/config/config.js';
import type { Replicas } from '../../src/database/replicas.js';
import { ResumableSessions } from '../../src/terminal/resumable-sessions.js';
import type { TerminalTarget } from '../../src/terminal/terminal-request.js';
import { type SessionEnd, TerminalSession } from '../../src/terminal/terminal-session.js';

const PROTOCOL = 'v4.channel.k8s.io';

/** Every socket a test made: cut after each test, so that a failing one ends instead of hanging. */
const sockets = new Set<WebSocket>();

/** A connected pair: the test's end (`far`) and the service's end (`near`). */
async function wsPair(): Promise<{ far: WebSocket; near: WebSocket }> {
  const server = new WebSocketServer({ port: 0, host: '127.0.0.1', handleProtocols: () => PROTOCOL });
  await new Promise<void>((resolve) => server.once('listening', resolve));
  const accepted = new Promise<WebSocket>((resolve) => server.once('connection', resolve));
  const far = new WebSocket(`ws://127.0.0.1:${(server.address() as AddressInfo).port}`, [PROTOCOL]);
  await new Promise((resolve) => far.once('open', resolve));
  const near = await accepted;
  server.close();
  sockets.add(far).add(near);
  return { far, near };
}

const caller = (userId: number): Caller => ({
  kind: 'user',
  id: userId,
  name: `u${userId}`,
  roles: ['admin'],
  isAdmin: true,
  rules: [],
  userId,
  userName: `u${userId}`,
  keyExpiresAt: null,
  sessionId: null,
});

const target: TerminalTarget = {
  kind: 'exec',
  path: 'rest',
  cluster: 'a',
  namespace: 'n',
  pod: 'p',
  query: new URLSearchParams('command=count&stdout=true'),
  facts: {},
};

/** The console: counts output bytes (channels 1 and 2) into `screen` across its sockets. */
function watch(ws: WebSocket, screen: { bytes: number; out: string; hello?: string; status: string }) {
  ws.on('message', (raw: Buffer, isBinary: boolean) => {
    if (!isBinary) return void (screen.hello = raw.toString());
    if (raw[0] === 1 || raw[0] === 2) {
      screen.bytes += raw.length - 1;
      screen.out += `${raw[0]}${raw.subarray(1).toString()}`.replace(/^(\d)/, (c) => (c === '1' ? '' : '!'));
    } else if (raw[0] === 3) screen.status += raw.subarray(1).toString();
  });
  return new Promise<number>((resolve) => ws.on('close', (code) => resolve(code)));
}

/** A session held by the registry, as TerminalService.start builds it. */
async function resumable(resumeMs: number, resumeBytes = 1024 * 1024) {
  const registry = new ResumableSessions(
    { exec: { resumeMs, resumeBytes, maxSessions: 10 } } as AppConfig,
    {
      id: 'replica1',
    } as Replicas,
  );
  const client = await wsPair();
  const upstream = await wsPair();
  const ends: SessionEnd[] = [];
  const facts: Array<Record<string, unknown>> = [];
  const screen = { bytes: 0, out: '', status: '' } as { bytes: number; out: string; hello?: string; status: string };
  const firstClosed = watch(client.far, screen);
  const kept = registry.keep(client.near, { caller: caller(1), target, protocol: PROTOCOL, upstream: upstream.near });
  const session = new TerminalSession({
    kind: 'exec',
    caller: caller(1),
    secret: 's',
    cluster: {} as never,
    access: [],
    client: client.near,
    upstream: upstream.near,
    protocol: PROTOCOL,
    pingMs: 60_000,
    idleMs: 60_000,
    maxMs: 60_000,
    keeper: kept.keeper,
    onEnd: (end) => {
      ends.push(end);
      facts.push(kept.ended(end));
    },
  });
  kept.bind(session);
  await until('the session message', () => screen.hello !== undefined);
  const id = (JSON.parse(screen.hello!) as { session: string }).session;
  /** A new console socket, attached as TerminalService does after `check`. */
  const resume = async (offset = screen.bytes, who = 1) => {
    registry.check({ id, offset }, caller(who), target, [PROTOCOL]);
    const pair = await wsPair();
    const closed = watch(pair.far, screen);
    registry.attach({ id, offset }, pair.near, caller(who), 's');
    return { far: pair.far, closed };
  };
  return { registry, id, screen, kubelet: upstream.far, console: client.far, firstClosed, resume, ends, facts };
}

async function until(what: string, ok: () => boolean, ms = 5000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!ok()) {
    if (Date.now() > deadline) assert.fail(`timed out waiting for ${what}`);
    await sleep(5);
  }
}

const lines = (from: number, to: number, stderrEvery = 0) =>
  Array.from({ length: to - from + 1 }, (_, i) => {
    const n = from + i;
    return `${stderrEvery && n % stderrEvery === 0 ? '!' : ''}${n}\n`;
  }).join('');

describe('a resumable session between real sockets', () => {
  afterEach(() => {
    for (const ws of sockets) ws.terminate();
    sockets.clear();
  });

  test('cut 20 times while a counter prints: every line exactly once, in order, stdout and stderr', async () => {
    const s = await resumable(5000);
    let printed = 0;
    let done = false;
    const printer = (async () => {
      while (!done && s.kubelet.readyState === WebSocket.OPEN) {
        for (let i = 0; i < 5; i++) {
          printed++;
          s.kubelet.send(Buffer.concat([Buffer.from([printed % 3 === 0 ? 2 : 1]), Buffer.from(`${printed}\n`)]));
        }
        await sleep(1);
      }
      s.kubelet.send(Buffer.concat([Buffer.from([3]), Buffer.from('{"status":"Success"}')]));
      s.kubelet.close(1000);
    })();
    let console = s.console;
    for (let cut = 0; cut < 20; cut++) {
      const seen = s.screen.bytes;
      await until('more output', () => s.screen.bytes > seen, 5000);
      console.terminate(); // no close frame
      await sleep(cut % 3); // sometimes output arrives while no client is there
      console = (await s.resume()).far;
    }
    done = true;
    await printer;
    const code = await new Promise<number>((resolve) => console.on('close', resolve));
    assert.equal(code, 1000);
    assert.equal(s.screen.out, lines(1, printed, 3));
    assert.equal(s.screen.status, '{"status":"Success"}');
    assert.equal(s.ends.length, 1);
    assert.equal(s.ends[0].reason, 'the command ended');
    assert.deepEqual(s.facts[0], { resumable: true, resumed: 20 });
  });

  test('the window ends: the cluster side is closed and the id answers 410 naming the window', async () => {
    const s = await resumable(300);
    const kubeletClosed = new Promise((resolve) => s.kubelet.on('close', resolve));
    s.kubelet.send(Buffer.from('\x01hello\n'));
    await until('the output', () => s.screen.bytes === 6);
    s.console.terminate();
    await kubeletClosed;
    assert.match(s.ends[0].reason, /did not resume it within 0.3 s \(CAS_SESSION_RESUME_SECONDS\)/);
    assert.deepEqual(s.facts[0], { resumable: true, resumed: 0, expired: true });
    assert.throws(
      () => s.registry.check({ id: s.id, offset: 6 }, caller(1), target, [PROTOCOL]),
      (e: { getStatus(): number; message: string }) => e.getStatus() === 410 && /did not resume it/.test(e.message),
    );
    assert.throws(
      () => s.registry.check({ id: s.id, offset: 6 }, caller(2), target, [PROTOCOL]),
      (e: { getStatus(): number }) => e.getStatus() === 403,
      'an ended session is still not another user’s to ask about',
    );
  });

  test('a command that ends while the client is away: the rest of its output, its status and a normal close', async () => {
    const s = await resumable(5000);
    s.kubelet.send(Buffer.from('\x01one\n'));
    await until('the first line', () => s.screen.bytes === 4);
    s.console.terminate();
    await s.firstClosed;
    s.kubelet.send(Buffer.from('\x01two\n'));
    s.kubelet.send(Buffer.from('\x03{"status":"Success"}'));
    s.kubelet.close(1000);
    await until('the end', () => s.ends.length === 1);
    const back = await s.resume();
    assert.equal(await back.closed, 1000);
    assert.equal(s.screen.out, 'one\ntwo\n');
    assert.equal(s.screen.status, '{"status":"Success"}');
  });

  test('another user, another route, an offset past the output or too old', async () => {
    const s = await resumable(5000, 4096);
    s.kubelet.send(Buffer.concat([Buffer.from([1]), Buffer.alloc(10_000, 'x')]));
    await until('the output', () => s.screen.bytes === 10_000);
    const status = (fn: () => unknown) => {
      try {
        fn();
        return 0;
      } catch (e) {
        return (e as { getStatus(): number }).getStatus();
      }
    };
    assert.equal(
      status(() => s.registry.check({ id: s.id, offset: 10_000 }, caller(2), target, [PROTOCOL])),
      403,
    );
    const other = { ...target, query: new URLSearchParams('command=sh') };
    assert.equal(
      status(() => s.registry.check({ id: s.id, offset: 10_000 }, caller(1), other, [PROTOCOL])),
      400,
    );
    assert.equal(
      status(() => s.registry.check({ id: s.id, offset: 10_001 }, caller(1), target, [PROTOCOL])),
      400,
    );
    assert.equal(
      status(() => s.registry.check({ id: s.id, offset: 100 }, caller(1), target, [PROTOCOL])),
      410,
    );
    assert.equal(
      status(() => s.registry.check({ id: s.id, offset: 7000 }, caller(1), target, [PROTOCOL])),
      0,
    );
    s.console.close(1000);
    await until('the end', () => s.ends.length === 1);
    assert.equal(s.ends[0].reason, 'the client closed the session');
  });
});
