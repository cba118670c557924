import assert from 'node:assert/strict';
import { test } from 'node:test';
import { FieldSelectorError, fieldValues, matchesFields, parseFieldSelector } from '../../src/k8s/field-selector.js';
import { compareValues } from '../../src/lists/sort-index.js';

const pod = {
  metadata: { name: 'web-0', namespace: 'shop' },
  spec: { nodeName: 'node-a', restartPolicy: 'Always' },
  status: { phase: 'Running', podIPs: [{ ip: '10.0.0.7' }] },
};
const entry = (o: typeof pod, id = 'pods') => ({
  name: o.metadata.name,
  namespace: o.metadata.namespace,
  fields: fieldValues(id, o),
});

test('terms `=`, `==`, `!=` joined by commas, on the fields the apiserver selects pods by', () => {
  const e = entry(pod);
  const cases: [string, boolean][] = [
    ['', true],
    ['metadata.name=web-0', true],
    ['metadata.name==web-1', false],
    ['metadata.namespace!=shop', false],
    ['status.phase=Running,spec.nodeName=node-a', true],
    ['status.podIP=10.0.0.7', true],
    ['spec.schedulerName=', true], // absent: the empty string, as the apiserver
    ['status.nominatedNodeName!=', false],
  ];
  for (const [selector, want] of cases)
    assert.equal(matchesFields(parseFieldSelector(selector, 'pods'), e), want, selector);
});

test('escaped commas and equals in values; bad escapes and unsupported fields are refused with the apiserver’s words', () => {
  const terms = parseFieldSelector('metadata.name=a\\,b\\=c', 'configmaps');
  assert.deepEqual(terms, [{ field: 'metadata.name', value: 'a,b=c', negated: false }]);
  for (const [selector, message] of [
    ['spec.nodeName=a', /field label not supported: spec\.nodeName/], // not on configmaps
    ['metadata.name', /invalid selector: 'metadata.name'; can't understand 'metadata.name'/],
    ['metadata.name=a\\x', /invalid escape sequence/],
    ['metadata.name=a=b', /unescaped character in value/],
  ] as const) {
    assert.throws(
      () => parseFieldSelector(selector, 'configmaps'),
      (e: unknown) => e instanceof FieldSelectorError && message.test(e.message),
    );
  }
});

test('type fields are computed as the apiserver computes them', () => {
  assert.deepEqual(fieldValues('nodes', { spec: {} }), { 'spec.unschedulable': 'false' });
  assert.deepEqual(fieldValues('jobs.batch', { status: { succeeded: 2 } }), { 'status.successful': '2' });
  assert.deepEqual(fieldValues('replicasets.apps', {}), { 'status.replicas': '0' });
  assert.equal(fieldValues('configmaps', {}), undefined);
});

test('sort order: absent first, then booleans, numbers, strings; times as text sort by time', () => {
  const values = ['2026-01-02T00:00:00Z', 3, null, true, '2025-12-31T23:59:59Z', false, 10];
  assert.deepEqual([...values].sort(compareValues), [
    null,
    false,
    true,
    3,
    10,
    '2025-12-31T23:59:59Z',
    '2026-01-02T00:00:00Z',
  ]);
});
