/**
 * The Kubernetes path decides on a request as the apiserver will read it: a seeded property test with
 * the apiserver itself as the oracle. Each generated request (groups, versions, namespaces, resources,
 * names, subresources, the `watch`/`proxy` special verbs, odd segments; `watch` in many spellings,
 * field and label selectors, limits) goes through the service's own path reading (`kubePathOf`), is
 * parsed by `parseRequestInfo`, and is sent as the service forwards it straight to the test control
 * plane's apiserver (admin credentials). What the apiserver recorded in its audit log (`verb` and
 * `objectRef`) must be what `parseRequestInfo` said. Writes only ever name a namespace that does not
 * exist, or a group that does not: nothing in the shared control plane changes.
 *
 * KUBE_FUZZ_SEED and KUBE_FUZZ_RUNS choose which and how many.
 */
import fc from 'fast-check';
import assert from 'node:assert/strict';
import { open } from 'node:fs/promises';
import https from 'node:https';
import { after, before, describe, test } from 'node:test';
import { kubePathOf } from '../../src/kube/kube.service.js';
import { parseRequestInfo, type RequestInfo, UnplaceableRequestError } from '../../src/k8s/request-info.js';
import { type AuditEvent, kubeRequest, sharedControlPlane, type ControlPlane } from '../harness/control-plane.js';

const SEED = Number(process.env.KUBE_FUZZ_SEED ?? 20260402);
const RUNS = Number(process.env.KUBE_FUZZ_RUNS ?? 300);
const NAMESPACE = `kube-fuzz-${process.pid}`;
/** A namespace that does not exist: the only one a generated write may name. */
const ABSENT = `kube-fuzz-absent-${process.pid}`;
/** Each request's User-Agent starts so, and names the request: how its audit event is found. */
const AGENT = `cas-kube-fuzz/${process.pid}/`;
/** A group no apiserver serves. */
const NO_GROUP = 'fuzz.cas.example';

interface Case {
  method: string;
  segments: string[];
  query: Array<[string, string | null]>;
}

// ---- generators -------------------------------------------------------------------------------

const word = fc.constantFrom(
  'pods',
  'configmaps',
  'deployments',
  'namespaces',
  'nodes',
  'services',
  'events',
  'fuzzies',
  'status',
  'finalize',
  'scale',
  'log',
  'exec',
  'proxy',
  'watch',
  'api',
  'apis',
  'v1',
  'a',
  'web',
  'web:8080',
  'x.y',
  'Pods',
  'ü',
  'a b',
  '...',
  'name%',
  '%3A',
  '',
);
const namespace = fc.constantFrom(NAMESPACE, 'default', 'kube-system', ABSENT, 'a');
const group = fc.constantFrom('apps', 'batch', 'rbac.authorization.k8s.io', NO_GROUP, 'v1', 'watch');
const version = fc.constantFrom('v1', 'v1beta1', 'v2', 'watch', 'x');
const special = fc.option(fc.constantFrom('watch', 'proxy'), { freq: 3 });
const tail: fc.Arbitrary<string[]> = fc.array(word, { maxLength: 4 });

/** `api/v1` or `apis/<group>/<version>`, then perhaps a special verb, perhaps `namespaces/<ns>`, then anything. */
function resourcePath(ns: fc.Arbitrary<string>): fc.Arbitrary<string[]> {
  const prefix = fc.oneof(
    version.map((v) => ['api', v]),
    fc.tuple(group, version).map(([g, v]) => ['apis', g, v]),
  );
  const scope = fc.option(
    ns.map((n) => ['namespaces', n]),
    { freq: 2 },
  );
  return fc
    .tuple(prefix, special, scope, tail)
    .map(([p, verb, s, rest]) => [...p, ...(verb ? [verb] : []), ...(s ?? []), ...rest]);
}

/** Paths that are no resource request, or barely one. */
const otherPath: fc.Arbitrary<string[]> = fc.oneof(
  fc.constantFrom<string[]>(
    ['version'],
    ['api'],
    ['apis'],
    ['apis', 'apps'],
    ['openapi', 'v2'],
    ['metrics'],
    ['api', 'v1'],
  ),
  fc.tuple(fc.constantFrom('api', 'apis', 'apix', 'fuzz'), tail).map(([p, rest]) => [p, ...rest]),
);

/** Writes name only the absent namespace, or the absent group: whatever they are, nothing changes. */
const safeWritePath = fc.oneof(
  fc
    .tuple(fc.constantFrom(['api', 'v1'], ['apis', 'apps', 'v1']), special, tail)
    .map(([p, verb, rest]) => [...p, ...(verb ? [verb] : []), 'namespaces', ABSENT, ...rest]),
  fc.tuple(version, tail).map(([v, rest]) => ['apis', NO_GROUP, v, ...rest]),
  tail.map((rest) => ['fuzz', ...rest]),
);

const watchValue = fc.constantFrom(
  'true',
  '1',
  't',
  'T',
  'True',
  'f',
  'F',
  'false',
  'FALSE',
  'fAlSe',
  '0',
  'yes',
  'no',
  '',
  ' false',
  '00',
  'fal\u017fe',
);
const fieldSelector = fc.constantFrom(
  'metadata.name=a',
  'metadata.name==web',
  'metadata.name!=a',
  'metadata.name=z,metadata.name=b',
  'spec.nodeName=n,metadata.name=web',
  'metadata.name =a',
  'metadata.name= a',
  'metadata.name=..',
  'metadata.name=a=b',
  'metadata.name=a\\,b',
  'metadata.name=x\\y',
  'metadata.name=',
  '=',
  'broken',
  ',,metadata.name=k,',
);
const queryPair: fc.Arbitrary<[string, string | null]> = fc.oneof(
  { weight: 4, arbitrary: watchValue.map((v): [string, string | null] => ['watch', v]) },
  { weight: 1, arbitrary: fc.constant<[string, string | null]>(['watch', null]) },
  { weight: 3, arbitrary: fieldSelector.map((v): [string, string | null] => ['fieldSelector', v]) },
  {
    weight: 1,
    arbitrary: fc
      .constantFrom('app=web', 'a in (', 'x,!y', '')
      .map((v): [string, string | null] => ['labelSelector', v]),
  },
  {
    weight: 1,
    arbitrary: fc
      .tuple(fc.constantFrom('limit', 'timeoutSeconds'), fc.constantFrom('5', '+3', 'ten', '', '99999999999999999999'))
      .map(([k, v]): [string, string | null] => [k, v]),
  },
  { weight: 1, arbitrary: fc.constantFrom('follow', 'resourceVersion').map((k): [string, string | null] => [k, '1']) },
);

const requestCase: fc.Arbitrary<Case> = fc.oneof(
  {
    weight: 6,
    arbitrary: fc.record({
      method: fc.constantFrom('GET', 'GET', 'GET', 'HEAD'),
      segments: fc.oneof({ weight: 4, arbitrary: resourcePath(namespace) }, { weight: 1, arbitrary: otherPath }),
      query: fc.array(queryPair, { maxLength: 4 }),
    }),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      method: fc.constantFrom('POST', 'PUT', 'PATCH', 'DELETE'),
      segments: safeWritePath,
      query: fc.array(queryPair, { maxLength: 2 }),
    }),
  },
);

// ---- the oracle -------------------------------------------------------------------------------

/** The apiserver's audit log, read on from where it was when the test began. */
class AuditTail {
  private readonly events = new Map<string, AuditEvent>();
  private offset = 0;
  private partial = '';

  constructor(private readonly path: string) {}

  async start(): Promise<void> {
    const file = await open(this.path, 'r');
    this.offset = (await file.stat()).size;
    await file.close();
  }

  private async readOn(): Promise<void> {
    const file = await open(this.path, 'r');
    try {
      const size = (await file.stat()).size;
      if (size <= this.offset) return;
      const buffer = Buffer.alloc(size - this.offset);
      await file.read(buffer, 0, buffer.length, this.offset);
      this.offset = size;
      const lines = (this.partial + buffer.toString('utf8')).split('\n');
      this.partial = lines.pop() ?? '';
      for (const line of lines) {
        if (!line.trim()) continue;
        const event = JSON.parse(line) as AuditEvent;
        const agent = event.userAgent ?? '';
        if (agent.startsWith(AGENT) && !this.events.has(agent)) this.events.set(agent, event);
      }
    } finally {
      await file.close();
    }
  }

  /**
   * The first event the apiserver wrote for the request sent with this User-Agent (it may write it a
   * moment after answering; its Audit-Id header is missing from a watch's answer in v1.20).
   */
  async event(agent: string, waitMs = 5000): Promise<AuditEvent | undefined> {
    const deadline = Date.now() + waitMs;
    for (;;) {
      const found = this.events.get(agent);
      if (found || Date.now() > deadline) return found;
      await this.readOn();
      if (!this.events.has(agent)) await new Promise((r) => setTimeout(r, 20));
    }
  }
}

/**
 * Sends the request to the apiserver as the service forwards it; resolves with the answer's status (and
 * the body of a 500, which says whether the apiserver could place the request), then drops the answer.
 */
function sendToApiserver(
  cp: ControlPlane,
  method: string,
  target: string,
  agent: string,
): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    let answered = false;
    const url = new URL(cp.server);
    const write = ['POST', 'PUT', 'PATCH'].includes(method);
    const req = https.request(
      {
        host: url.hostname,
        port: url.port,
        method,
        path: target,
        ca: cp.caData,
        cert: cp.adminCertData,
        key: cp.adminKeyData,
        agent: false,
        timeout: 10_000,
        headers: {
          accept: 'application/json',
          'user-agent': agent,
          ...(write ? { 'content-type': 'application/merge-patch+json', 'content-length': '2' } : {}),
        },
      },
      (res) => {
        const status = res.statusCode ?? 0;
        if (status !== 500) {
          answered = true;
          resolve({ status, body: '' });
          req.destroy(); // a watch or a proxy would go on
          return;
        }
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (body += chunk));
        res.on('end', () => {
          answered = true;
          resolve({ status, body });
        });
      },
    );
    req.on('timeout', () => req.destroy(new Error(`${method} ${target}: no answer within 10 s`)));
    req.on('error', (error) => {
      if (!answered) reject(error);
    });
    req.end(write ? '{}' : undefined);
  });
}

const rawUrlOf = (c: Case) => {
  const path = c.segments.map((s) => encodeURIComponent(s).replace(/%3A/g, ':')).join('/');
  const query = c.query.map(([k, v]) => (v === null ? k : `${k}=${encodeURIComponent(v)}`)).join('&');
  return `/api/v1/clusters/fuzz/k8s/${path}${query ? `?${query}` : ''}`;
};

/** What the audit log says of a request, in parseRequestInfo's terms. */
function recorded(event: AuditEvent) {
  const ref = event.objectRef;
  return {
    isResourceRequest: ref !== undefined,
    verb: event.verb,
    apiGroup: ref?.apiGroup ?? '',
    apiVersion: ref?.apiVersion ?? '',
    namespace: ref?.namespace ?? '',
    resource: ref?.resource ?? '',
    subresource: ref?.subresource ?? '',
    name: ref?.name ?? '',
  };
}

function expected(info: RequestInfo) {
  return {
    isResourceRequest: info.isResourceRequest,
    verb: info.verb,
    apiGroup: info.apiGroup,
    apiVersion: info.apiVersion,
    namespace: info.namespace,
    resource: info.resource,
    subresource: info.subresource,
    name: info.name,
  };
}

describe('request-info against the apiserver as the oracle (seeded property test)', () => {
  let cp: ControlPlane;
  let audit: AuditTail;

  before(async () => {
    cp = await sharedControlPlane('a');
    await kubeRequest(cp, 'POST', '/api/v1/namespaces', { metadata: { name: NAMESPACE } });
    audit = new AuditTail(cp.auditLogPath);
    await audit.start();
  });
  after(async () => {
    if (cp) await kubeRequest(cp, 'DELETE', `/api/v1/namespaces/${NAMESPACE}`);
  });

  test(
    `${RUNS} requests: the audit log's verb and objectRef are parseRequestInfo's (seed ${SEED})`,
    { timeout: 600_000 },
    async (t) => {
      const seen = { compared: 0, refusedByService: 0, unplaceable: 0, watches: 0 };
      let sent = 0;
      const run = await fc.check(
        fc.asyncProperty(requestCase, async (c) => {
          let parsed: ReturnType<typeof kubePathOf>;
          try {
            parsed = kubePathOf(rawUrlOf(c));
          } catch {
            seen.refusedByService++; // an empty, '.', '..' or encoded-slash segment: never sent anywhere
            return;
          }
          let info: RequestInfo | undefined;
          try {
            info = parseRequestInfo(c.method, parsed.path, parsed.query);
          } catch (error) {
            if (!(error instanceof UnplaceableRequestError)) throw error;
          }
          // As the gateway builds the cluster's URL from what the service forwards.
          const target = parsed.forwardPath + (parsed.query.size ? `?${parsed.query}` : '');
          const agent = `${AGENT}${++sent}`;
          const answer = await sendToApiserver(cp, c.method, target, agent);
          const what = `${c.method} ${target} → ${answer.status}`;
          // The apiserver's own "failed to create RequestInfo" (a HEAD has no body to say so: it has no audit event either).
          const unplaceable =
            answer.status === 500 &&
            (c.method === 'HEAD'
              ? (await audit.event(agent, 1500)) === undefined
              : answer.body.includes('failed to create RequestInfo'));
          if (!info) {
            seen.unplaceable++;
            assert.ok(unplaceable, `${what}: the service cannot place it, the apiserver did`);
            return;
          }
          assert.ok(
            !unplaceable,
            `${what}: parsed as ${JSON.stringify(expected(info))}, the apiserver could not place it`,
          );
          const event = await audit.event(agent);
          assert.ok(event, `${what}: no audit event for ${agent}`);
          assert.deepEqual(expected(info), recorded(event), what);
          seen.compared++;
          if (info.verb === 'watch') seen.watches++;
        }),
        { seed: SEED, numRuns: RUNS },
      );
      if (run.failed) {
        const why = run.errorInstance instanceof Error ? run.errorInstance.message : String(run.errorInstance);
        assert.fail(`seed ${SEED}: ${fc.defaultReportMessage(run)}\n${why}`);
      }
      t.diagnostic(JSON.stringify(seen));
      // The generators reach what matters: most requests compared, watches among them, some refused and unplaceable.
      assert.ok(seen.compared >= RUNS / 2, JSON.stringify(seen));
      assert.ok(seen.watches >= 10, JSON.stringify(seen));
    },
  );
});
