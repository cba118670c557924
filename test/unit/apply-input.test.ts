// Apply's pure parts: the documents of a body (YAML within bounds, JSON shapes), the field manager,
// the PATCH request of each patch kind, and what a result shows of an object (noise out, Secret values
// hidden, a unified diff).
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { HttpException } from '@nestjs/common';
import {
  HIDDEN,
  redactSecret,
  sameObjects,
  scrub,
  secretValueProblems,
  secretValuesOf,
  unifiedDiff,
} from '../../src/apply/apply-diff.js';
import { documentsOf, MAX_APPLY_DOCUMENTS, patchRequest } from '../../src/apply/apply-input.js';
import { bindToRead } from '../../src/apply/apply-preconditions.js';
import { diffOf, INLINE_DIFF_BYTES } from '../../src/apply/diff-thread.js';
import { defaultFieldManager, foreignFieldManager } from '../../src/apply/field-manager.js';
import type { Caller } from '../../src/access/caller.js';
import { INLINE_YAML_CHARS, MAX_WAITING_YAML_TEXTS } from '../../src/common/yaml-thread.js';

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

  test('aliases are sized, not counted: a body that expands past the bound is refused naming the line', async () => {
    // A 1.1 MB string used 20 times (under the alias count): 23 MB as JSON. Refused before any copy.
    const big = 'x'.repeat(1_100_000);
    const lines = ['apiVersion: v1', 'kind: ConfigMap', 'metadata: {name: a}', 'data:', `  big: &big ${big}`];
    for (let i = 0; i < 20; i++) lines.push(`  k${i}: *big`);
    assert.match(
      await problemsOf(async () => documentsOf(`${lines.join('\n')}\n`)),
      /^body expands to more than 20971520 characters as JSON \(each alias repeats what it refers to\) in the document at line 1; its first alias is at line 6$/,
    );
    // Small texts (parsed inline) are sized the same way, and across documents.
    const small = (n: number) => `a: &a "${'y'.repeat(1000)}"\nb: [${Array(n).fill('*a').join(', ')}]\n`;
    assert.equal((await documentsOf(small(90))).length, 1);
    const many = Array.from({ length: 250 }, () => small(90)).join('---\n');
    assert.match(
      await problemsOf(async () => documentsOf(many)),
      /expands to more than 20971520 characters .* at line \d+/,
    );
    // A collection that contains itself cannot be sent at all.
    assert.match(
      await problemsOf(async () =>
        documentsOf('apiVersion: v1\nkind: ConfigMap\nmetadata: &m\n  name: a\n  x: [*m]\n'),
      ),
      /alias inside the collection it refers to \(a value that would contain itself\) at line 5/,
    );
    // YAML 1.1's !!binary stays the text it tags (a Buffer would become a far larger JSON).
    const [binary] = await documentsOf('kind: Secret\ndata:\n  k: !!binary aGVsbG8=\n');
    assert.deepEqual(binary.object, { kind: 'Secret', data: { k: 'aGVsbG8=' } });
  });

  test('a large body waits for a parser thread; beyond the queue it is refused at once (503, Retry-After)', async () => {
    const doc = `apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata:\n  k: "${'v'.repeat(INLINE_YAML_CHARS)}"\n`;
    const outcomes = await Promise.allSettled(
      Array.from({ length: 2 + MAX_WAITING_YAML_TEXTS + 3 }, () => documentsOf(doc)),
    );
    const refused = outcomes.filter((o) => o.status === 'rejected');
    assert.equal(outcomes.length - refused.length, 2 + MAX_WAITING_YAML_TEXTS, 'two parse, eight wait their turn');
    assert.equal(refused.length, 3);
    for (const outcome of refused) {
      const error = (outcome as PromiseRejectedResult).reason as HttpException;
      assert.equal(error.getStatus(), 503);
      assert.deepEqual(error.getResponse(), {
        message: 'too many large YAML bodies are being parsed; try again in a moment (or send JSON)',
        retryAfter: 1,
      });
    }
    assert.equal((await documentsOf(doc)).length, 1, 'served again once the queue is free');
  });

  test('the field manager: cas:<username>, cas:key:<name>, at most 128 characters', () => {
    assert.equal(defaultFieldManager(caller('user', 'alice')), 'cas:alice');
    assert.equal(defaultFieldManager(caller('apiKey', 'ci')), 'cas:key:ci');
    assert.equal(defaultFieldManager(caller('user', 'x'.repeat(300))).length, 128);
  });

  test("a caller may write as its own cas: manager or any other manager, never as another's cas: one", async () => {
    const alice = caller('user', 'alice');
    for (const own of [undefined, 'cas:alice', 'ci', 'kubectl', 'helm', 'castle']) {
      assert.equal(foreignFieldManager(alice, [own]), undefined, String(own));
    }
    for (const other of ['cas:admin', 'cas:key:ci', 'CAS:alice2', ' cas:admin', 'cas:']) {
      assert.match(foreignFieldManager(alice, [other]) ?? '', /is not yours: .*'cas:alice'/, other);
    }
    assert.match(foreignFieldManager(alice, ['ci', 'cas:admin']) ?? '', /'cas:admin' is not yours/, 'any of several');
    // An API key writes as itself or as the user it acts for (a minted kubeconfig's key applying as its user).
    const key = { ...caller('apiKey', 'ci'), userName: 'bob' } as Caller;
    assert.equal(foreignFieldManager(key, ['cas:key:ci', 'cas:bob']), undefined);
    assert.match(foreignFieldManager(key, ['cas:ci']) ?? '', /only as 'cas:key:ci' or 'cas:bob'/);
    // A PATCH of any kind is refused (403) before anything is sent.
    await assert.rejects(
      patchRequest(alice, { data: {} }, { patchType: 'merge', fieldManager: 'cas:admin' }, undefined),
      (error: HttpException) => error.getStatus() === 403 && /cas:admin/.test(String(error.message)),
    );
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

/** The diff as a string (these objects are small: never given up on). */
const diffText = (...args: Parameters<typeof unifiedDiff>) => unifiedDiff(...args) ?? assert.fail('no diff');

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
    const hidden = redactSecret(secret('hunter22'), true);
    assert.deepEqual(hidden.data, { p: HIDDEN, q: HIDDEN });
    assert.equal(hidden.metadata.annotations['kubectl.kubernetes.io/last-applied-configuration'], HIDDEN);
    const cm = { apiVersion: 'v1', kind: 'ConfigMap', data: { p: 'x' } };
    assert.equal(redactSecret(cm, false), cm);
  });

  test('the diff: noise left out, values hidden, a changed value marked; empty when equal', () => {
    const diff = diffText(
      'ns/secrets/s',
      secret('hunter22'),
      {
        ...secret('hunter23'),
        metadata: { ...secret('x').metadata, resourceVersion: '8' },
      },
      true,
    );
    assert.match(diff, /^--- a\/ns\/secrets\/s\n\+\+\+ b\/ns\/secrets\/s\n/);
    assert.match(diff, /^-\s+p: "\*\*\*"$/m);
    assert.match(diff, /^\+\s+p: "\*\*\* \(changed\)"$/m);
    assert.doesNotMatch(diff, /hunter|aHVudGVy|resourceVersion|managedFields|uid/);
    assert.equal(
      diffText('x', secret('a'), { ...secret('a'), metadata: { ...secret('a').metadata, resourceVersion: '9' } }, true),
      '',
    );
    assert.match(diffText('x', null, { kind: 'ConfigMap' }, false), /^--- \/dev\/null\n\+\+\+ b\/x\n/);
  });

  test('a large object is diffed on a thread, with the same diff; one that takes too long is said not shown', async () => {
    const configMap = (prefix: string) => ({
      kind: 'ConfigMap',
      metadata: { name: 'big' },
      data: Object.fromEntries(Array.from({ length: 4000 }, (_, i) => [`k${i}`, `${prefix}-${i}-${'v'.repeat(20)}`])),
    });
    const before = configMap('a');
    const after = { ...before, data: { ...before.data, k7: 'changed' } };
    const bytes = JSON.stringify(before).length + JSON.stringify(after).length;
    assert.ok(bytes > INLINE_DIFF_BYTES);
    const onThread = await diffOf({ label: 'ns/configmaps/big', before, after, secret: false }, bytes);
    assert.equal(onThread, diffText('ns/configmaps/big', before, after, false));
    assert.match(onThread, /^- {2}k7: a-7-v+\n\+ {2}k7: changed$/m);
    // Every line changed: more than the time given to find the changes.
    const slow = await diffOf(
      { label: 'ns/configmaps/big', before, after: configMap('b'), secret: false, timeoutMs: 1 },
      bytes,
    );
    assert.equal(
      slow,
      '--- a/ns/configmaps/big\n+++ b/ns/configmaps/big\n# not shown: the changes take too long to find\n',
    );
  });

  test('unchanged compares values and field owners, not the times of writes', () => {
    const later = {
      ...secret('a'),
      metadata: { ...secret('a').metadata, managedFields: [{ manager: 'm', time: 't2', fieldsV1: {} }] },
    };
    assert.ok(sameObjects(secret('a'), later));
    assert.ok(!sameObjects(secret('a'), secret('b')), 'a changed Secret value is a change');
    const owners = {
      ...secret('a'),
      metadata: { ...secret('a').metadata, managedFields: [{ manager: 'other', fieldsV1: {} }] },
    };
    assert.ok(!sameObjects(secret('a'), owners));
    // The apiserver's record of the fields set before the first apply is its bookkeeping, not an owner.
    const recorded = {
      ...secret('a'),
      metadata: {
        ...secret('a').metadata,
        managedFields: [...secret('a').metadata.managedFields, { manager: 'before-first-apply', fieldsV1: {} }],
      },
    };
    assert.ok(sameObjects(secret('a'), recorded));
    // Key order is not a change.
    const reordered = { data: secret('a').data, kind: 'Secret', apiVersion: 'v1', metadata: secret('a').metadata };
    assert.ok(sameObjects(secret('a'), reordered));
  });

  test("a Secret document's values, in every form, are scrubbed from the cluster's messages", () => {
    const doc = {
      apiVersion: 'v1',
      kind: 'Secret',
      stringData: { a: 'plain-value' },
      data: { b: Buffer.from('decoded-value').toString('base64') },
    };
    const values = secretValuesOf(doc, true);
    const status = {
      message: `bad plain-value, ${Buffer.from('plain-value').toString('base64')}, decoded-value, ${doc.data.b}`,
      details: { causes: [{ message: 'plain-value' }] },
    };
    const clean = JSON.stringify(scrub(status, values));
    assert.doesNotMatch(clean, /plain-value|decoded-value|cGxhaW4tdmFsdWU|ZGVjb2RlZC12YWx1ZQ/);
    assert.deepEqual(secretValuesOf({ kind: 'ConfigMap', data: { a: 'x' } }, false), []);
    // Quoted as Go quotes them (strconv.Quote: \a for BEL), and line by line.
    const value = 'say "hi" \\ there\x07';
    const pem = '-----BEGIN KEY-----\nMIIBOgIBAAJBAKj34GkxFhD9\n';
    const echoed = `Invalid value: "say \\"hi\\" \\\\ there\\a", then MIIBOgIBAAJBAKj34GkxFhD9`;
    const scrubbed = scrub({ message: echoed }, secretValuesOf({ stringData: { value, pem } }, true)).message;
    assert.equal(scrubbed, 'Invalid value: "***", then ***');
  });

  test('a Secret whose values are not all strings is refused naming the fields, never the values', () => {
    assert.deepEqual(secretValueProblems({ stringData: { a: 'x' }, data: { b: 'eA==' } }), []);
    assert.deepEqual(secretValueProblems({ data: null }), []);
    const problems = secretValueProblems({
      stringData: { pin: 98765432123, nested: { a: 'hunter22' }, list: ['x'], nothing: null, ok: 's' },
      data: 'aHVudGVyMjI=',
    });
    assert.deepEqual(problems, [
      'data must be a mapping of keys to strings (the value is not shown)',
      'stringData.pin must be a string: quote it (the value is not shown)',
      'stringData.nested must be a string: quote it (the value is not shown)',
      'stringData.list must be a string: quote it (the value is not shown)',
      'stringData.nothing must be a string: quote it (the value is not shown)',
    ]);
    assert.doesNotMatch(problems.join(), /98765432123|hunter22|aHVudGVy/);
  });

  test('a caller allowed one of create and patch is bound to what it read', () => {
    const doc = { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'a' }, data: { k: 'v' } };
    const live = { ...doc, metadata: { name: 'a', uid: 'uid-1', resourceVersion: '5' } };
    const both = { create: true, patch: true };
    assert.deepEqual(bindToRead(doc, null, both), { object: doc, binding: null });
    assert.deepEqual(bindToRead(doc, live, both), { object: doc, binding: null });
    const createOnly = bindToRead(doc, null, { create: true, patch: false });
    assert.equal(createOnly.binding, 'absent');
    assert.equal(createOnly.object.metadata.resourceVersion, '18446744073709551615');
    assert.equal(doc.metadata.name, 'a', 'the document itself is not changed');
    const patchOnly = bindToRead(doc, live, { create: false, patch: true });
    assert.deepEqual([patchOnly.binding, patchOnly.object.metadata], ['present', { uid: 'uid-1', name: 'a' }]);
  });
});
