// Issue 9: the worst inputs of the review's findings, each sent while the event loop's delay is
// measured (perf_hooks.monitorEventLoopDelay). Nothing within the limits may hold the loop for more
// than 100 ms. The machine is shared and noisy, so each input is measured three times and the
// smallest of the three counts, above the same figure for GET /healthz. What counts of one try is the
// worst delay, but at most the CPU time the process spent meanwhile: work that holds the loop spends
// CPU, while a loop delayed because the machine gave the process no core (the CI runs two test files
// at once beside two control planes) spends none. A delay of 114 ms was seen that way for an input
// that takes 35 ms alone.
import assert from 'node:assert/strict';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, describe, test } from 'node:test';
import { KUBECONFIG_LIMITS } from '../../src/clusters/kubeconfig.js';
import { startTestApp, type TestApp } from '../support/app.js';
import { signedIn } from '../support/factories.js';
import { b64, kubeconfigYaml, testCertificates } from '../support/kubeconfigs.js';

const LIMIT_MS = 100;
const MIB = 1024 * 1024;

interface Input {
  name: string;
  method: 'GET' | 'POST' | 'PUT';
  url: string;
  body?: string;
  /** The body's bytes, encoded once beforehand: the test's own encoding is not the service's work. */
  payload?: Buffer;
  auth?: boolean;
  headers?: Record<string, string>;
  /** The status the service answers: the input is refused (or served) as designed. */
  status: number;
}

describe('event-loop guard: the worst inputs do not block the loop', () => {
  let t: TestApp;
  let token: string;
  let userId: number;
  let inputs: Input[];
  const results: string[] = [];

  before(async () => {
    t = await startTestApp({ env: { CAS_CLUSTER_HEALTH_INTERVAL_SECONDS: '0', CAS_CLUSTER_PROBE_TIMEOUT_MS: '100' } });
    const admin = await signedIn(t, 'admin');
    token = admin.token;
    userId = admin.id;
    const certs = await testCertificates();
    const ca = certs.caData.trim();
    const fullBundle = Array(KUBECONFIG_LIMITS.maxCertificatesPerField).fill(ca).join('\n');
    const bigKeys = ['apiVersion: v1', 'kind: Config'];
    while (bigKeys.length < KUBECONFIG_LIMITS.maxNodes - 1) bigKeys.push(`k${bigKeys.length}: v`);
    const contexts = Math.floor(KUBECONFIG_LIMITS.maxCertificates / KUBECONFIG_LIMITS.maxCertificatesPerField);
    const manyCerts = kubeconfigYaml(
      Array.from({ length: contexts }, (_, i) => ({
        name: `c${i}`,
        cluster: { server: 'https://127.0.0.1:1', 'certificate-authority-data': b64(fullBundle) },
        user: { token: 'x' },
      })),
    );
    const longUrl = 'http://a' + 'a'.repeat(100_000) + ' ';
    const json = { 'content-type': 'application/json' };
    const nestedArrays = (bytes: number) => '[' + '[],'.repeat(Math.floor(bytes / 3) - 1) + '[]]';
    inputs = [
      { name: 'GET /healthz (baseline)', method: 'GET', url: '/healthz', status: 200 },
      {
        name: 'finding 3: anonymous 10 MiB [[],[],…] to a resource route',
        method: 'POST',
        url: '/api/v1/configmaps/default',
        body: nestedArrays(10 * MIB),
        headers: json,
        status: 401,
      },
      {
        name: 'finding 4: avatar_url of 100,000 characters',
        method: 'PUT',
        url: `/api/v1/admin/users/${userId}`,
        body: JSON.stringify({ avatar_url: longUrl }),
        auth: true,
        status: 400,
      },
      {
        name: 'finding 4: metricsURL of 100,000 characters',
        method: 'POST',
        url: '/api/v1/admin/clusters',
        body: JSON.stringify({ name: 'm', inCluster: true, metricsURL: longUrl }),
        auth: true,
        status: 400,
      },
      {
        name: 'finding 5: 1 MiB of [[[[ to login',
        method: 'POST',
        url: '/api/v1/auth/login',
        body: '['.repeat(MIB - 10),
        status: 400,
      },
      {
        name: 'finding 5: 10 MiB nested too deep at its very end, to a resource route',
        method: 'POST',
        url: '/api/v1/configmaps/default',
        body: '{"a":"' + 'x'.repeat(10 * MIB - 200) + '","b":' + '['.repeat(70) + ']'.repeat(70) + '}',
        auth: true,
        status: 400,
      },
      {
        name: 'finding 8: 1 MiB + 1 through an encoded admin path',
        method: 'POST',
        url: '/api/v1/%61uth/login',
        body: JSON.stringify({ username: 'x', password: 'y'.repeat(MIB) }),
        status: 413,
      },
      {
        name: 'finding 11: a 520 KB [[[[ kubeconfig',
        method: 'POST',
        url: '/api/v1/admin/clusters',
        body: JSON.stringify({ name: 'k1', config: '['.repeat(250_000) + ']'.repeat(250_000) }),
        auth: true,
        status: 400,
      },
      {
        name: `finding 11: a kubeconfig of ${KUBECONFIG_LIMITS.maxNodes - 1} keys (just within the bound)`,
        method: 'POST',
        url: '/api/v1/admin/clusters',
        body: JSON.stringify({ name: 'k2', config: bigKeys.join('\n') }),
        auth: true,
        status: 400,
      },
      {
        name: `finding 11: ${contexts * KUBECONFIG_LIMITS.maxCertificatesPerField} CA certificates (the document's bound)`,
        method: 'POST',
        url: '/api/v1/admin/clusters/import',
        body: JSON.stringify({ config: manyCerts }),
        auth: true,
        status: 201,
      },
    ].map(
      (i) =>
        ({
          ...i,
          headers: { ...json, ...i.headers },
          payload: i.body === undefined ? undefined : Buffer.from(i.body, 'utf8'),
        }) as Input,
    );
  });
  after(async () => {
    console.log(results.join('\n'));
    await t.close();
  });

  /**
   * The worst loop delay while one request is handled, but at most the process's CPU time (user and
   * system, every thread) meanwhile, in ms.
   */
  async function worstDelay(input: Input): Promise<number> {
    const histogram = monitorEventLoopDelay({ resolution: 5 });
    histogram.enable();
    await sleep(20); // the histogram samples on a timer: let it start, and record after the request
    const cpuBefore = process.cpuUsage();
    const res = await t.app.inject({
      method: input.method,
      url: input.url,
      payload: input.payload,
      headers: { ...input.headers, ...(input.auth ? { authorization: `Bearer ${token}` } : {}) },
    });
    const cpu = process.cpuUsage(cpuBefore);
    await sleep(20);
    histogram.disable();
    assert.equal(res.statusCode, input.status, `${input.name}: ${res.body.slice(0, 300)}`);
    if (input.url.endsWith('/import')) {
      // Let the next round import again.
      await t.dataSource.query('DELETE FROM clusters');
    }
    return Math.min(histogram.max / 1e6, (cpu.user + cpu.system) / 1000);
  }

  test('each worst input, measured three times: the smallest worst delay (at most the CPU spent) stays under 100 ms above the baseline', async (ctx) => {
    const measure = async (input: Input) =>
      Math.min(await worstDelay(input), await worstDelay(input), await worstDelay(input));
    const baseline = await measure(inputs[0]);
    const failures: string[] = [];
    for (const input of inputs.slice(1)) {
      const ms = await measure(input);
      const line = `event loop: ${input.name}: ${ms.toFixed(1)} ms (baseline ${baseline.toFixed(1)} ms)`;
      results.push(line);
      ctx.diagnostic(line);
      if (ms > baseline + LIMIT_MS) failures.push(line);
    }
    assert.deepEqual(failures, []);
  });
});
