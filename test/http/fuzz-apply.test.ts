// A seeded property test of POST /api/v1/apply against the real app in this process and a real control
// plane, every request a dry run: random documents (objects of real and unknown kinds with fields of
// every type, nesting, Secrets whose values must never come back, YAML with anchors and aliases, a value
// that contains itself, huge scalars within the 10 MiB body, several documents, garbage, JSON shapes).
//
// Pass: no 5xx; a refused body is a 4xx in the service's shape whose message names what is wrong (a
// line, a document, the body, a parameter); a body taken has one result per document, each `error`
// carrying a Status; no Secret value in any answer; and the event loop never held more than 100 ms while
// a request runs (see LoopWatch; a case over the limit is measured twice more and the smallest counts).
// FUZZ_APPLY_RUNS (default 150) and FUZZ_SEED choose how much and which.
import fc from 'fast-check';
import assert from 'node:assert/strict';
import { performance, type EventLoopUtilization } from 'node:perf_hooks';
import { after, before, describe, test } from 'node:test';
import { stringify } from 'yaml';
import { APPLY_ACTIONS } from '../../src/apply/dto/apply.dto.js';
import { kubeRequest, sharedControlPlane, type ControlPlane } from '../harness/control-plane.js';
import { onPostgres, startTestApp, type TestApp } from '../support/app.js';
import { kubeconfigFor, registerCluster } from '../support/clusters.js';
import { signedIn } from '../support/factories.js';

const RUNS = Number(process.env.FUZZ_APPLY_RUNS ?? 150);
const SEED = Number(process.env.FUZZ_SEED ?? 20261127);
const LIMIT_MS = 100;
const NAMESPACE = `fuzz-apply-${process.pid}`;

type Obj = Record<string, unknown>;

// ---- generators -----------------------------------------------------------------------------

const odd = fc.constantFrom(
  '',
  ' ',
  '-',
  '~',
  'null',
  'true',
  '0x1F',
  '1e999',
  '.inf',
  '..',
  'a/b',
  'é𝕏',
  '\u0000',
  '\t',
  'a\nb',
  '*a',
  '&a',
  '!!binary aGVsbG8=',
  '<<',
  '__proto__',
  'x'.repeat(300),
);
const scalar = fc.oneof(
  fc.string({ maxLength: 30 }),
  fc.string({ unit: 'grapheme', maxLength: 10 }),
  fc.integer(),
  fc.double(),
  fc.boolean(),
  fc.constant(null),
  odd,
);
const value = fc.letrec((tie) => ({
  any: fc.oneof({ depthSize: 'small' }, scalar, tie('list'), tie('map')),
  list: fc.array(tie('any'), { maxLength: 4 }),
  map: fc.dictionary(fc.oneof(fc.string({ maxLength: 10 }), odd), tie('any'), { maxKeys: 5 }),
})).any;
const name = fc.oneof(
  fc.stringMatching(/^[a-z][a-z0-9-]{0,12}$/),
  fc.constantFrom('a', 'fuzz-1', 'x'.repeat(253), 'x'.repeat(254), 'UPPER', '-a', 'a.b', 'a:b'),
  scalar,
);
const apiVersion = fc.oneof(
  { weight: 4, arbitrary: fc.constantFrom('v1', '/v1', 'apps/v1', 'rbac.authorization.k8s.io/v1') },
  { weight: 1, arbitrary: fc.constantFrom('example.com/v1', 'v1/x/y', 'apps/', 'V1', 'apiextensions.k8s.io/v1') },
  { weight: 1, arbitrary: scalar },
);
const kind = fc.oneof(
  { weight: 4, arbitrary: fc.constantFrom('ConfigMap', 'Secret', 'Service', 'Deployment', 'Namespace', 'Role') },
  { weight: 1, arbitrary: fc.constantFrom('ClusterRole', 'CustomResourceDefinition', 'Widget', 'secret', 'List') },
  { weight: 1, arbitrary: scalar },
);
const metadata = fc.oneof(
  {
    weight: 5,
    arbitrary: fc.record(
      {
        name,
        namespace: fc.oneof(fc.constantFrom(NAMESPACE, 'default', 'other', '_all', ''), scalar),
        labels: fc.oneof(fc.dictionary(fc.stringMatching(/^[a-z]{1,8}$/), fc.stringMatching(/^[a-z]{0,8}$/)), value),
        resourceVersion: fc.oneof(fc.constantFrom('1', '0', '18446744073709551616', 'x'), scalar),
      },
      { requiredKeys: ['name'] },
    ),
  },
  { weight: 1, arbitrary: value },
);
/** A Kubernetes-shaped object: each field valid-ish, of the wrong type, or missing. */
const object = fc.record(
  { apiVersion, kind, metadata, data: value, stringData: value, spec: value, type: scalar },
  { requiredKeys: [] },
);

/** A Secret whose values carry markers that must never come back (strings, numbers, nested). */
const secret = fc
  .tuple(
    fc.constantFrom('v1', '/v1'),
    fc.stringMatching(/^[a-z][a-z0-9-]{0,12}$/),
    fc.array(fc.constantFrom('string', 'number', 'nested', 'list', 'data'), { minLength: 1, maxLength: 3 }),
    fc.integer({ min: 10_000_000, max: 99_999_999 }),
  )
  .map(([version, secretName, shapes, seed]) => {
    const markers: string[] = [];
    const stringData: Obj = {};
    const data: Obj = {};
    shapes.forEach((shape, i) => {
      const marker = `${seed}${i}7531`;
      markers.push(marker, Buffer.from(`fz${marker}`).toString('base64'));
      if (shape === 'string') stringData[`k${i}`] = `fz${marker}`;
      if (shape === 'number') stringData[`k${i}`] = Number(marker);
      if (shape === 'nested') stringData[`k${i}`] = { inner: `fz${marker}` };
      if (shape === 'list') stringData[`k${i}`] = [`fz${marker}`];
      if (shape === 'data') data[`k${i}`] = Buffer.from(`fz${marker}`).toString('base64');
    });
    const doc: Obj = { apiVersion: version, kind: 'Secret', metadata: { name: secretName }, stringData };
    if (Object.keys(data).length) doc.data = data;
    return { doc, markers };
  });

/** YAML whose aliases stand for much more than it says (or for a value that contains itself). */
const aliased = fc
  .record({
    size: fc.oneof(fc.integer({ min: 0, max: 2_000 }), fc.integer({ min: 100_000, max: 3_000_000 })),
    uses: fc.integer({ min: 0, max: 120 }),
    shape: fc.constantFrom('scalar', 'map', 'self', 'nested'),
    docName: fc.stringMatching(/^[a-z][a-z0-9-]{0,12}$/),
  })
  .map(({ size, uses, shape, docName }) => {
    const head = `apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ${docName}\n`;
    if (shape === 'self') return `${head}data: &d\n  a: [*d]\n`;
    if (shape === 'map') {
      return `${head}data: &d {a: "${'m'.repeat(size)}"}\nspec: [${Array(uses).fill('*d').join(', ')}]\n`;
    }
    if (shape === 'nested') {
      return `${head}spec:\n  a: &a ["${'n'.repeat(Math.min(size, 5000))}", "${'n'.repeat(Math.min(size, 5000))}"]\n  b: &b [*a, *a, *a, *a]\n  c: &c [*b, *b, *b, *b]\n  d: [*c, *c, *c, *c]\n`;
    }
    const uses0 = Array.from({ length: uses }, (_, i) => `  k${i}: *big`).join('\n');
    return `${head}data:\n  big: &big ${'s'.repeat(size) || '""'}\n${uses0}\n`;
  });

/** `arbitrary` once in `oneIn` cases, null otherwise. */
const sometimes = <T>(arbitrary: fc.Arbitrary<T>, oneIn: number) =>
  fc.oneof({ weight: oneIn - 1, arbitrary: fc.constant(null) }, { weight: 1, arbitrary });

interface Case {
  contentType: string;
  payload: string;
  /** Documents the service must answer one result each for, when known. */
  documents?: number;
  markers: string[];
  query: Record<string, string>;
  yaml: boolean;
}

const mutation = fc.oneof(
  { weight: 6, arbitrary: fc.constant((text: string) => text) },
  {
    weight: 1,
    arbitrary: fc.tuple(fc.nat(), fc.string({ maxLength: 12 })).map(([at, junk]) => (text: string) => {
      const i = at % (text.length + 1);
      return text.slice(0, i) + junk + text.slice(i);
    }),
  },
  {
    weight: 1,
    arbitrary: fc.nat().map((at) => (text: string) => {
      const lines = text.split('\n');
      const i = at % lines.length;
      return [...lines.slice(0, i + 1), lines[i], ...lines.slice(i + 1)].join('\n'); // a duplicate key, often
    }),
  },
  {
    weight: 1,
    arbitrary: fc.constantFrom(
      (t: string) => `\t${t}`,
      (t: string) => `${t}\n[[[{`,
      (t: string) => `%YAML 9.9\n${t}`,
    ),
  },
);

const cases: fc.Arbitrary<Case> = fc
  .record({
    docs: fc.array(
      fc.oneof(
        { weight: 4, arbitrary: object.map((doc) => ({ doc, markers: [] as string[] })) },
        { weight: 2, arbitrary: secret },
      ),
      {
        minLength: 0,
        maxLength: 5,
      },
    ),
    aliased: sometimes(aliased, 4),
    format: fc.constantFrom('yaml-block', 'yaml-flow', 'json-object', 'json-array', 'json-list'),
    separator: fc.constantFrom('---\n', '\n---\n', '--- # c\n', '---\n---\n'),
    mutate: mutation,
    contentType: fc.oneof(
      { weight: 12, arbitrary: fc.constant('') },
      { weight: 1, arbitrary: fc.constantFrom('text/plain', 'application/json', 'application/yaml; charset=utf-8') },
    ),
    many: sometimes(fc.integer({ min: 499, max: 502 }), 40),
    force: fc.boolean(),
    fieldManager: sometimes(fc.constantFrom('fuzz', 'cas:admin', 'CAS:x', ' ', 'é'), 10),
  })
  .map((r): Case => {
    const markers = r.docs.flatMap((d) => d.markers);
    const docs = r.docs.map((d) => d.doc);
    const query: Record<string, string> = { dryRun: 'All', namespace: NAMESPACE };
    if (r.force) query.force = 'true';
    if (r.fieldManager !== null) query.fieldManager = r.fieldManager;
    if (r.many !== null) {
      const one = `apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: m\n`;
      return {
        contentType: 'application/yaml',
        payload: Array(r.many).fill(one).join('---\n'),
        markers,
        query,
        yaml: true,
      };
    }
    const yaml = r.format.startsWith('yaml') || r.aliased !== null;
    let payload: string;
    let documents: number | undefined;
    if (yaml) {
      const texts = docs.map((doc) => (r.format === 'yaml-flow' ? JSON.stringify(doc) : stringify(doc)));
      if (r.aliased !== null) texts.push(r.aliased);
      payload = r.mutate(texts.join(r.separator));
    } else if (r.format === 'json-object') {
      payload = JSON.stringify(docs[0] ?? {});
      documents = 1;
    } else if (r.format === 'json-array') {
      payload = JSON.stringify(docs);
      documents = docs.length;
    } else {
      payload = JSON.stringify({ apiVersion: 'v1', kind: 'List', items: docs });
      documents = docs.length;
    }
    const contentType = r.contentType || (yaml ? 'application/yaml' : 'application/json');
    // A JSON text sent as YAML is one YAML document (an array or a List is not split then).
    if (contentType !== 'application/json') documents = undefined;
    return { contentType, payload, documents, markers, query, yaml: yaml || contentType.includes('yaml') };
  })
  .map((c) =>
    Object.assign(c, {
      [fc.toStringMethod]: () =>
        JSON.stringify({
          ...c,
          payload: c.payload.length > 400 ? `${c.payload.slice(0, 400)}… (${c.payload.length})` : c.payload,
        }),
    }),
  );

// ---- the event loop --------------------------------------------------------------------------

/**
 * The longest the event loop was held while it watched: a timer every 5 ms, and for each gap between two
 * of its ticks the least of the gap itself, the time the loop was busy in it (eventLoopUtilization) and
 * the CPU the process spent in it. The machine is shared: a gap because the process got no core is
 * neither busy nor spends CPU, and one while a worker thread computes is not busy, so only work that
 * holds the loop counts.
 */
class LoopWatch {
  private timer?: NodeJS.Timeout;
  private worst = 0;

  start(): void {
    let last = performance.now();
    let elu: EventLoopUtilization = performance.eventLoopUtilization();
    let cpu = process.cpuUsage();
    this.worst = 0;
    this.timer = setInterval(() => {
      const now = performance.now();
      const busy = performance.eventLoopUtilization(elu);
      const spent = process.cpuUsage(cpu);
      const held = Math.min(now - last, busy.active, (spent.user + spent.system) / 1000);
      this.worst = Math.max(this.worst, held);
      last = now;
      elu = performance.eventLoopUtilization();
      cpu = process.cpuUsage();
    }, 5);
  }

  /** Stops watching (after one more tick, for work that ended the watched request) and says the worst. */
  async stop(): Promise<number> {
    await new Promise((resolve) => setTimeout(resolve, 10));
    clearInterval(this.timer);
    return this.worst;
  }
}

// ---- the run ---------------------------------------------------------------------------------

describe(
  'fuzz: POST /api/v1/apply documents on a real cluster (dry runs)',
  {
    skip:
      (onPostgres && 'the fuzzer runs on SQLite') ||
      (!process.env.CAS_TEST_CP_A && 'needs a control plane (CAS_TEST_CP_A)'),
  },
  () => {
    let t: TestApp;
    let cp: ControlPlane;
    let token: string;

    before(async () => {
      cp = await sharedControlPlane('a');
      t = await startTestApp({ env: { CAS_CLUSTER_HEALTH_INTERVAL_SECONDS: '0' } });
      token = (await signedIn(t, 'admin')).token;
      await registerCluster(t, token, 'fuzz', kubeconfigFor(cp));
      await kubeRequest(cp, 'POST', '/api/v1/namespaces', { metadata: { name: NAMESPACE } });
    });
    after(async () => {
      if (cp) await kubeRequest(cp, 'DELETE', `/api/v1/namespaces/${NAMESPACE}`);
      await t?.close();
    });

    test(`${RUNS} fuzzed bodies: no 5xx, bad documents named, no Secret value back, the loop never held > ${LIMIT_MS} ms`, async (ctx) => {
      const watch = new LoopWatch();
      // The watch sees a hold: 150 ms of CPU without a pause.
      watch.start();
      await new Promise<void>((resolve) =>
        setTimeout(() => {
          const cpu = process.cpuUsage();
          const spent = () => process.cpuUsage(cpu);
          while ((spent().user + spent().system) / 1000 < 150);
          resolve();
        }, 10),
      );
      assert.ok((await watch.stop()) >= LIMIT_MS, 'the loop watch misses a hold');
      const statuses: Record<string, number> = {};
      const held: string[] = [];
      let worst = 0;
      const send = async (c: Case) => {
        watch.start();
        const res = await t.app.inject({
          method: 'POST',
          url: `/api/v1/apply?${new URLSearchParams(c.query)}`,
          headers: { authorization: `Bearer ${token}`, 'x-cluster-name': 'fuzz', 'content-type': c.contentType },
          payload: c.payload,
        });
        return { res, delay: await watch.stop() };
      };
      await fc.assert(
        fc.asyncProperty(cases, async (c) => {
          const { res, delay: first } = await send(c);
          let delay = first;
          if (delay > LIMIT_MS) delay = Math.min(delay, (await send(c)).delay, (await send(c)).delay);
          worst = Math.max(worst, delay);
          if (delay > LIMIT_MS) held.push(`${delay.toFixed(0)} ms: ${fc.stringify(c)}`);
          if (process.env.FUZZ_APPLY_TRACE)
            console.log(
              `trace ${delay.toFixed(0)} ms ${res.statusCode} ${c.payload.length} ${c.contentType} ${res.body.length} ${fc.stringify(c).slice(0, 200)}`,
            );
          const label = `${res.statusCode} ${res.body.slice(0, 400)}`;
          statuses[res.statusCode] = (statuses[res.statusCode] ?? 0) + 1;
          assert.ok(res.statusCode < 500, `a 5xx: ${label}`);
          for (const marker of c.markers) assert.ok(!res.body.includes(marker), `a Secret value came back: ${label}`);
          const body = JSON.parse(res.body);
          if (res.statusCode >= 400) {
            assert.deepEqual(Object.keys(body).sort(), ['error', 'message', 'requestId', 'statusCode'], label);
            const message = ([] as string[]).concat(body.message).join('; ');
            if (res.statusCode === 400) {
              assert.match(
                message,
                /line \d+|document|body|JSON|namespace|fieldManager|dryRun|force|Unexpected|token/,
                label,
              );
            }
            if (
              c.yaml &&
              res.statusCode === 400 &&
              /not valid YAML|alias|nests|indented|more than \d+ lines|expands/.test(message)
            ) {
              assert.match(message, /line \d+/, `a YAML problem names its line: ${label}`);
            }
            return;
          }
          assert.equal(res.statusCode, 200, label);
          assert.ok(Array.isArray(body.results) && body.results.length > 0, label);
          if (c.documents !== undefined) assert.equal(body.results.length, c.documents, label);
          for (const result of body.results) {
            assert.ok(APPLY_ACTIONS.includes(result.action), label);
            if (result.action === 'error') {
              assert.equal(typeof result.status?.code, 'number', label);
              assert.ok(typeof result.status.message === 'string' && result.status.message.length > 0, label);
            }
          }
        }),
        { seed: SEED, numRuns: RUNS, endOnFailure: true },
      );
      const summary = `fuzz apply: ${RUNS} bodies (seed ${SEED}); statuses ${JSON.stringify(statuses)}; worst loop delay ${worst.toFixed(0)} ms`;
      ctx.diagnostic(summary);
      assert.deepEqual(held, [], 'requests that held the event loop');
      // Nothing was stored: every request was a dry run.
      const stored = await kubeRequest(cp, 'GET', `/api/v1/namespaces/${NAMESPACE}/configmaps`);
      assert.deepEqual(
        (stored.body.items as Array<{ metadata: { name: string } }>)
          .map((i) => i.metadata.name)
          .filter((n) => n !== 'kube-root-ca.crt'),
        [],
      );
    });
  },
);
