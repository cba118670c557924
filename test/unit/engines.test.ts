import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { describe, test } from 'node:test';
import semver from 'semver';

const ROOT = new URL('../../../', import.meta.url);

/**
 * `npm ci` warns (EBADENGINE) about every installed package whose `engines.node` the running Node does not
 * satisfy. Checked here against the oldest Node the project declares, so that a dependency bump that needs a
 * newer Node fails a test instead of warning on every install.
 */
describe('package-lock.json', () => {
  test('every package supports the oldest Node that package.json declares', async () => {
    const project = JSON.parse(await readFile(new URL('package.json', ROOT), 'utf8'));
    const lock = JSON.parse(await readFile(new URL('package-lock.json', ROOT), 'utf8'));
    const oldest = semver.minVersion(project.engines.node);
    assert.ok(oldest, `engines.node ${project.engines.node}`);
    const refused = Object.entries<{ version?: string; engines?: { node?: string } }>(lock.packages)
      .filter(([path, info]) => path !== '' && info.engines?.node && !semver.satisfies(oldest, info.engines.node))
      .map(
        ([path, info]) => `${path.replace(/^.*node_modules\//, '')}@${info.version} wants Node ${info.engines!.node}`,
      );
    assert.deepEqual(refused, [], `Node ${oldest.version} is refused by`);
  });
});
