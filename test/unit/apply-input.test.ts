// Apply's pure parts: the documents of a body (YAML within bounds, JSON shapes), the field manager,
// the PATCH request of each patch kind, and what a result shows of an object (noise out, Secret values
// hidden, a unified diff).
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { HttpException } from '@nestjs/common';
import { comparable, HIDDEN, redactSecret, scrub, secretValuesOf, unifiedDiff } from '../../src/apply/apply-diff.js';
import { defaultFieldManager, documentsOf, MAX_APPLY_DOCUMENTS, patchRequest } from '../../src/apply/apply-input.js';
import type { Caller } from '../../src/auth/caller.js';
import { INLINE_YAML_CHARS } from '../../src/common/yaml-thread.js';

async function problemsOf(work: () => Promise<unknown>): Promise<string> {
  try {
    await work();
  } catch (error) {
    assert.ok(error instanceof HttpException, String(error));
    assert.equal(error.getStatus(), 400);
    return ([] as string[]).concat((error.getResponse() as { message: string[] }).message).join('; ');
  }
  assert.fail('expected a 400');
}

const caller = (kind: Caller['kind'], name: string) => ({ kind, name }) as Caller;

describe('apply input', () => {
  test('a YAML stream: its documents with their lines, a List flattened, empty documents left out', async () => {
    const docs = await documentsOf(
      'apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\n---\n# a comment\napiVersion: v1\nkind: List\nitems:\n  - {kind: ConfigMap, metadata: {name: b}}\n  - {kind: ConfigMap, metadata: {name: c}}\n',
    );
    assert.deepEqual(
      docs.map((d) => [d.index, d.line, (d.object as { metadata: { name: string } }).metadata.name]),
      [
        [1, 1, 'a'],
        [2, 7, 'b'],
        [3, 7, 'c'],
      ],
    );
  });

  test('a large YAML body is parsed on a worker thread, with the same results and problems', async () => {
    const doc = (i: number) =>
      `apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c${i}\ndata:\n  k: "${'v'.repeat(200)}"\n`;
    const stream = Array.from({ length: 400 }, (_, i) => doc(i)).join('---\n');
    assert.ok(stream.length > INLINE_YAML_CHARS);
    const docs = await documentsOf(stream);
    assert.equal(docs.length, 400);
    assert.deepEqual(docs[399], {
      object: { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'c399' }, data: { k: 'v'.repeat(200) } },
      index: 400,
      line: 2794,
    });
    assert.match(
      await problemsOf(async () => documentsOf(`${stream}---\na: [1\n`)),
      /not valid YAML: .* at line 2802, column 1/,
    );
  });

  test('JSON: an object, an array, a List', async () => {
    assert.equal((await documentsOf({ kind: 'ConfigMap' })).length, 1);
    assert.equal((await documentsOf([{ kind: 'A' }, { kind: 'B' }])).length, 2);
    assert.equal((await documentsOf({ kind: 'ConfigMapList', items: [{}, {}, {}] })).length, 3);
  });

  test('refused for the request: no document, too many, invalid YAML (the line named), hostile YAML', async () => {
    assert.match(await problemsOf(async () => documentsOf(undefined)), /no documents/);
    assert.match(await problemsOf(async () => documentsOf([])), /no documents/);
    const many = Array.from({ length: MAX_APPLY_DOCUMENTS + 1 }, () => ({}));
    assert.match(await problemsOf(async () => documentsOf(many)), /501 documents: at most 500/);
    assert.match(
      await problemsOf(async () => documentsOf('a: 1\nb: [1, 2\nc: 3\n')),
      /not valid YAML: .* at line \d+, column \d+/,
    );
    assert.match(await problemsOf(async () => documentsOf('a: 1\na: 2\n')), /Map keys must be unique at line 2/);
    assert.match(
      await problemsOf(async () => documentsOf(`a: ${'{'.repeat(65)}`)),
      /nests \[ or \{ deeper than 64 levels at line 1/,
    );
    assert.match(
      await problemsOf(async () => documentsOf(`x: 1\n${'- '.repeat(129)}y\n`)),
      /indented deeper than 256 columns at line 2/,
    );
    assert.match(
      await problemsOf(async () => documentsOf(`${'- [a]\n'.repeat(100_001)}`)),
      /more than 100000 lines and list items|opens more than 100000 lists and mappings/,
    );
    const bomb = ['a: &a [x, x, x, x, x, x, x, x, x]'];
    for (const [name, previous] of [
      ['b', 'a'],
      ['c', 'b'],
      ['d', 'c'],
      ['e', 'd'],
    ]) {
      bomb.push(`${name}: &${name} [${Array(9).fill(`*${previous}`).join(', ')}]`);
    }
    assert.match(
      await problemsOf(async () => documentsOf(bomb.join('\n'))),
      /too many aliases in the document at line 1/,
    );
  });

  test('the field manager: cas:<username>, cas:key:<name>, at most 128 characters', () => {
    assert.equal(defaultFieldManager(caller('user', 'alice')), 'cas:alice');
    assert.equal(defaultFieldManager(caller('apiKey', 'ci')), 'cas:key:ci');
    assert.equal(defaultFieldManager(caller('user', 'x'.repeat(300))).length, 128);
  });

  test('PATCH: apply takes YAML or JSON and the caller as manager; force needs apply', async () => {
    const yaml = await patchRequest(
      caller('user', 'alice'),
      'kind: ConfigMap\nmetadata: {name: a}\n',
      { patchType: 'apply' },
      undefined,
    );
    assert.equal(yaml.contentType, 'application/apply-patch+yaml');
    assert.deepEqual(JSON.parse(yaml.body.toString()), { kind: 'ConfigMap', metadata: { name: 'a' } });
    assert.deepEqual(yaml.query, { fieldManager: 'cas:alice' });
    const named = await patchRequest(
      caller('user', 'alice'),
      { kind: 'X' },
      { fieldManager: 'ci', force: true },
      'application/apply-patch+yaml',
    );
    assert.deepEqual(named.query, { fieldManager: 'ci', force: true });
    const merge = await patchRequest(caller('user', 'alice'), { data: {} }, { patchType: 'merge' }, undefined);
    assert.deepEqual(merge.query, {}, 'no field manager added to other patches');
    assert.match(
      await problemsOf(async () => patchRequest(caller('user', 'a'), { data: {} }, { force: true }, undefined)),
      /force needs patchType=apply/,
    );
    assert.match(
      await problemsOf(async () =>
        patchRequest(caller('user', 'a'), 'a: 1\n---\nb: 2\n', { patchType: 'apply' }, undefined),
      ),
      /one YAML document/,
    );
    assert.match(
      await problemsOf(async () => patchRequest(caller('user', 'a'), [1], { patchType: 'apply' }, undefined)),
      /the object to apply/,
    );
  });
});

describe('what a result shows', () => {
  const secret = (password: string) => ({
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: {
      name: 's',
      resourceVersion: '7',
      uid: 'u',
      managedFields: [{ manager: 'm', time: 't1', fieldsV1: {} }],
      annotations: { 'kubectl.kubernetes.io/last-applied-configuration': `{"data":{"p":"${password}"}}` },
    },
    data: { p: Buffer.from(password).toString('base64'), q: 'c2FtZQ==' },
  });

  test("a Secret's values are *** everywhere, its keys stay; other kinds are untouched", () => {
    const hidden = redactSecret(secret('hunter22'));
    assert.deepEqual(hidden.data, { p: HIDDEN, q: HIDDEN });
    assert.equal(hidden.metadata.annotations['kubectl.kubernetes.io/last-applied-configuration'], HIDDEN);
    const cm = { apiVersion: 'v1', kind: 'ConfigMap', data: { p: 'x' } };
    assert.equal(redactSecret(cm), cm);
  });

  test('the diff: noise left out, values hidden, a changed value marked; empty when equal', () => {
    const diff = unifiedDiff('ns/secrets/s', secret('hunter22'), {
      ...secret('hunter23'),
      metadata: { ...secret('x').metadata, resourceVersion: '8' },
    });
    assert.match(diff, /^--- a\/ns\/secrets\/s\n\+\+\+ b\/ns\/secrets\/s\n/);
    assert.match(diff, /^-\s+p: "\*\*\*"$/m);
    assert.match(diff, /^\+\s+p: "\*\*\* \(changed\)"$/m);
    assert.doesNotMatch(diff, /hunter|aHVudGVy|resourceVersion|managedFields|uid/);
    assert.equal(
      unifiedDiff('x', secret('a'), { ...secret('a'), metadata: { ...secret('a').metadata, resourceVersion: '9' } }),
      '',
    );
    assert.match(unifiedDiff('x', null, { kind: 'ConfigMap' }), /^--- \/dev\/null\n\+\+\+ b\/x\n/);
  });

  test('unchanged compares values and field owners, not the times of writes', () => {
    const later = {
      ...secret('a'),
      metadata: { ...secret('a').metadata, managedFields: [{ manager: 'm', time: 't2', fieldsV1: {} }] },
    };
    assert.equal(comparable(secret('a')), comparable(later));
    assert.notEqual(comparable(secret('a')), comparable(secret('b')), 'a changed Secret value is a change');
    const owners = {
      ...secret('a'),
      metadata: { ...secret('a').metadata, managedFields: [{ manager: 'other', fieldsV1: {} }] },
    };
    assert.notEqual(comparable(secret('a')), comparable(owners));
  });

  test("a Secret document's values, in every form, are scrubbed from the cluster's messages", () => {
    const doc = {
      apiVersion: 'v1',
      kind: 'Secret',
      stringData: { a: 'plain-value' },
      data: { b: Buffer.from('decoded-value').toString('base64') },
    };
    const values = secretValuesOf(doc);
    const status = {
      message: `bad plain-value, ${Buffer.from('plain-value').toString('base64')}, decoded-value, ${doc.data.b}`,
      details: { causes: [{ message: 'plain-value' }] },
    };
    const clean = JSON.stringify(scrub(status, values));
    assert.doesNotMatch(clean, /plain-value|decoded-value|cGxhaW4tdmFsdWU|ZGVjb2RlZC12YWx1ZQ/);
    assert.deepEqual(secretValuesOf({ kind: 'ConfigMap', data: { a: 'x' } }), []);
  });
});
