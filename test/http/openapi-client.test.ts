import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { after, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));

async function files(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { withFileTypes: true, recursive: true });
  return entries
    .filter((e) => e.isFile())
    .map((e) => relative(dir, join(e.parentPath, e.name)))
    .sort();
}

describe('the committed typed client', () => {
  let out: string;
  after(() => rm(out, { recursive: true, force: true }));

  test('is what `npm run client` generates from the committed openapi.json (regenerate it after `npm run openapi`)', async () => {
    out = await mkdtemp(join(tmpdir(), 'cas-client-'));
    await promisify(execFile)(process.execPath, [join(ROOT, 'scripts/generate-client.mjs'), out], { cwd: ROOT });
    const committedDir = join(ROOT, 'test/client/generated');
    const names = await files(out);
    assert.deepEqual(await files(committedDir), names);
    assert.ok(names.includes('sdk.gen.ts') && names.includes('types.gen.ts'));
    for (const name of names) {
      assert.equal(
        await readFile(join(committedDir, name), 'utf8'),
        await readFile(join(out, name), 'utf8'),
        `${name} differs: run npm run client`,
      );
    }
  });
});
