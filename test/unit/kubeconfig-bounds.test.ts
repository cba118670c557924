// Finding 11 of issue 9: kubeconfig checks must not hold the event loop. Each document below is
// refused with a problem naming the bound, quickly; before the bounds, they took seconds (or were
// accepted after seconds of certificate parsing).
import assert from 'node:assert/strict';
import { before, describe, test } from 'node:test';
import { allContexts, KUBECONFIG_LIMITS, KubeconfigError, selectContext } from '../../src/clusters/kubeconfig.js';
import { b64, kubeconfigYaml, testCertificates, type ContextSpec } from '../support/kubeconfigs.js';

let certs: Awaited<ReturnType<typeof testCertificates>>;

/**
 * The problems of a refused document and the CPU time the check took (the check is synchronous: its CPU time is its
 * work, which the other processes of a busy machine do not inflate as they do the wall-clock time).
 */
function refused(text: string, select: (t: string) => unknown = selectContext): { problems: string[]; ms: number } {
  const started = process.cpuUsage();
  try {
    select(text);
  } catch (error) {
    assert.ok(error instanceof KubeconfigError, `a KubeconfigError, got ${String(error)}`);
    const used = process.cpuUsage(started);
    return { problems: error.problems, ms: (used.user + used.system) / 1000 };
  }
  assert.fail('expected the kubeconfig to be refused');
}

function context(name: string, caBundle: string): ContextSpec {
  return {
    name,
    cluster: { server: 'https://127.0.0.1:6443', 'certificate-authority-data': b64(caBundle) },
    user: { token: 'a-token' },
  };
}

// Generous: the machine is shared; the unbounded versions took 1.5–6 s here.
const QUICK_MS = 500;

describe('kubeconfig bounds', () => {
  before(async () => {
    certs = await testCertificates();
  });

  test('deep flow nesting ([[[[… 520 KB) is refused before YAML parsing', () => {
    const { problems, ms } = refused('['.repeat(260_000) + ']'.repeat(260_000));
    assert.deepEqual(problems, [`config nests [ or { deeper than ${KUBECONFIG_LIMITS.maxFlowDepth} levels`]);
    assert.ok(ms < QUICK_MS, `took ${Math.round(ms)} ms`);
  });

  test('nesting hidden behind a quote or a comment character is still seen', () => {
    const deep = '['.repeat(KUBECONFIG_LIMITS.maxFlowDepth + 1);
    // In flow context `x'` is a plain scalar and `#` without a space before it is not a comment.
    for (const text of [`a: [x'${deep}`, `a: [x#${deep}`]) {
      assert.match(refused(text).problems[0], /nests \[ or \{ deeper/);
    }
    // Brackets inside a real quoted string are text, not nesting.
    const quoted = `a: '${deep}'\nb: "${deep}"\n`;
    assert.doesNotMatch(refused(quoted).problems.join(' '), /nests/);
  });

  test('compact nested sequences (- - - - …) are refused', () => {
    const { problems, ms } = refused('- '.repeat(170_000) + '1');
    assert.deepEqual(problems, [`config is indented deeper than ${KUBECONFIG_LIMITS.maxIndent} columns`]);
    assert.ok(ms < QUICK_MS, `took ${Math.round(ms)} ms`);
  });

  test('a document of tens of thousands of keys is refused without parsing (yaml checks keys pairwise)', () => {
    let text = '';
    for (let i = 0; text.length < 500_000; i++) text += `k${i}: v\n`;
    const { problems, ms } = refused(text);
    assert.deepEqual(problems, [`config has more than ${KUBECONFIG_LIMITS.maxNodes} lines and list items`]);
    assert.ok(ms < QUICK_MS, `took ${Math.round(ms)} ms`);
  });

  test('a document over the size bound is refused', () => {
    const { problems } = refused('a: ' + 'x'.repeat(KUBECONFIG_LIMITS.maxLength));
    assert.deepEqual(problems, [`config is larger than ${KUBECONFIG_LIMITS.maxLength} characters`]);
  });

  test('a CA field with 13,500 certificates is refused without parsing them', () => {
    const bundle = Array(13_500).fill(certs.caData.trim()).join('\n');
    const { problems, ms } = refused(kubeconfigYaml([context('many', bundle)]).replace(/^/, ''), (t) =>
      // The document is far over the size bound too; check the certificate bound on its own.
      selectContextUnsized(t),
    );
    assert.deepEqual(problems, [
      `clusters[0].cluster.certificate-authority-data holds more than ${KUBECONFIG_LIMITS.maxCertificatesPerField} certificates`,
    ]);
    assert.ok(ms < QUICK_MS * 4, `took ${Math.round(ms)} ms`);
  });

  test('up to the per-field bound is fine; the whole document has a bound of its own', () => {
    const full = Array(KUBECONFIG_LIMITS.maxCertificatesPerField).fill(certs.caData.trim()).join('\n');
    assert.equal(selectContext(kubeconfigYaml([context('full', full)])).name, 'full');
    const contexts = Math.floor(KUBECONFIG_LIMITS.maxCertificates / KUBECONFIG_LIMITS.maxCertificatesPerField) + 1;
    const doc = kubeconfigYaml(Array.from({ length: contexts }, (_, i) => context(`c${i}`, full)));
    const problems = refused(doc, allContexts).problems;
    assert.ok(
      problems.includes(`config holds more than ${KUBECONFIG_LIMITS.maxCertificates} certificates`),
      problems.join('; '),
    );
  });

  test('more than the bound of contexts is refused', () => {
    const doc = kubeconfigYaml(
      Array.from({ length: KUBECONFIG_LIMITS.maxEntries + 1 }, (_, i) => context(`c${i}`, certs.caData)),
    );
    const problems = refused(doc, allContexts).problems;
    assert.ok(problems.includes(`contexts has more than ${KUBECONFIG_LIMITS.maxEntries} entries`), problems.join('; '));
  });

  test('duplicate keys are still refused (found in one pass, not pairwise)', () => {
    const doc = kubeconfigYaml([context('dup', certs.caData)]).replace(
      'current-context:',
      'kind: Config\ncurrent-context:',
    );
    assert.match(refused(doc).problems[0], /Map keys must be unique at line \d+/);
  });
});

/** selectContext with the size bound lifted, to show the certificate bound holds on its own. */
function selectContextUnsized(text: string): unknown {
  const saved = KUBECONFIG_LIMITS.maxLength;
  const savedNodes = KUBECONFIG_LIMITS.maxNodes;
  KUBECONFIG_LIMITS.maxLength = Number.MAX_SAFE_INTEGER;
  KUBECONFIG_LIMITS.maxNodes = Number.MAX_SAFE_INTEGER;
  try {
    return selectContext(text);
  } finally {
    KUBECONFIG_LIMITS.maxLength = saved;
    KUBECONFIG_LIMITS.maxNodes = savedNodes;
  }
}
