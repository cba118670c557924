import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { test } from 'node:test';
import { pino } from 'pino';
import { createAccessLog, lazyChildLogger } from '../../src/common/logger.js';

function capture() {
  const lines: Array<Record<string, unknown>> = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      lines.push(JSON.parse(chunk.toString()));
      done();
    },
  });
  const parent = pino({ level: 'info' }, sink);
  let children = 0;
  const child = parent.child;
  // Children inherit this method: counted are the children made of the parent, not of them.
  parent.child = function (this: pino.Logger, ...args: Parameters<typeof child>) {
    if (this === parent) children++;
    return child.apply(this, args);
  } as typeof parent.child;
  const make = (reqId: string) =>
    lazyChildLogger.call(undefined as never, parent, { reqId }, {}, undefined as never) as unknown as pino.Logger;
  return { lines, make, children: () => children };
}

test("a request's logger writes what pino's child would, and is made only when something is written", async () => {
  const { lines, make, children } = capture();
  const quiet = make('req-1');
  const loud = make('req-2');
  quiet.debug('below the level'); // nothing written, nothing made
  assert.equal(children(), 0);
  assert.equal(quiet.level, 'info');
  assert.equal(quiet.isLevelEnabled('debug'), false);

  loud.error({ statusCode: 500 }, 'request errored');
  loud.info('second line');
  await new Promise((r) => setImmediate(r));
  assert.equal(children(), 1, 'one child for the request that logged, made once');
  assert.deepEqual(
    lines.map(({ reqId, msg, statusCode, level }) => ({ reqId, msg, statusCode, level })),
    [
      { reqId: 'req-2', msg: 'request errored', statusCode: 500, level: 50 },
      { reqId: 'req-2', msg: 'second line', statusCode: undefined, level: 30 },
    ],
  );

  const nested = loud.child({ part: 'audit' });
  nested.warn('nested');
  await new Promise((r) => setImmediate(r));
  assert.deepEqual([lines[2].reqId, lines[2].part, lines[2].msg], ['req-2', 'audit', 'nested']);
});

test("the access line is pino's line for the same fields, and is left out below info", async () => {
  const written: string[] = [];
  const access = createAccessLog('debug', { write: (line: string) => written.push(line) });
  assert.ok(access);
  const line = { reqId: 'req-"7"', method: 'GET', path: '/api/v1/configmaps/a\\b/"c"', statusCode: 200, ms: 3 };
  access(line);
  assert.equal(written.length, 1);
  assert.ok(written[0].endsWith('}\n'));

  const viaPino: string[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      viaPino.push(chunk.toString());
      done();
    },
  });
  pino({ level: 'debug' }, sink).info(line, 'request');
  await new Promise((r) => setImmediate(r));
  const withoutTime = (text: string) => ({ ...(JSON.parse(text) as Record<string, unknown>), time: 0 });
  assert.deepEqual(withoutTime(written[0]), withoutTime(viaPino[0]));
  assert.deepEqual(Object.keys(JSON.parse(written[0]) as object), Object.keys(JSON.parse(viaPino[0]) as object));

  for (const level of ['warn', 'error', 'silent'] as const) assert.equal(createAccessLog(level), null, level);
});
