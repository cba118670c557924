// The terminal benchmark's load generator (scripts/bench.mjs, BENCH_PARTS=terminal), a process of its own
// so that timing the echoes shares an event loop with nothing else. Forked with an IPC channel; it answers
// each message of its parent with one message:
//
//   { open: { url, headers, ca, sessions } }  → opens that many exec sessions of `sh` (and keeps them)
//   { measure: { shape, rounds, flood } }      → every session echoes a line `rounds` times; `flood` bytes:
//                                                one more session streams output the whole time (again and
//                                                again, `flood` bytes each), until the echoes are done and
//                                                the first `flood` bytes have all arrived
//   'close'                                    → closes the sessions
//
// Shapes: `burst` — every session sends its first line at the same moment and each next one as soon as its
// echo is back (a script driving 100 terminals); `interactive` — rounds of one second, each session sends its
// line at a moment drawn uniformly within the round (people typing, independently), or as soon as its
// previous echo is back if that is later.
import { setTimeout as sleep } from 'node:timers/promises';
import { openTerminal } from '../build/test/support/terminal.js';

const ROUND_MS = 1000;
let target;
let sessions = [];

async function open(o) {
  const opened = await openTerminal(o.url, { headers: o.headers, ca: o.ca, retain: o.retain });
  if (!opened.ok) throw new Error(`exec refused: ${opened.status} ${opened.body}`);
  return opened.client;
}

/** Echoes one line on a session; the round trip in ms (send → the line back on stdout). */
async function echo(session, line) {
  const sent = performance.now();
  session.send(0, `echo ${line}\n`);
  await session.waitFor(`${line}\n`, 1, 30_000);
  return performance.now() - sent;
}

/** One session streaming output without pause: `bytes` at a time, a new command as each completes. */
async function startFlood(bytes, via = target) {
  const session = await open({ ...via, retain: false });
  const flood = { session, bytes: 0, firstMs: undefined, startedAt: performance.now() };
  let asked = bytes;
  session.ws.on('message', (m) => {
    // Channel 1 only; the kubelet's first, empty message says the streams are up.
    if (m.length < 2 || m[0] !== 1) return;
    flood.bytes += m.length - 1;
    if (flood.firstMs === undefined && flood.bytes >= bytes) flood.firstMs = performance.now() - flood.startedAt;
    if (flood.bytes >= asked) {
      asked += bytes;
      session.send(0, `flood ${bytes}\n`);
    }
  });
  session.send(0, `flood ${bytes}\n`);
  return flood;
}

async function measure({ shape, rounds, flood: floodBytes, floodVia }) {
  // A line no earlier one contains, so that an echo is never taken for another's.
  const tag = `${shape[0]}${Date.now().toString(36)}`;
  const flood = floodBytes ? await startFlood(floodBytes, floodVia) : undefined;
  const started = performance.now();
  const latencies = await Promise.all(
    sessions.map(async (session, i) => {
      const own = [];
      for (let r = 0; r < rounds; r++) {
        if (shape === 'interactive') {
          const wait = started + r * ROUND_MS + Math.random() * ROUND_MS - performance.now();
          if (wait > 0) await sleep(wait);
        }
        own.push(await echo(session, `${tag}-s${i}-r${r}`));
      }
      return own;
    }),
  );
  const echoSeconds = (performance.now() - started) / 1000;
  let floodFacts;
  if (flood) {
    while (flood.firstMs === undefined && performance.now() - flood.startedAt < 120_000) await sleep(50);
    floodFacts = {
      firstMs: flood.firstMs,
      bytes: flood.bytes,
      seconds: (performance.now() - flood.startedAt) / 1000,
    };
    flood.session.ws.close();
    await flood.session.closed;
  }
  return { latencies: latencies.flat(), echoSeconds, flood: floodFacts };
}

process.on('message', (message) => {
  void (async () => {
    if (message.open) {
      target = message.open;
      sessions = [];
      for (let i = 0; i < message.open.sessions; i++) sessions.push(await open(target));
      // One untimed echo each: every connection and code path warm before anything is timed.
      await Promise.all(sessions.map((s, i) => echo(s, `warm-${i}`)));
      return { opened: sessions.length };
    }
    if (message.measure) return measure(message.measure);
    if (message === 'close') {
      for (const s of sessions) s.ws.close();
      await Promise.all(sessions.map((s) => s.closed));
      sessions = [];
      return { closed: true };
    }
    throw new Error(`unknown message ${JSON.stringify(message)}`);
  })().then(
    (answer) => process.send(answer),
    (error) => process.send({ error: String(error?.stack ?? error) }),
  );
});
process.on('disconnect', () => process.exit(0));
