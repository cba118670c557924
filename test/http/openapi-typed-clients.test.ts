/**
 * Clients generated from the committed openapi.json type the common calls without casts or guards: types from
 * openapi-typescript (with openapi-fetch) and the committed @hey-api client are compiled, under `strict`, with a
 * small scenario that reads `data.items` of a list straight away and sends a patch under each Kubernetes patch
 * content type. `@ts-expect-error` lines prove the compiler really checks the scenario.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { join, relative } from 'node:path';
import { after, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));

const SCENARIO = (heyApi: string) => `
import createClient from 'openapi-fetch';
import type { paths } from './cas.js';
import { listResources, patchResource } from '${heyApi}/sdk.gen.js';

// Every media type: a read's YAML shares its JSON's schema, so the list below still types as the List.
const casAny = createClient<paths>({ baseUrl: 'http://localhost:8080', headers: { authorization: 'cas_key_x' } });
// A client that reads JSON: replace and patch also answer a dry run's diff as text/x-diff (a string).
const cas = createClient<paths, 'application/json'>({
  baseUrl: 'http://localhost:8080',
  headers: { authorization: 'cas_key_x' },
});
const target = { path: { resource: 'configmaps', namespace: 'default' }, header: { 'x-cluster-name': 'production' } };
type PatchBodies = paths['/api/v1/{resource}/{namespace}/{name}']['patch']['requestBody']['content'];

export async function withOpenapiFetch(): Promise<string[]> {
  const { data, error } = await casAny.GET('/api/v1/{resource}/{namespace}', { params: target });
  if (error) throw new Error(String(error.message));
  const names: string[] = data.items.map((item) => item.metadata?.name ?? '');
  const resourceVersion: string | undefined = data.metadata.resourceVersion;
  // @ts-expect-error items is an array of objects
  const notAString: string = data.items;
  void notAString;

  const params = {
    path: { resource: 'configmaps', namespace: 'default', name: 'my-config' },
    header: { 'x-cluster-name': 'production' },
  };
  const merge: PatchBodies['application/merge-patch+json'] = { data: { greeting: 'hi' } };
  const strategic: PatchBodies['application/strategic-merge-patch+json'] = { data: { greeting: 'hi' } };
  const jsonPatch: PatchBodies['application/json-patch+json'] = [{ op: 'replace', path: '/data/greeting', value: 'hi' }];
  // @ts-expect-error a JSON patch is an array of operations
  const notAPatch: PatchBodies['application/json-patch+json'] = { op: 'replace' };
  void notAPatch;
  for (const [body, patchType, type] of [
    [merge, 'merge', 'application/merge-patch+json'],
    [strategic, undefined, 'application/strategic-merge-patch+json'],
    [jsonPatch, 'json', 'application/json-patch+json'],
  ] as const) {
    const patched = await cas.PATCH('/api/v1/{resource}/{namespace}/{name}', {
      params: { ...params, query: { patchType } },
      body,
      headers: { 'content-type': type },
    });
    if (patched.data) names.push(patched.data.metadata?.name ?? '');
  }
  return [...names, resourceVersion ?? ''];
}

export async function withHeyApi(): Promise<string[]> {
  const { data } = await listResources({
    path: { resource: 'configmaps', namespace: 'default' },
    headers: { 'x-cluster-name': 'production' },
    throwOnError: true,
  });
  const names: string[] = data.items.map((item) => item.metadata?.name ?? '');
  // @ts-expect-error items is an array of objects
  const notAString: string = data.items;
  void notAString;
  await patchResource({
    path: { resource: 'configmaps', namespace: 'default', name: 'my-config' },
    headers: { 'x-cluster-name': 'production', 'Content-Type': 'application/json-patch+json' },
    query: { patchType: 'json' },
    body: [{ op: 'replace', path: '/data/greeting', value: 'hi' }],
    throwOnError: true,
  });
  return names;
}
`;

/** Runs a Node script; its output when it fails, '' when it succeeds. */
function run(args: string[], cwd: string): Promise<string> {
  return promisify(execFile)(process.execPath, args, { cwd }).then(
    () => '',
    (error: { stdout?: string; stderr?: string; message: string }) =>
      `${error.stdout ?? ''}${error.stderr ?? ''}` || error.message,
  );
}

describe('generated clients type the common calls cleanly', () => {
  let dir: string | undefined;
  after(() => (dir ? rm(dir, { recursive: true, force: true }) : undefined));

  test('openapi-typescript + openapi-fetch and @hey-api: data.items without a guard, Kubernetes patch types', async () => {
    // Inside the repository, so that the scenario resolves openapi-fetch from its node_modules.
    await mkdir(join(ROOT, 'build'), { recursive: true });
    dir = await mkdtemp(join(ROOT, 'build', 'typed-clients-'));
    // The CLI, run at the repository's root as a developer would: it also reads redocly.yaml there.
    const cli = join(ROOT, 'node_modules/openapi-typescript/bin/cli.js');
    assert.equal(await run([cli, 'openapi.json', '-o', join(dir, 'cas.ts')], ROOT), '', 'openapi-typescript ran');
    const heyApi = relative(dir, join(ROOT, 'test/client/generated')).split('\\').join('/');
    await writeFile(join(dir, 'scenario.ts'), SCENARIO(heyApi));
    await writeFile(
      join(dir, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: {
          strict: true,
          noEmit: true,
          module: 'nodenext',
          moduleResolution: 'nodenext',
          target: 'es2023',
          lib: ['es2023'],
          types: ['node'],
          typeRoots: [join(ROOT, 'node_modules/@types')],
          skipLibCheck: true,
        },
        files: ['scenario.ts', join(ROOT, 'test/client/fetch-types.d.ts')],
      }),
    );
    const tsc = join(ROOT, 'node_modules/typescript/bin/tsc');
    assert.equal(await run([tsc, '-p', dir], dir), '', 'the scenario compiles under strict');
  });
});
