/**
 * What a console needs of a paged query beyond the page: items without `managedFields` unless asked
 * for, and a paged watch tied to the page it follows (`resourceVersion`, SSE `Last-Event-ID`, `id:` on
 * every frame), so that a change made between fetching a page and opening its watch is never lost.
 * Against the shared real control plane.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { kubeRequest, waitFor } from '../harness/control-plane.js';
import {
  baseOf,
  configmaps,
  openNotices,
  page,
  startWorld,
  stopWorld,
  type Notices,
  type World,
} from '../support/list-world.js';

describe('paged queries for consoles', () => {
  let w: World;
  let base: string;
  before(async () => {
    w = await startWorld({ tag: 'console', namespaces: 1 });
    base = await baseOf(w);
  });
  after(() => stopWorld(w));

  test('items leave out metadata.managedFields unless showManagedFields=true; otherwise they are the cluster’s objects', async () => {
    const [N] = w.namespaces;
    await configmaps(w, N, 'mf', 3);
    await sleep(1_100); // a page holds what the cluster changed more than a second before it
    const cluster = await kubeRequest(w.cp, 'GET', `/api/v1/namespaces/${N}/configmaps?labelSelector=${w.label}`);
    const want = (cluster.body.items as any[]).map((o) => ({ apiVersion: 'v1', kind: 'ConfigMap', ...o }));
    assert.ok(
      want.every((o) => Array.isArray(o.metadata.managedFields)),
      'the cluster keeps managedFields',
    );

    const plain = await page(w, `configmaps/${N}`, { labelSelector: w.label, page: 1 });
    assert.equal(plain.status, 200, plain.text);
    assert.deepEqual(
      plain.body.items,
      want.map(({ metadata: { managedFields: _, ...metadata }, ...o }) => ({ ...o, metadata })),
    );
    const full = await page(w, `configmaps/${N}`, { labelSelector: w.label, page: 1, showManagedFields: 'true' });
    assert.equal(full.status, 200, full.text);
    assert.deepEqual(full.body.items, want);
    const off = await page(w, `configmaps/${N}`, { labelSelector: w.label, page: 1, showManagedFields: 'false' });
    assert.deepEqual(off.body.items, plain.body.items);

    for (const [q, what] of [
      [{ page: 1, showManagedFields: 'yes' }, /showManagedFields must be true or false/],
      [{ showManagedFields: 'true' }, /showManagedFields needs a paged query/],
    ] as const) {
      const res = await page(w, `configmaps/${N}`, q);
      assert.equal(res.status, 400, `${JSON.stringify(q)}: ${res.text}`);
      assert.match(JSON.stringify(res.body.message), what);
    }
  });

  test('watch=true with the page’s resourceVersion: a change made before the watch opened is told at once', async () => {
    const [N] = w.namespaces;
    const q = { labelSelector: w.label, search: 'rv-', page: '1' };
    const before = await page(w, 'configmaps/_all', q);
    assert.equal(before.status, 200, before.text);
    const rv = before.body.metadata.resourceVersion as string;
    // Between fetching the page and opening its watch: a change, and time for the cache to hold it.
    await configmaps(w, N, 'rv-between', 1);
    await sleep(1_200);
    let notices: Notices | undefined;
    try {
      const opened = Date.now();
      notices = await openNotices(base, 'configmaps/_all', { ...q, resourceVersion: rv }, { token: w.admin });
      assert.equal(notices.status, 200, notices.text);
      await waitFor('the first notice', async () => notices!.events.length > 0, 2_000, 10);
      const [first] = notices.events;
      assert.equal(first.type, 'CHANGED');
      assert.equal(first.total, before.body.total + 1);
      assert.ok(BigInt(first.resourceVersion!) > BigInt(rv));
      assert.ok(first.at - opened < 500, `told ${first.at - opened} ms after opening`);
      notices.close();

      // Opened with the version of a page that has everything: nothing to tell.
      const current = await page(w, 'configmaps/_all', q);
      notices = await openNotices(
        base,
        'configmaps/_all',
        { ...q, resourceVersion: current.body.metadata.resourceVersion },
        { token: w.admin },
      );
      await sleep(1_500);
      assert.deepEqual(notices.events, []);
    } finally {
      notices?.close();
    }
  });

  test('SSE: every frame carries id: <resourceVersion>; Last-Event-ID resumes after it; bad versions are a 400 naming them', async () => {
    const [N] = w.namespaces;
    const q = { labelSelector: w.label, search: 'sse-', page: '1' };
    const start = await page(w, 'configmaps/_all', q);
    const rv = start.body.metadata.resourceVersion as string;
    let notices = await openNotices(base, 'configmaps/_all', q, { token: w.admin, sse: true });
    try {
      await configmaps(w, N, 'sse-a', 1);
      await waitFor('a CHANGED frame', async () => notices.events.length > 0, 3_000, 10);
      const [changed] = notices.events;
      assert.deepEqual([changed.event, changed.type, changed.total], ['CHANGED', 'CHANGED', start.body.total + 1]);
      assert.equal(changed.id, changed.resourceVersion, 'the frame’s id is the version it tells of');
      notices.close();

      // A reconnecting EventSource sends the last id it saw; a change after it is told at once.
      await configmaps(w, N, 'sse-b', 1);
      await sleep(1_200);
      const sse = (lastEventId: string) => ({ token: w.admin, sse: true, headers: { 'last-event-id': lastEventId } });
      notices = await openNotices(base, 'configmaps/_all', q, sse(changed.id!));
      await waitFor('the notice after Last-Event-ID', async () => notices.events.length > 0, 1_000, 10);
      const resumed = notices.events[0];
      assert.equal(resumed.total, start.body.total + 2);
      assert.ok(BigInt(resumed.id!) > BigInt(changed.id!));
      notices.close();
      // Last-Event-ID takes the place of the resourceVersion the page's URL still carries.
      notices = await openNotices(base, 'configmaps/_all', { ...q, resourceVersion: rv }, sse(resumed.id!));
      await sleep(1_500);
      assert.deepEqual(notices.events, []);
    } finally {
      notices.close();
    }

    for (const [query, headers, what] of [
      [{ resourceVersion: 'abc' }, {}, /resourceVersion must be a page's metadata.resourceVersion/],
      [{}, { 'last-event-id': 'not a version' }, /Last-Event-ID must be an event id this service sent/],
    ] as const) {
      const bad = await openNotices(
        base,
        'configmaps/_all',
        { ...q, ...query },
        { token: w.admin, sse: true, headers },
      );
      assert.equal(bad.status, 400, bad.text);
      assert.match(bad.text, what);
    }
    const notWatching = await page(w, 'configmaps/_all', { ...q, resourceVersion: rv });
    assert.equal(notWatching.status, 400, notWatching.text);
    assert.match(JSON.stringify(notWatching.body.message), /resourceVersion on a paged query needs watch=true/);
  });
});
