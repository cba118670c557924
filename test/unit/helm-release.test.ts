import assert from 'node:assert/strict';
import { gzipSync } from 'node:zlib';
import { describe, test } from 'node:test';
import { computedValues, manifestObjects, releaseText, revisionOf, storedRevision } from '../../src/helm/release.js';
import { compareManifests, maskedManifest } from '../../src/helm/release-diff.js';

/** A Secret as Helm's storage driver writes it. */
function storageSecret(release: object, labels: Record<string, string> = {}) {
  const helmData = gzipSync(Buffer.from(JSON.stringify(release))).toString('base64');
  return {
    metadata: {
      name: 'sh.helm.release.v1.web.v2',
      namespace: 'shop',
      labels: { owner: 'helm', name: 'web', version: '2', status: 'deployed', ...labels },
    },
    type: 'helm.sh/release.v1',
    data: { release: Buffer.from(helmData).toString('base64') },
  };
}

const MANIFEST = `---
# Source: web/templates/secret.yaml
apiVersion: v1
kind: Secret
metadata:
  name: "web-secret"
  labels:
    name: not-this
type: Opaque
stringData:
  password: "hunter22"
---
# Source: web/templates/deployment.yaml
apiVersion: apps/v1
kind: Deployment
metadata:
  # a comment
  namespace: other
  name: web
spec:
  replicas: 2
`;

describe('Helm storage', () => {
  test('a storage Secret decodes to its revision', async () => {
    const secret = storageSecret({
      name: 'web',
      namespace: 'shop',
      version: 2,
      info: {
        first_deployed: '2026-01-01T00:00:00Z',
        last_deployed: '2026-01-02T00:00:00.5+01:00',
        deleted: '',
        description: 'Upgrade complete',
        status: 'deployed',
        notes: 'hi',
      },
      chart: {
        metadata: { name: 'web', version: '1.0.0', appVersion: '2.0' },
        values: { a: 1 },
        templates: [{ name: 'x', data: 'eA==' }],
      },
      config: { b: 2 },
      manifest: MANIFEST,
      hooks: [
        {
          name: 'web-hook',
          kind: 'Job',
          path: 'web/templates/hook.yaml',
          events: ['pre-upgrade'],
          last_run: { started_at: 'a', completed_at: 'b', phase: 'Succeeded' },
          weight: 1,
          delete_policies: ['hook-succeeded'],
        },
      ],
    });
    const stored = storedRevision(secret)!;
    assert.equal(stored.release, 'web');
    assert.equal(stored.revision, 2);
    assert.ok(stored.decodedBytes > stored.payload.length / 2);
    const revision = revisionOf(await releaseText(stored.payload), 'shop');
    assert.equal(revision.updated, '2026-01-02T00:00:00.5+01:00');
    assert.deepEqual(revision.chart, { name: 'web', version: '1.0.0', appVersion: '2.0' });
    assert.deepEqual(revision.values, { b: 2 });
    assert.equal(revision.notes, 'hi');
    assert.equal(revision.hooks[0].lastRun.phase, 'Succeeded');
    assert.equal('templates' in revision, false, 'the chart templates are not kept');
    assert.equal(
      storedRevision({ ...secret, metadata: { ...secret.metadata, labels: { name: 'web' } } }),
      null,
      'owner=helm only',
    );
  });

  test('a manifest’s objects are read from its text', () => {
    assert.deepEqual(manifestObjects(MANIFEST), [
      { apiVersion: 'v1', kind: 'Secret', name: 'web-secret', namespace: '', source: 'web/templates/secret.yaml' },
      {
        apiVersion: 'apps/v1',
        kind: 'Deployment',
        name: 'web',
        namespace: 'other',
        source: 'web/templates/deployment.yaml',
      },
    ]);
  });

  test('computed values coalesce as Helm does: maps merge, the user wins, a null removes a default', () => {
    const chart = { a: 1, b: { c: 2, d: 3 }, e: 'x', list: [1, 2] };
    const user = { b: { c: 20 }, e: null, f: true, list: [3] };
    assert.deepEqual(computedValues(chart, user), { a: 1, b: { c: 20, d: 3 }, f: true, list: [3] });
    assert.deepEqual(user, { b: { c: 20 }, e: null, f: true, list: [3] }, 'the user values are left alone');
  });

  test('a diff of two manifests hides Secret values', () => {
    const after =
      MANIFEST.replace('hunter22', 'hunter33').replace('replicas: 2', 'replicas: 3') +
      '---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: new\n';
    const diff = compareManifests({
      before: MANIFEST,
      after,
      namespace: 'shop',
      beforeValues: { r: 2 },
      afterValues: { r: 3 },
    });
    assert.deepEqual(
      diff.objects.map((o) => [o.kind, o.change]),
      [
        ['Secret', 'changed'],
        ['Deployment', 'changed'],
        ['ConfigMap', 'added'],
      ],
    );
    assert.doesNotMatch(JSON.stringify(diff), /hunter/);
    assert.match(diff.objects[0].diff, /\*\*\* \(changed\)/);
    assert.match(diff.values, /-r: 2\n\+r: 3/);
    assert.equal(diff.unchanged, 0);
  });

  test('a rendered manifest shows no Secret value', () => {
    const masked = maskedManifest(MANIFEST);
    assert.doesNotMatch(masked, /hunter22/);
    assert.match(masked, /# Source: web\/templates\/secret.yaml\n/);
    assert.match(masked, /password: "\*\*\*"/);
    assert.ok(
      masked.endsWith(MANIFEST.slice(MANIFEST.indexOf('---\n# Source: web/templates/deployment.yaml'))),
      'other documents as rendered',
    );
  });
});
