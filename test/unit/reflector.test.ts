import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { Reflector, ReflectorRefusal, type ReflectorConsumer } from '../../src/watch/reflector.js';
import type { WatchEvent } from '../../src/k8s/watch-events.js';
import { FakeCollection, fakeClusterClient } from '../support/fake-cluster.js';

/** A consumer that keeps what it was told, as `namespace/name` → resourceVersion. */
class Recorder implements ReflectorConsumer {
  readonly state = new Map<string, string>();
  readonly seen: string[] = [];
  replacedAt: string[] = [];
  relists = 0;
  endedWith?: unknown;
  ended_ = false;

  constructor(readonly snapshot: 'objects' | 'none' = 'objects') {}

  replaced(items: Array<Record<string, any>>, resourceVersion: string, relisted: boolean): void {
    this.state.clear();
    for (const item of items)
      this.state.set(`${item.metadata.namespace}/${item.metadata.name}`, item.metadata.resourceVersion);
    this.replacedAt.push(resourceVersion);
    if (relisted) this.relists++;
  }

  changed(event: WatchEvent, object: Record<string, any>): void {
    if (event.type === 'BOOKMARK') return;
    this.seen.push(`${event.type} ${event.key} ${event.resourceVersion}`);
    const key = `${object.metadata.namespace}/${object.metadata.name}`;
    if (event.type === 'DELETED') this.state.delete(key);
    else this.state.set(key, event.resourceVersion);
  }

  stopped(failure?: unknown): void {
    this.ended_ = true;
    this.endedWith = failure;
  }
}

async function until(what: string, ok: () => boolean, ms = 2000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!ok()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(5);
  }
}

function setup() {
  const collection = new FakeCollection();
  const ended: Reflector[] = [];
  const reflector = new Reflector('k', {
    cluster: fakeClusterClient(collection),
    path: '/api/v1/configmaps',
    upstreamTimeoutSeconds: 300,
    windowEvents: 1000,
    budget: { used: 0, limit: 16 * 1024 * 1024 },
    onEnd: (r) => ended.push(r),
  });
  return { collection, reflector, ended };
}

/** The collection's state now, as a recorder keeps it. */
function truth(collection: FakeCollection): Map<string, string> {
  const state = new Map<string, string>();
  for (const change of collection.log) {
    const key = `${change.object.metadata.namespace}/${change.object.metadata.name}`;
    if (change.type === 'DELETED') state.delete(key);
    else state.set(key, String(change.rv));
  }
  return state;
}

describe('reflector: one list-and-watch loop per collection', () => {
  test('the first consumer gets the list, then every change in order; one list and one watch on the cluster', async () => {
    const { collection, reflector } = setup();
    for (let i = 0; i < 600; i++) collection.write('ADDED', 'a', `cm${i}`); // more than one page
    const consumer = new Recorder();
    await reflector.attach(consumer);
    assert.equal(consumer.state.size, 600);
    collection.write('MODIFIED', 'a', 'cm1');
    collection.write('DELETED', 'a', 'cm2');
    await until('the changes', () => consumer.seen.length === 2);
    assert.deepEqual(consumer.state, truth(collection));
    assert.equal(collection.calls.filter((c) => c.startsWith('watch')).length, 1);
    assert.equal(reflector.resourceVersion, collection.resourceVersion);
    assert.ok(reflector.live);
  });

  test('a consumer attaching to a running loop gets a snapshot at its position: no gap, no duplicate, no relist for the others', async () => {
    const { collection, reflector } = setup();
    for (let i = 0; i < 300; i++) collection.write('ADDED', 'a', `cm${i}`);
    const first = new Recorder();
    await reflector.attach(first);
    const writing = (async () => {
      for (let i = 0; i < 200; i++) {
        collection.write('MODIFIED', 'a', `cm${i % 300}`);
        if (i % 20 === 0) await sleep(1);
      }
    })();
    const second = new Recorder('objects');
    await reflector.attach(second);
    await writing;
    await until('both to catch up', () => reflector.resourceVersion === collection.resourceVersion);
    await sleep(20);
    assert.deepEqual(second.state, truth(collection));
    assert.deepEqual(first.state, truth(collection));
    assert.equal(first.relists, 0);
    assert.equal(first.replacedAt.length, 1, 'the first consumer saw one list only');
    assert.equal(collection.calls.filter((c) => c.startsWith('watch')).length, 1, 'still one watch');
    assert.ok(
      collection.calls.some((c) => c.includes('resourceVersionMatch=Exact')),
      'the snapshot was listed exactly at the loop position',
    );
  });

  test('the cluster ending the watch (its time-out) resumes from the last version: nothing listed again, nothing missed', async () => {
    const { collection, reflector } = setup();
    collection.write('ADDED', 'a', 'x');
    const consumer = new Recorder();
    await reflector.attach(consumer);
    collection.endWatches();
    collection.write('ADDED', 'a', 'y');
    await until('the resumed watch', () => consumer.state.has('a/y'));
    assert.equal(collection.calls.filter((c) => c.startsWith('list')).length, 1);
    assert.equal(collection.calls.filter((c) => c.startsWith('watch')).length, 2);
    assert.deepEqual(consumer.state, truth(collection));
  });

  test('410 on the watch: every consumer gets a new list (relisted), then the changes after it', async () => {
    const { collection, reflector } = setup();
    collection.write('ADDED', 'a', 'x');
    const consumer = new Recorder();
    await reflector.attach(consumer);
    collection.write('DELETED', 'a', 'x');
    collection.write('ADDED', 'a', 'z');
    collection.floor = Number(collection.resourceVersion);
    collection.expireWatches();
    await until('the relist', () => consumer.relists === 1);
    collection.write('ADDED', 'a', 'w');
    await until('the change after it', () => consumer.state.has('a/w'));
    assert.deepEqual(consumer.state, truth(collection));
  });

  test('a broken connection resumes from the last version with back-off: nothing listed again, nothing missed', async () => {
    const { collection, reflector } = setup();
    const consumer = new Recorder();
    await reflector.attach(consumer);
    collection.breakWatches();
    collection.write('ADDED', 'a', 'while-broken');
    await until('the resumed watch', () => consumer.state.has('a/while-broken'), 5000);
    assert.deepEqual(consumer.state, truth(collection));
    assert.equal(consumer.relists, 0);
    assert.equal(collection.calls.filter((c) => c.startsWith('list')).length, 1);
  });

  test('a first consumer with a version lists exactly there; one the cluster no longer has lists the latest', async () => {
    const { collection, reflector } = setup();
    collection.write('ADDED', 'a', 'old');
    const at = collection.write('ADDED', 'a', 'kept');
    collection.write('DELETED', 'a', 'old');
    const consumer = new Recorder();
    await reflector.attach(consumer, at);
    assert.equal(consumer.replacedAt[0], at);
    await until('the delete after it', () => !consumer.state.has('a/old'));

    const other = setup();
    for (const name of ['x', 'y', 'z']) other.collection.write('ADDED', 'a', name);
    other.collection.floor = Number(other.collection.resourceVersion);
    const late = new Recorder();
    await other.reflector.attach(late, '101');
    assert.equal(late.replacedAt[0], other.collection.resourceVersion);
  });

  test('the window: recent events stamped with the labels each object had before; bounded, its floor moving on', async () => {
    const collection = new FakeCollection();
    const reflector = new Reflector('k', {
      cluster: fakeClusterClient(collection),
      path: '/api/v1/configmaps',
      upstreamTimeoutSeconds: 300,
      windowEvents: 3,
      budget: { used: 0, limit: 16 * 1024 * 1024 },
      onEnd: () => undefined,
    });
    collection.write('ADDED', 'a', 'x', { metadata: { labels: { tier: 'web' } } });
    const listedAt = collection.resourceVersion;
    const watcher = new Recorder('none');
    await reflector.attach(watcher);
    assert.equal(String(reflector.floor), listedAt);
    collection.write('MODIFIED', 'a', 'x', { metadata: { labels: { tier: 'db' } } });
    collection.write('ADDED', 'a', 'y');
    await until('two events', () => reflector.window.length === 2);
    assert.deepEqual(reflector.window[0].previousLabels, { tier: 'web' }, 'x matched tier=web before');
    assert.deepEqual(reflector.window[0].labels, { tier: 'db' });
    assert.equal(reflector.window[1].previousLabels, null);
    for (const name of ['p', 'q']) collection.write('ADDED', 'a', name);
    await until('the window to hold its bound', () => reflector.resourceVersion === collection.resourceVersion);
    assert.equal(reflector.window.length, 3);
    assert.equal(
      String(reflector.floor),
      reflector.window[0].resourceVersion === String(Number(listedAt) + 2)
        ? String(Number(listedAt) + 1)
        : 'unexpected',
    );
    // A consumer that needs no objects joins a running loop without a list of its own.
    const lists = collection.calls.filter((c) => c.startsWith('list')).length;
    await reflector.attach(new Recorder('none'));
    assert.equal(collection.calls.filter((c) => c.startsWith('list')).length, lists);
  });

  test('the last consumer leaving ends the loop and its watch; a refused first list rejects and ends it', async () => {
    const { collection, reflector, ended } = setup();
    const consumer = new Recorder();
    await reflector.attach(consumer);
    assert.equal(collection.watches.size, 1);
    reflector.detach(consumer);
    assert.equal(ended.length, 1);
    await until('the watch to close', () => collection.watches.size === 0);

    const refused = setup();
    refused.collection.refuseWith = 403;
    await assert.rejects(refused.reflector.attach(new Recorder()), (error: unknown) => {
      assert.ok(error instanceof ReflectorRefusal);
      assert.equal(error.refusal.statusCode, 403);
      return true;
    });
    assert.equal(refused.ended.length, 1);
    assert.ok(refused.reflector.ended);
  });
});
