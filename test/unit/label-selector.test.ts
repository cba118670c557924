import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { LabelSelectorError, matchesLabels, parseLabelSelector } from '../../src/k8s/label-selector.js';

const matches = (selector: string, labels?: Record<string, string>) =>
  matchesLabels(parseLabelSelector(selector), labels);

test('every operator matches as the apiserver does', () => {
  const labels = { app: 'web', tier: 'front', replicas: '3', 'example.com/team': 'a' };
  const table: [string, boolean][] = [
    ['', true],
    ['app=web', true],
    ['app==web', true],
    ['app=api', false],
    ['app!=api', true],
    ['app!=web', false],
    ['missing!=x', true],
    ['missing=x', false],
    ['app in (api,web)', true],
    ['app in (api)', false],
    ['missing in (x)', false],
    ['app notin (api)', true],
    ['app notin (web,api)', false],
    ['missing notin (x)', true],
    ['app', true],
    ['missing', false],
    ['!missing', true],
    ['!app', false],
    ['replicas>2', true],
    ['replicas>3', false],
    ['replicas<4', true],
    ['replicas<3', false],
    ['app>1', false], // not an integer on the object: no match
    ['missing<9', false],
    ['example.com/team=a', true],
    ['app=web,tier=front', true],
    ['app=web,tier=back', false],
    ['app=web,!missing,replicas>0,tier in (front)', true],
    ['missing=', false],
    ['missing!=', true],
  ];
  for (const [selector, want] of table) {
    assert.equal(matches(selector, labels), want, selector);
  }
});

test('an empty value matches an empty label, and `in ()` means the empty value', () => {
  assert.equal(matches('a=', { a: '' }), true);
  assert.equal(matches('a in ()', { a: '' }), true);
  assert.equal(matches('a in ()', { a: 'x' }), false);
  assert.equal(matches('a in (,x)', { a: '' }), true);
  assert.equal(matches('a in (x,)', { a: '' }), true);
  assert.equal(matches('a in (x,,y)', { a: '' }), true);
  assert.deepEqual(parseLabelSelector('a in (y,x,y)').requirements[0].values, ['x', 'y']);
});

test('objects without labels match only selectors that ask for absence', () => {
  assert.equal(matches('a', undefined), false);
  assert.equal(matches('!a', undefined), true);
  assert.equal(matches('a!=b', undefined), true);
  assert.equal(matches('a notin (b)', undefined), true);
  assert.equal(matches('a=b', {}), false);
});

test('whitespace separates tokens and is otherwise ignored; `in` and `notin` can be keys and values', () => {
  assert.equal(matches('  app  =  web ,\ttier\n!=\rback ', { app: 'web', tier: 'front' }), true);
  assert.equal(matches('app in(web)', { app: 'web' }), true);
  assert.equal(matches('in=notin', { in: 'notin' }), true);
  assert.equal(matches('a in (in,notin)', { a: 'in' }), true);
  assert.deepEqual(
    parseLabelSelector('b=1,a').requirements.map((r) => r.key),
    ['a', 'b'],
  );
});

test('Gt and Lt compare as 64-bit integers', () => {
  assert.equal(matches('n>9223372036854775806', { n: '9223372036854775807' }), true);
  assert.equal(matches('n<10', { n: '9' }), true);
  assert.equal(matches('n<10', { n: '0010' }), false);
  assert.equal(matches('n>1', { n: '99999999999999999999' }), false); // out of int64 on the object
});

test('selectors the apiserver refuses are refused with its message', () => {
  const table: [string, RegExp][] = [
    ['a b', /found 'b', expected: '=', '!=', '==', 'in', notin'/],
    ['a=b,', /found '', expected: identifier after ','/],
    [',a', /found ',', expected: !, identifier, or 'end of string'/],
    ['=a', /found '=', expected: !, identifier, or 'end of string'/],
    ['a in b', /unable to parse requirement: found 'b' expected: '\('/],
    ['a in (b', /found '', expected: ',' or '\)'/],
    ['a notin', /found '' expected: '\('/],
    ['a>b', /for 'Gt', 'Lt' operators, the value must be an integer/],
    ['a>', /for 'Gt', 'Lt' operators, the value must be an integer/],
    ['a>99999999999999999999', /the value must be an integer/],
    ['a>-1', /invalid label value: "-1": at key: "a"/],
    ['a=b=c', /found '=', expected: ',' or 'end of string'/],
    ['a==', /^(?!x)/], // valid: empty value, checked below
    ['!a=b', /found '=', expected: ',' or 'end of string'/],
    ['a=(b)', /found '\(', expected: identifier/],
    ['-a=b', /invalid label key "-a"/],
    ['a/b/c', /a qualified name must consist of/],
    ['/a', /prefix part must be non-empty/],
    ['Example.com/a', /prefix part a lowercase RFC 1123 subdomain/],
    [`${'k'.repeat(64)}=v`, /name part must be no more than 63 characters/],
    [`a=${'v'.repeat(64)}`, /must be no more than 63 characters/],
    ['a=b c', /found 'c', expected: ',' or 'end of string'/],
    ['a in (b c)', /found 'c', expected: ',' or '\)'/],
    ['a=é', /invalid label value/],
    ['a!b', /found '!', expected: '=', '!=', '==', 'in', notin'/],
    ['a<>1', /found '>', expected: identifier/],
  ];
  for (const [selector, message] of table) {
    if (selector === 'a==') {
      assert.equal(matches(selector, { a: '' }), true);
      continue;
    }
    assert.throws(
      () => parseLabelSelector(selector),
      (error: unknown) => {
        assert.ok(error instanceof LabelSelectorError, selector);
        assert.match(error.message, message, selector);
        return true;
      },
    );
  }
});

test('a NUL ends the selector, as in the apiserver lexer', () => {
  assert.equal(matches('a=b\0 garbage', { a: 'b' }), true);
});

// ---- properties ----

const name = fc.stringMatching(/^[a-z0-9]([-a-z0-9_.]{0,10}[a-z0-9])?$/);
const key = fc.oneof(
  name,
  fc.tuple(fc.stringMatching(/^[a-z0-9]{1,5}(\.[a-z0-9]{1,5})?$/), name).map(([p, n]) => `${p}/${n}`),
);
const value = fc.oneof(fc.constant(''), name);
const ws = fc.constantFrom('', ' ', '  ', '\t', '\n');

type Req =
  | { op: 'exists' | '!'; key: string }
  | { op: '=' | '==' | '!='; key: string; value: string }
  | { op: 'in' | 'notin'; key: string; values: string[] }
  | { op: 'gt' | 'lt'; key: string; n: number };

const requirement: fc.Arbitrary<Req> = fc.oneof(
  fc.record({ op: fc.constantFrom('exists' as const, '!' as const), key }),
  fc.record({ op: fc.constantFrom('=' as const, '==' as const, '!=' as const), key, value }),
  fc.record({
    op: fc.constantFrom('in' as const, 'notin' as const),
    key,
    values: fc.array(name, { minLength: 1, maxLength: 3 }),
  }),
  fc.record({ op: fc.constantFrom('gt' as const, 'lt' as const), key, n: fc.nat(1000) }),
);

function render(r: Req, s: string): string {
  switch (r.op) {
    case 'exists':
      return `${s}${r.key}${s}`;
    case '!':
      return `${s}!${s}${r.key}${s}`;
    case '=':
    case '==':
    case '!=':
      return `${s}${r.key}${s}${r.op}${s}${r.value}${s}`;
    case 'in':
    case 'notin':
      return `${s}${r.key} ${r.op}${s}(${s}${r.values.join(`${s},${s}`)}${s})${s}`;
    case 'gt':
    case 'lt':
      return `${s}${r.key}${s}${r.op === 'gt' ? '>' : '<'}${s}${r.n}${s}`;
  }
}

/** The meaning of a requirement written out plainly, independent of the parser. */
function holds(r: Req, labels: Record<string, string>): boolean {
  const v = Object.prototype.hasOwnProperty.call(labels, r.key) ? labels[r.key] : undefined;
  switch (r.op) {
    case 'exists':
      return v !== undefined;
    case '!':
      return v === undefined;
    case '=':
    case '==':
      return v === r.value;
    case '!=':
      return v !== r.value;
    case 'in':
      return v !== undefined && r.values.includes(v);
    case 'notin':
      return v === undefined || !r.values.includes(v);
    case 'gt':
      return v !== undefined && /^[0-9]+$/.test(v) && Number(v) > r.n;
    case 'lt':
      return v !== undefined && /^[0-9]+$/.test(v) && Number(v) < r.n;
  }
}

test('property: any rendering of valid requirements parses and matches as their plain meaning', () => {
  const labelValue = fc.oneof(value, fc.nat(2000).map(String));
  fc.assert(
    fc.property(
      fc.array(requirement, { minLength: 1, maxLength: 5 }),
      ws,
      fc.array(fc.tuple(key, labelValue), { maxLength: 6 }),
      (reqs, s, extra) => {
        // Labels that often hit the requirements' keys and values.
        const labels: Record<string, string> = Object.fromEntries(extra);
        for (const [i, r] of reqs.entries()) {
          if (i % 2 === 0) continue;
          if ('value' in r) labels[r.key] = r.value;
          else if ('values' in r) labels[r.key] = r.values[0];
          else if ('n' in r) labels[r.key] = String(r.n + (i % 3) - 1);
        }
        const selector = parseLabelSelector(reqs.map((r) => render(r, s)).join(','));
        assert.equal(selector.requirements.length, reqs.length);
        assert.equal(
          matchesLabels(selector, labels),
          reqs.every((r) => holds(r, labels)),
        );
      },
    ),
    { numRuns: 2000 },
  );
});

test('property: any text either parses or fails with a LabelSelectorError, never another error', () => {
  const text = fc.array(
    fc.constantFrom('a', 'b', '=', '!', '(', ')', ',', ' ', '<', '>', '1', 'in', 'notin', '/', '-', '.'),
    {
      maxLength: 20,
    },
  );
  fc.assert(
    fc.property(text, (parts) => {
      try {
        const selector = parseLabelSelector(parts.join(''));
        matchesLabels(selector, { a: '1', b: '' });
      } catch (error) {
        assert.ok(error instanceof LabelSelectorError, String(error));
      }
    }),
    { numRuns: 5000 },
  );
});
