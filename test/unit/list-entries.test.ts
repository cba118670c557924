import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { itemJson, toEntry } from '../../src/lists/entries.js';

const type = { resourceId: 'secrets', apiVersion: 'v1', kind: 'Secret', intern: (ns: string) => ns };
const managedFields = [
  { manager: 'kubectl', operation: 'Update', apiVersion: 'v1', fieldsType: 'FieldsV1', fieldsV1: { 'f:data': {} } },
];

describe('list cache entries: what a page sends of an object, and what it costs', () => {
  test('a list item (no apiVersion, kind) gets the type’s; without managedFields unless asked; otherwise the object', () => {
    const item = {
      metadata: { name: 's', namespace: 'n', labels: { app: 'Web' }, resourceVersion: '7', managedFields },
      type: 'Opaque',
      data: { pin: 'MTIzNA==' },
    };
    const entry = toEntry(structuredClone(item), type);
    const { managedFields: _, ...metadata } = item.metadata;
    assert.deepEqual(JSON.parse(itemJson(entry, false)), { apiVersion: 'v1', kind: 'Secret', ...item, metadata });
    assert.deepEqual(JSON.parse(itemJson(entry, true)), { apiVersion: 'v1', kind: 'Secret', ...item });
    assert.deepEqual(
      [entry.namespace, entry.name, entry.labels, entry.fields],
      ['n', 's', { app: 'Web' }, { type: 'Opaque' }],
    );
    assert.equal(entry.haystack, 's\0n\0web');
  });

  test('bytes: the UTF-8 bytes of the JSON kept, managedFields included', () => {
    const object = {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: 'é', managedFields },
      data: { k: 'x'.repeat(1000) },
    };
    const entry = toEntry(object, type);
    assert.equal(entry.bytes, Buffer.byteLength(JSON.stringify(object)) - Buffer.byteLength(',"managedFields":'));
    assert.equal(entry.bytes, Buffer.byteLength(itemJson(entry, true)) - Buffer.byteLength(',"managedFields":'));
  });

  test('objects without managedFields, with empty metadata or nothing else, are sent as they are', () => {
    for (const object of [
      { apiVersion: 'v1', kind: 'Secret', metadata: { name: 'a' } },
      { apiVersion: 'v1', kind: 'Secret', metadata: {}, data: {} },
      { apiVersion: 'v1', kind: 'Secret', metadata: { managedFields } },
    ]) {
      const entry = toEntry(structuredClone(object), type);
      assert.deepEqual(JSON.parse(itemJson(entry, true)), object);
    }
  });
});
