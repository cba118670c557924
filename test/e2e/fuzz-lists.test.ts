/**
 * A seeded property test of the paged-list query surface (page, size, sortBy, sortOrder, search,
 * labelSelector, fieldSelector, watch, and with watch its resourceVersion; showManagedFields) against
 * the service listening on loopback, its caches filled from the shared real control plane.
 *
 * Each request is a valid query, or a valid query with one parameter bad (a value the service must
 * refuse) or wild (any text: accepted or refused). Pass: no 5xx; a valid query answers its page (or,
 * with watch=true, a stream); a bad value is a 400 naming its parameter, and a refused wild value too.
 * The event loop is sampled during each request: no delay beyond 100 ms, counting of a delay at most the
 * CPU time the process spent during it (a loop the shared machine gave no core is late without being
 * held); a request over it is sent twice more and the smallest of the three counts (as in
 * test/http/event-loop-guard.test.ts: a garbage collection or a neighbour is not the request's doing).
 * FUZZ_LIST_RUNS (default 300) and FUZZ_SEED choose how much and which.
 */
import fc from 'fast-check';
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { performance } from 'node:perf_hooks';
import { kubeRequest } from '../harness/control-plane.js';
import { baseOf, configmaps, startWorld, stopWorld, type World } from '../support/list-world.js';

const RUNS = Number(process.env.FUZZ_LIST_RUNS ?? 300);
const SEED = Number(process.env.FUZZ_SEED ?? 20261122);
const HELD_LIMIT_MS = 100;

type Param =
  | 'page'
  | 'size'
  | 'sortBy'
  | 'sortOrder'
  | 'search'
  | 'labelSelector'
  | 'fieldSelector'
  | 'watch'
  | 'resourceVersion'
  | 'showManagedFields';

// ---- values -------------------------------------------------------------------------------------

const dns = fc.stringMatching(/^[a-z0-9]([-a-z0-9]{0,10}[a-z0-9])?$/);
const nonEmptyValue = fc.stringMatching(/^[A-Za-z0-9]([-A-Za-z0-9_.]{0,10}[A-Za-z0-9])?$/);
const labelValue = fc.oneof(fc.constant(''), nonEmptyValue);
const labelKey = fc
  .tuple(fc.option(fc.constantFrom('example.com/', 'app.kubernetes.io/'), { nil: '' }), dns)
  .map(([prefix, name]) => prefix + name);
const requirement = fc.oneof(
  fc.tuple(labelKey, fc.constantFrom('=', '==', '!='), labelValue).map(([k, op, v]) => `${k}${op}${v}`),
  fc
    // (the apiserver takes `in ()` and `in (,)`, but not two empty values in a set)
    .tuple(labelKey, fc.constantFrom('in', 'notin'), fc.array(nonEmptyValue, { minLength: 1, maxLength: 3 }))
    .map(([k, op, vs]) => `${k} ${op} (${vs.join(',')})`),
  labelKey,
  labelKey.map((k) => `!${k}`),
  fc.tuple(labelKey, fc.constantFrom('>', '<'), fc.integer({ min: 0, max: 99 })).map(([k, op, n]) => `${k}${op}${n}`),
);
const selectorValue = fc.stringMatching(/^[A-Za-z0-9._/-]{0,12}$/);
/** The fields each route's type may be selected by (metadata.* for all). */
const FIELDS: Record<string, string[]> = {
  configmaps: [],
  pods: ['status.phase', 'spec.nodeName', 'spec.restartPolicy'],
  secrets: ['type'],
  events: ['reason', 'type', 'involvedObject.kind'],
  namespaces: ['status.phase'],
};
const validSortBy = fc.oneof(
  fc.constantFrom(
    'metadata.name',
    'metadata.namespace',
    'metadata.creationTimestamp',
    'metadata.labels.app',
    'status.phase',
    'spec.replicas',
    'data',
    'metadata.uid',
  ),
  fc.stringMatching(/^[A-Za-z0-9_$-]{1,12}(\.[A-Za-z0-9_$/-]{1,12}){0,3}$/),
);
const wild = fc.oneof(
  fc.string({ maxLength: 40 }),
  fc.string({ unit: 'grapheme', maxLength: 20 }),
  fc.constantFrom('', ' ', '0', '-1', '1e3', '0x10', 'true', 'TRUE', 'null', '%00', '\u0000', '..', 'é', '𝕏'),
);

/** Per parameter: valid values (for the route's type), and values the service must refuse. */
function values(resource: string): Record<Param, { valid: fc.Arbitrary<string>; bad: fc.Arbitrary<string> }> {
  const field = fc.constantFrom('metadata.name', 'metadata.namespace', ...FIELDS[resource]);
  return {
    page: {
      valid: fc.integer({ min: 1, max: 1_000_000 }).map(String),
      bad: fc.constantFrom('0', '-1', '1.5', 'abc', '1000001', '', 'NaN', '1e7'),
    },
    size: {
      valid: fc.integer({ min: 1, max: 500 }).map(String),
      bad: fc.constantFrom('0', '501', '-5', '2.5', 'x', ''),
    },
    sortBy: {
      valid: validSortBy,
      bad: fc.constantFrom('a..b', '.x', 'x.', 'a b', '', 'x'.repeat(257), 'é', 'a.b c', 'metadata.name;'),
    },
    sortOrder: { valid: fc.constantFrom('asc', 'desc'), bad: fc.constantFrom('ASC', 'up', '', ' asc', 'descending') },
    search: {
      valid: fc.string({ unit: 'grapheme', maxLength: 40 }).filter((s) => s.length <= 256),
      bad: fc.integer({ min: 257, max: 600 }).map((n) => 'w'.repeat(n)),
    },
    labelSelector: {
      valid: fc.array(requirement, { minLength: 0, maxLength: 3 }).map((rs) => rs.join(',')),
      bad: fc.constantFrom('app=web,', 'app in web', 'tier>x', '-bad=1', 'a b', 'app=(x)', '!', '=x', 'x'.repeat(4097)),
    },
    fieldSelector: {
      valid: fc
        .array(fc.tuple(field, fc.constantFrom('=', '==', '!='), selectorValue), { minLength: 1, maxLength: 2 })
        .map((terms) => terms.map(([f, op, v]) => `${f}${op}${v}`).join(',')),
      bad: fc.constantFrom('data.i=1', 'metadata.name', '=x', 'metadata.name~x', 'spec.foo=1', 'x'.repeat(4097)),
    },
    watch: { valid: fc.constantFrom('true', 'false'), bad: fc.constantFrom('yes', 'f', '1', 'TRUE', '') },
    resourceVersion: {
      valid: fc.bigInt({ min: 0n, max: 10n ** 19n }).map(String),
      bad: fc.constantFrom('abc', '-1', '1.5', '1e3', '0x10', '123456789012345678901'),
    },
    showManagedFields: { valid: fc.constantFrom('true', 'false'), bad: fc.constantFrom('yes', '1', 'True', '') },
  };
}

interface Sample {
  route: string;
  query: Record<string, string>;
  /** The parameter given a bad (must be refused) or wild (may be refused) value, if any. */
  mutated?: { param: Param; kind: 'bad' | 'wild' };
}

function sample(routes: string[]): fc.Arbitrary<Sample> {
  return fc.constantFrom(...routes).chain((route) => {
    const v = values(route.split('/')[0]);
    const optional = (p: Param) => fc.option(v[p].valid, { nil: undefined, freq: 2 });
    return fc
      .record({
        page: v.page.valid,
        size: optional('size'),
        sortBy: optional('sortBy'),
        sortOrder: optional('sortOrder'),
        search: optional('search'),
        labelSelector: optional('labelSelector'),
        fieldSelector: optional('fieldSelector'),
        watch: fc.option(v.watch.valid, { nil: undefined, freq: 3 }),
        resourceVersion: optional('resourceVersion'),
        showManagedFields: optional('showManagedFields'),
      })
      .chain((record) => {
        const query = Object.fromEntries(Object.entries(record).filter(([, x]) => x !== undefined)) as Record<
          string,
          string
        >;
        // resourceVersion belongs to a paged watch: without watch=true it is itself the mistake.
        if (query.watch !== 'true') delete query.resourceVersion;
        const mutation = fc.option(
          fc.tuple(fc.constantFrom(...(Object.keys(v) as Param[])), fc.constantFrom('bad' as const, 'wild' as const)),
          { nil: undefined, freq: 3 },
        );
        return mutation.chain((m) => {
          if (!m) return fc.constant({ route, query });
          const [param, kind] = m;
          return (kind === 'bad' ? v[param].bad : wild).map((value) => ({
            route,
            query: { ...query, [param]: value },
            mutated: { param, kind },
          }));
        });
      });
  });
}

/**
 * Samples the event loop every 10 ms while a request runs: its worst delay, counted at most as the CPU
 * time the process spent meanwhile.
 */
function loopSampler() {
  const every = 10;
  let last = performance.now();
  let cpu = process.cpuUsage();
  let worst = 0;
  const timer = setInterval(() => {
    const now = performance.now();
    const spent = process.cpuUsage(cpu);
    worst = Math.max(worst, Math.min(now - last - every, (spent.user + spent.system) / 1000));
    last = now;
    cpu = process.cpuUsage();
  }, every);
  return {
    /** The worst delay since the last call. */
    take(): number {
      const seen = worst;
      worst = 0;
      return seen;
    },
    stop: () => clearInterval(timer),
  };
}

describe('fuzz: the paged-list query surface against the real control plane', () => {
  let w: World;
  let base: string;
  let routes: string[];
  const statuses = new Map<number, number>();

  before(async () => {
    // Watch streams are opened and dropped at once here: the per-caller limit is not what is tested.
    w = await startWorld({ tag: 'fuzz', namespaces: 1, env: { CAS_WATCH_MAX_STREAMS_PER_CALLER: '1000' } });
    const [N] = w.namespaces;
    await configmaps(w, N, 'cm', 12);
    const secret = await kubeRequest(w.cp, 'POST', `/api/v1/namespaces/${N}/secrets`, {
      metadata: { name: 's', labels: { app: 'web' } },
      type: 'Opaque',
      stringData: { a: 'b' },
    });
    assert.equal(secret.status, 201);
    base = await baseOf(w);
    // The first call to the cluster connects (TLS) and reads its discovery: once per cluster, not per query.
    const warm = await fetch(`${base}/api/v1/configmaps/${N}?limit=1`, {
      headers: { authorization: `Bearer ${w.admin}`, 'x-cluster-name': 'c' },
    });
    assert.equal(warm.status, 200, await warm.text());
    routes = [`configmaps/${N}`, 'configmaps/_all', 'pods/_all', `secrets/${N}`, 'events/_all', 'namespaces/_all'];
  });
  after(async () => {
    console.log(`fuzz-lists: statuses ${JSON.stringify(Object.fromEntries(statuses))}`);
    await stopWorld(w);
  });

  /** One request as a console sends it: a paged watch that opened is dropped once its headers are in. */
  async function send(s: Sample): Promise<{ url: string; status: number; streaming: boolean; text: string }> {
    const url = `${base}/api/v1/${s.route}?${new URLSearchParams(s.query)}`;
    const controller = new AbortController();
    const res = await fetch(url, {
      headers: { authorization: `Bearer ${w.admin}`, 'x-cluster-name': 'c' },
      signal: controller.signal,
    });
    const streaming = res.status === 200 && s.query.watch === 'true';
    const text = streaming ? '' : await res.text();
    controller.abort();
    return { url, status: res.status, streaming, text };
  }

  test(`${RUNS} seeded queries: no 5xx, every bad value a 400 naming it, the event loop never held > ${HELD_LIMIT_MS} ms`, async (ctx) => {
    const loop = loopSampler();
    let worst = { ms: 0, url: '' };
    /** Requests during which the loop was held too long: measured twice more, the smallest counts (a GC, a noisy neighbour). */
    const slow: Sample[] = [];
    try {
      await fc.assert(
        fc.asyncProperty(sample(routes), async (s) => {
          loop.take();
          const { url, status, streaming, text } = await send(s);
          const held = loop.take();
          if (held > worst.ms) worst = { ms: held, url };
          if (held > HELD_LIMIT_MS) slow.push(s);
          statuses.set(status, (statuses.get(status) ?? 0) + 1);
          const what = `${status} for ${url}: ${text.slice(0, 300)}`;
          assert.ok(status < 500, what);
          if (!s.mutated) {
            assert.equal(status, 200, what);
            if (!streaming) assert.equal(typeof JSON.parse(text).total, 'number', what);
            return;
          }
          if (s.mutated.kind === 'bad') assert.equal(status, 400, what);
          else assert.ok([200, 400].includes(status), what);
          if (status === 400) {
            const message = JSON.stringify(JSON.parse(text).message);
            assert.ok(message.includes(s.mutated.param), `the 400 does not name ${s.mutated.param}: ${what}`);
          }
        }),
        { seed: SEED, numRuns: RUNS, endOnFailure: true, includeErrorInReport: true },
      );
      ctx.diagnostic(`event loop: worst ${worst.ms.toFixed(1)} ms during ${worst.url}`);
      const held: string[] = [];
      for (const s of slow) {
        const tries: number[] = [];
        for (let i = 0; i < 2; i++) {
          loop.take();
          const { url } = await send(s);
          tries.push(loop.take());
          if (i === 1 && Math.min(...tries) > HELD_LIMIT_MS) held.push(`${Math.min(...tries).toFixed(1)} ms: ${url}`);
        }
      }
      assert.deepEqual(held, [], `the event loop was held more than ${HELD_LIMIT_MS} ms`);
    } finally {
      loop.stop();
    }
  });
});
