/**
 * What a reader of Swagger UI and a user of a generated client see of the document: error examples with the status
 * they document, the list's 200 as the List alone (watch streams described in words), each Kubernetes patch
 * content type on PATCH routes, plain text where Swagger UI shows plain text, and authorization kept on reload.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { startTestApp, type TestApp } from '../support/app.js';
import { request } from '../support/http.js';

const PATCH_TYPES = [
  'application/apply-patch+yaml',
  'application/json',
  'application/json-patch+json',
  'application/merge-patch+json',
  'application/strategic-merge-patch+json',
];

function* operations(doc: any): Generator<{ label: string; method: string; op: any }> {
  for (const [path, item] of Object.entries<any>(doc.paths)) {
    for (const [method, op] of Object.entries<any>(item))
      yield { label: `${method.toUpperCase()} ${path}`, method, op };
  }
}

describe('OpenAPI document as readers and generated clients see it', () => {
  let t: TestApp;
  let doc: any;
  before(async () => {
    t = await startTestApp();
    doc = (await request(t.app, 'GET', '/api/docs/openapi.json')).body;
  });
  after(() => t.close());

  test('every error example carries the status it documents (no 599)', () => {
    let checked = 0;
    for (const { label, op } of operations(doc)) {
      for (const [code, response] of Object.entries<any>(op.responses)) {
        const media = response.content?.['application/json'];
        // Prometheus' own refusals (422 of the metrics routes) are its answer, not the service's error.
        if (!/^[45]\d\d$/.test(code) || !JSON.stringify(media?.schema).includes('ErrorResponseDto')) continue;
        const example = media.example;
        assert.ok(example, `${label} ${code} has an example`);
        if (example.kind === 'Status') assert.equal(example.code, Number(code), `${label} ${code}`);
        else assert.equal(example.statusCode, Number(code), `${label} ${code}`);
        checked++;
      }
    }
    assert.ok(checked > 300, `${checked} error examples`);
    assert.doesNotMatch(JSON.stringify(doc), /"statusCode":\s*599/);
  });

  test("list routes: the 200 is the List alone, and the watch streams' formats are described", () => {
    for (const path of ['/api/v1/{resource}/{namespace}', '/api/v1/{resource}/{namespace}/{name}/events']) {
      const ok = doc.paths[path].get.responses['200'];
      // JSON, and the same List as YAML for `Accept: application/yaml`.
      assert.deepEqual(
        Object.keys(ok.content).filter((type) => type !== 'application/yaml'),
        ['application/json'],
        path,
      );
      assert.equal(ok.content['application/json'].schema.$ref, '#/components/schemas/KubernetesList');
      for (const words of ['watch=true', 'application/x-ndjson', 'text/event-stream', 'Last-Event-ID', 'BOOKMARK']) {
        assert.ok(ok.description.includes(words), `${path}: the 200 describes ${words}`);
      }
    }
  });

  test('PATCH routes take each Kubernetes patch content type, each with its schema and an example', () => {
    let patches = 0;
    for (const { label, method, op } of operations(doc)) {
      // The Kubernetes API path passes any body on (kubectl is its client): it is documented apart.
      if (method !== 'patch' || String(op.operationId).endsWith('KubernetesApi')) continue;
      patches++;
      const content = op.requestBody.content;
      assert.deepEqual(Object.keys(content).sort(), PATCH_TYPES, label);
      assert.equal(content['application/json-patch+json'].schema.type, 'array', label);
      assert.ok(Array.isArray(content['application/json-patch+json'].example), label);
      for (const type of ['application/merge-patch+json', 'application/strategic-merge-patch+json']) {
        assert.equal(content[type].schema.type, 'object', `${label} ${type}`);
      }
      assert.ok(content['application/json'].schema.oneOf, `${label}: application/json takes either kind`);
    }
    assert.equal(patches, 2);
  });

  test('plain text where Swagger UI shows plain text: summaries and the server; the API-keys tag', () => {
    for (const { label, op } of operations(doc)) {
      if (op.summary === undefined) continue;
      assert.doesNotMatch(op.summary, /[`\n]/, `${label}: summary "${op.summary}"`);
      assert.ok(op.description.includes(op.summary.replace(/\.$/, '').split(' ')[0]), `${label}: description`);
    }
    for (const server of doc.servers) assert.doesNotMatch(server.description, /`/);
    const keys = doc.tags.find((tag: { name: string }) => tag.name === 'API keys');
    assert.doesNotMatch(keys.description, /one role/);
    assert.match(keys.description, /roles/);
  });

  test('Swagger UI keeps the authorization across a reload (persistAuthorization)', async () => {
    const res = await t.app.inject({ method: 'GET', url: '/api/docs/swagger-ui-init.js' });
    assert.equal(res.statusCode, 200);
    assert.match(res.body, /"persistAuthorization":\s*true/);
  });
});
