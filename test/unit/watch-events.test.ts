import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ConfigError, loadConfig } from '../../src/config/config.js';
import { watchQueryProblems } from '../../src/resources/dto/resource-query.dto.js';
import { expiredStatus, LineSplitter, revision, WatchEvent } from '../../src/k8s/watch-events.js';

const line = (value: unknown) => Buffer.from(JSON.stringify(value) + '\n');

describe('watch event lines', () => {
  test('split across chunks in any place, empty lines skipped, each line kept byte for byte', () => {
    const text =
      '{"type":"ADDED","object":{"metadata":{"resourceVersion":"5"}}}\n\n{"type":"DELETED","object":{"metadata":{"resourceVersion":"7"}}}\n';
    for (let cut = 1; cut < text.length; cut++) {
      const splitter = new LineSplitter();
      const lines = [...splitter.push(Buffer.from(text.slice(0, cut))), ...splitter.push(Buffer.from(text.slice(cut)))];
      assert.deepEqual(
        lines.map((l) => l.toString()),
        text
          .split('\n')
          .filter(Boolean)
          .map((l) => `${l}\n`),
        `cut at ${cut}`,
      );
    }
  });

  test('a line longer than the bound is refused, whether it arrives whole or in pieces', () => {
    assert.throws(() => new LineSplitter(10).push(Buffer.from('x'.repeat(11) + '\n')), /larger than 10 bytes/);
    const splitter = new LineSplitter(10);
    splitter.push(Buffer.from('x'.repeat(6)));
    assert.throws(() => splitter.push(Buffer.from('x'.repeat(6))), /larger than 10 bytes/);
  });

  test('parse: type and resourceVersion; ERROR keeps its Status; anything else is refused', () => {
    const added = WatchEvent.parse(line({ type: 'ADDED', object: { metadata: { resourceVersion: '42' } } }));
    assert.equal(added.type, 'ADDED');
    assert.equal(added.resourceVersion, '42');
    const error = WatchEvent.parse(line({ type: 'ERROR', object: expiredStatus('3', '9') }));
    assert.deepEqual(error.status, { code: 410, reason: 'Expired', message: 'too old resource version: 3 (9)' });
    assert.throws(() => WatchEvent.parse(line({ type: 'SOMETHING', object: {} })), /not a watch event/);
    assert.throws(() => WatchEvent.parse(line({ type: 'ADDED' })), /without an object/);
    assert.throws(() => WatchEvent.parse(line({ type: 'ADDED', object: { metadata: {} } })), /resourceVersion/);
    assert.throws(() => WatchEvent.parse(Buffer.from('{"type":\n')));
  });

  test('SSE frames: event name, id (not for ERROR, not for initial objects), data is the JSON line', () => {
    const event = WatchEvent.parse(line({ type: 'MODIFIED', object: { metadata: { resourceVersion: '8' } } }));
    assert.equal(
      event.sse().toString(),
      'event: MODIFIED\nid: 8\ndata: {"type":"MODIFIED","object":{"metadata":{"resourceVersion":"8"}}}\n\n',
    );
    assert.equal(event.sse(false).toString().includes('id:'), false);
    const error = WatchEvent.of('ERROR', expiredStatus('1', '2'));
    assert.match(error.sse().toString(), /^event: ERROR\ndata: \{"type":"ERROR","object":\{"kind":"Status".*\n\n$/);
  });

  test('revisions compare as integers; anything else is not comparable', () => {
    assert.equal(revision('10')! > revision('9')!, true);
    assert.equal(revision('abc'), null);
    assert.equal(revision(undefined), null);
    assert.equal(revision('1'.repeat(21)), null);
  });
});

describe('watch query and configuration', () => {
  test('list-only parameters with watch=true, and watch-only ones without it, are named', () => {
    assert.deepEqual(watchQueryProblems({ watch: true, limit: 5, continue: 'x', resourceVersionMatch: 'Exact' }), [
      'limit cannot be used with watch=true',
      'continue cannot be used with watch=true',
      'resourceVersionMatch cannot be used with watch=true',
    ]);
    assert.deepEqual(watchQueryProblems({ allowWatchBookmarks: true }), ['allowWatchBookmarks needs watch=true']);
    assert.deepEqual(watchQueryProblems({ watch: true, allowWatchBookmarks: true, resourceVersion: '5' }), []);
  });

  test('stream limits and timers: defaults, bounds, a bad value names the variable', () => {
    const { watch } = loadConfig({});
    assert.deepEqual(watch, {
      maxStreams: 2000,
      maxStreamsPerCaller: 50,
      memoryBytes: 16 * 1024 * 1024,
      maxLogStreams: 1000,
      maxLogStreamsPerUser: 20,
      subscriberBufferBytes: 4 * 1024 * 1024,
      windowEvents: 1000,
      lingerMs: 5000,
      reauthMs: 4000,
      heartbeatMs: 15000,
      upstreamTimeoutSeconds: 240,
    });
    assert.equal(
      loadConfig({ CAS_WATCH_MAX_STREAMS: '10', CAS_WATCH_MAX_STREAMS_PER_CALLER: '50' }).watch.maxStreamsPerCaller,
      10,
    );
    assert.throws(
      () => loadConfig({ CAS_WATCH_REAUTH_SECONDS: '6' }),
      (e) => e instanceof ConfigError && /CAS_WATCH_REAUTH_SECONDS/.test(e.message),
    );
    assert.throws(() => loadConfig({ CAS_WATCH_MAX_STREAMS: 'many' }), /CAS_WATCH_MAX_STREAMS must be an integer/);
  });
});
