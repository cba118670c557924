// A console's editing on the resource routes: reads as YAML (`Accept: application/yaml`), and dry runs of
// replace and patch answered with apply's diff (`dryRun=All`, `Accept: text/x-diff`), on a real cluster.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { parse as parseYaml } from 'yaml';
import { kubeRequest, type ControlPlane } from '../harness/control-plane.js';
import type { TestApp } from '../support/app.js';
import { startClusterApp } from '../support/cluster-app.js';
import { request } from '../support/http.js';

const YAML = 'application/yaml';
const DIFF = 'text/x-diff';

describe('resource routes for a console: YAML reads and dry-run diffs on a real cluster', () => {
  let t: TestApp;
  let cp: ControlPlane;
  let admin: string;
  let viewer: string;
  const ns = `edit-${process.pid}`;
  const call = (
    method: string,
    url: string,
    options: {
      body?: unknown;
      query?: Record<string, string>;
      accept?: string;
      token?: string;
      contentType?: string;
      rawBody?: string;
    } = {},
  ) =>
    request(t.app, method, `/api/v1/${url}`, {
      token: options.token ?? admin,
      headers: {
        'x-cluster-name': 'alpha',
        ...(options.accept ? { accept: options.accept } : {}),
        ...(options.contentType ? { 'content-type': options.contentType } : {}),
      },
      body: options.body,
      rawBody: options.rawBody,
      query: options.query,
    });
  const onCluster = async (path: string) => (await kubeRequest(cp, 'GET', `/api/v1/namespaces/${ns}/${path}`)).body;

  before(async () => {
    ({ cp, t, admin, viewer } = await startClusterApp({ cluster: 'alpha', namespace: ns, viewer: true }));
    for (const [name, data] of [
      ['settings', { mode: 'slow', 'multi-line': 'first line\nsecond line\n', number: '007' }],
      ['big', { blob: 'x'.repeat(100_000) }], // written as YAML on a worker thread
    ] as const) {
      const res = await kubeRequest(cp, 'POST', `/api/v1/namespaces/${ns}/configmaps`, {
        metadata: { name, labels: { app: 'edit' } },
        data,
      });
      assert.equal(res.status, 201, JSON.stringify(res.body));
    }
    const secret = await kubeRequest(cp, 'POST', `/api/v1/namespaces/${ns}/secrets`, {
      metadata: { name: 'creds' },
      stringData: { password: 'old-password-4f1c9a', user: 'shop-user-8d2e' },
    });
    assert.equal(secret.status, 201, JSON.stringify(secret.body));
  });
  after(async () => {
    await kubeRequest(cp, 'DELETE', `/api/v1/namespaces/${ns}`);
    await t.close();
  });

  test('Accept: application/yaml: get, list and a paged list answer the same data as YAML', async () => {
    for (const [url, query] of [
      [`configmaps/${ns}/settings`, undefined],
      [`configmaps/${ns}/big`, undefined],
      [`configmaps/${ns}`, { labelSelector: 'app=edit' }],
      [`configmaps/${ns}`, { page: '1', size: '10' }],
    ] as const) {
      const json = await call('GET', url, { query });
      assert.equal(json.status, 200, json.text);
      assert.match(String(json.headers['content-type']), /^application\/json/, 'JSON stays the default');
      const yaml = await call('GET', url, { query, accept: YAML });
      assert.equal(yaml.status, 200, yaml.text);
      assert.equal(yaml.headers['content-type'], YAML);
      assert.ok(!yaml.text.trimStart().startsWith('{'), 'block YAML, not JSON');
      const parsed = parseYaml(yaml.text);
      // A paged list is answered from a cache at its own version: compare what does not move.
      if (query && 'page' in query) {
        assert.equal(parsed.kind, json.body.kind);
        assert.deepEqual(
          parsed.items.map((i: any) => [i.metadata.name, i.data]),
          json.body.items.map((i: any) => [i.metadata.name, i.data]),
        );
      } else {
        assert.deepEqual(parsed, json.body, `${url}: the same data`);
      }
    }
    const settings = parseYaml((await call('GET', `configmaps/${ns}/settings`, { accept: YAML })).text);
    assert.equal(settings.data.number, '007', 'a string of digits stays a string');
    assert.equal(settings.data['multi-line'], 'first line\nsecond line\n');
    // Preferences as a browser or kubectl writes them.
    const preferred = await call('GET', `configmaps/${ns}/settings`, { accept: 'application/yaml, */*;q=0.5' });
    assert.equal(preferred.headers['content-type'], YAML);
    const wildcard = await call('GET', `configmaps/${ns}/settings`, { accept: '*/*' });
    assert.match(String(wildcard.headers['content-type']), /^application\/json/);
  });

  test('an Accept naming neither JSON nor YAML is a 406 naming both; refusals stay JSON', async () => {
    for (const url of [`configmaps/${ns}/settings`, `configmaps/${ns}`]) {
      const res = await call('GET', url, { accept: 'text/plain' });
      assert.equal(res.status, 406, res.text);
      assert.match(res.body.message, /application\/json or application\/yaml/);
    }
    const missing = await call('GET', `configmaps/${ns}/nope`, { accept: YAML });
    assert.equal(missing.status, 404);
    assert.equal(missing.body.kind, 'Status', "the cluster's Status, as JSON");
    // Secrets as JSON reads have them: a viewer is refused, whatever it asks for.
    const refused = await call('GET', `secrets/${ns}/creds`, { accept: YAML, token: viewer });
    assert.equal(refused.status, 403);
    const read = await call('GET', `secrets/${ns}/creds`, { accept: YAML });
    assert.deepEqual(parseYaml(read.text).data, (await call('GET', `secrets/${ns}/creds`)).body.data);
  });

  test('PUT with dryRun=All and Accept: text/x-diff answers the diff; nothing changes on the cluster', async () => {
    const current = await onCluster('configmaps/settings');
    const res = await call('PUT', `configmaps/${ns}/settings`, {
      body: { ...current, data: { ...current.data, mode: 'fast' } },
      query: { dryRun: 'All' },
      accept: DIFF,
    });
    assert.equal(res.status, 200, res.text);
    assert.match(String(res.headers['content-type']), /^text\/x-diff/);
    assert.match(res.text, new RegExp(`^--- a/${ns}/configmaps/settings\\n\\+\\+\\+ b/${ns}/configmaps/settings\\n`));
    assert.match(res.text, /^- {2}mode: slow$/m);
    assert.match(res.text, /^\+ {2}mode: fast$/m);
    assert.ok(!/resourceVersion|managedFields|uid:/.test(res.text), 'without the metadata every write rewrites');
    const now = await onCluster('configmaps/settings');
    assert.equal(now.metadata.resourceVersion, current.metadata.resourceVersion, 'nothing stored');
    assert.equal(now.data.mode, 'slow');

    // Without the diff, a dry run answers the object as before.
    const object = await call('PUT', `configmaps/${ns}/settings`, {
      body: { ...current, data: { ...current.data, mode: 'fast' } },
      query: { dryRun: 'All' },
    });
    assert.equal(object.status, 200);
    assert.equal(object.body.data.mode, 'fast');
    // The cluster's refusal passes through: a stale resourceVersion.
    const stale = await call('PUT', `configmaps/${ns}/settings`, {
      body: { ...current, metadata: { ...current.metadata, resourceVersion: '1' }, data: { mode: 'x' } },
      query: { dryRun: 'All' },
      accept: DIFF,
    });
    assert.equal(stale.status, 409, stale.text);
    assert.equal(stale.body.kind, 'Status');
    // A diff is only a dry run's.
    const real = await call('PUT', `configmaps/${ns}/settings`, { body: current, accept: DIFF });
    assert.equal(real.status, 400);
    assert.match(real.body.message.join(';'), /text\/x-diff answers a dry run only: add dryRun=All/);
    assert.equal((await onCluster('configmaps/settings')).metadata.resourceVersion, current.metadata.resourceVersion);
  });

  test('PATCH (merge, JSON patch, server-side apply) with dryRun=All: the same diff apply answers', async () => {
    const before = await onCluster('configmaps/settings');
    const merge = await call('PATCH', `configmaps/${ns}/settings`, {
      body: { data: { mode: 'fast' } },
      query: { dryRun: 'All', patchType: 'merge' },
      accept: DIFF,
    });
    assert.equal(merge.status, 200, merge.text);
    assert.match(merge.text, /^- {2}mode: slow\n\+ {2}mode: fast$/m);
    const jsonPatch = await call('PATCH', `configmaps/${ns}/settings`, {
      body: [{ op: 'remove', path: '/data/number' }],
      query: { dryRun: 'All', patchType: 'json' },
      accept: DIFF,
    });
    assert.equal(jsonPatch.status, 200, jsonPatch.text);
    assert.match(jsonPatch.text, /^- {2}number: "007"$/m);
    const unchanged = await call('PATCH', `configmaps/${ns}/settings`, {
      body: { data: { mode: 'slow' } },
      query: { dryRun: 'All', patchType: 'merge' },
      accept: DIFF,
    });
    assert.equal(unchanged.status, 200);
    assert.equal(unchanged.text, '', 'no change: an empty diff');

    // Server-side apply of one document, here and through POST /api/v1/apply: one diff.
    const document = { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'settings' }, data: { mode: 'fast' } };
    const applied = await call('PATCH', `configmaps/${ns}/settings`, {
      body: document,
      query: { dryRun: 'All', patchType: 'apply', force: 'true' },
      accept: DIFF,
    });
    assert.equal(applied.status, 200, applied.text);
    const viaApply = await call('POST', 'apply', {
      body: document,
      query: { dryRun: 'All', namespace: ns, force: 'true' },
    });
    assert.equal(viaApply.status, 200, viaApply.text);
    assert.equal(applied.text, viaApply.body.results[0].diff);
    assert.match(applied.text, /^\+ {2}mode: fast$/m);

    const after = await onCluster('configmaps/settings');
    assert.equal(after.metadata.resourceVersion, before.metadata.resourceVersion, 'nothing stored');
    assert.deepEqual(after.data, before.data);
  });

  test("a Secret's diff hides its values, changed ones as *** (changed); none is in the answer", async () => {
    const current = await onCluster('secrets/creds');
    const values = ['old-password-4f1c9a', 'new-password-c33b07', 'shop-user-8d2e'];
    const base64 = values.map((v) => Buffer.from(v).toString('base64'));
    const put = await call('PUT', `secrets/${ns}/creds`, {
      body: { ...current, stringData: { password: 'new-password-c33b07' } },
      query: { dryRun: 'All' },
      accept: DIFF,
    });
    const patch = await call('PATCH', `secrets/${ns}/creds`, {
      body: { stringData: { password: 'new-password-c33b07' } },
      query: { dryRun: 'All', patchType: 'merge' },
      accept: DIFF,
    });
    for (const res of [put, patch]) {
      assert.equal(res.status, 200, res.text);
      assert.match(res.text, /^- {2}password: "\*\*\*"$/m);
      assert.match(res.text, /^\+ {2}password: "\*\*\* \(changed\)"$/m);
      assert.ok(!/^[-+] {2}user:/m.test(res.text), 'an unchanged value is no change');
      for (const secret of [...values, ...base64]) assert.ok(!res.text.includes(secret), 'no value shown');
    }
    // A refusal of the cluster about the Secret has its values scrubbed, as apply's have.
    const invalid = await call('PATCH', `secrets/${ns}/creds`, {
      body: { metadata: { name: 'other' }, stringData: { password: 'new-password-c33b07' } },
      query: { dryRun: 'All', patchType: 'merge' },
      accept: DIFF,
    });
    assert.ok(invalid.status >= 400, invalid.text);
    for (const secret of [...values, ...base64]) assert.ok(!invalid.text.includes(secret), 'no value shown');
    const now = await onCluster('secrets/creds');
    assert.equal(now.metadata.resourceVersion, current.metadata.resourceVersion, 'nothing stored');
  });
});
