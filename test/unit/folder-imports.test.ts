// No folder of src/ imports another that imports it back: each pair of folders depends one way at most,
// so a folder can be read, tested and changed from below. The pairs still allowed are listed: the list
// may only shrink (a pair that no longer imports both ways must be taken off it).
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

/**
 * Mutual imports not yet taken apart, each with what ties it:
 * - auth ↔ users: the entities reference each other (a session and an API key belong to a user with
 *   roles) and users' routes use the sign-in guard, passwords and throttle.
 * - apply ↔ resources: apply reads through discovery and the resource routes' query DTOs; the resource
 *   routes build their PATCH (apply's YAML patch bodies, field managers) with apply's input code.
 */
const ALLOWED = new Set(['auth<->users', 'apply<->resources']);

const SRC = resolve(dirname(fileURLToPath(import.meta.url)), '../../../src');
/** Relative module specifiers of `import … from`, `export … from`, `import '…'` and `import('…')`. */
const SPECIFIER = /(?:\bfrom\s*|\bimport\s*\(?\s*)['"](\.{1,2}\/[^'"]+)['"]/g;

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sources(path);
    return entry.name.endsWith('.ts') ? [path] : [];
  });
}

/** The folder right under src/ a file belongs to; `(root)` for src/'s own files. */
function folderOf(file: string): string {
  const parts = relative(SRC, file).split(sep);
  return parts.length > 1 ? parts[0] : '(root)';
}

/** `from → to → [file: specifier]` over every source file of src/. */
function folderImports(): Map<string, Map<string, string[]>> {
  const edges = new Map<string, Map<string, string[]>>();
  for (const file of sources(SRC)) {
    const text = readFileSync(file, 'utf8');
    for (const match of text.matchAll(SPECIFIER)) {
      const target = resolve(dirname(file), match[1]);
      if (!target.startsWith(SRC + sep)) continue;
      const from = folderOf(file);
      const to = folderOf(target);
      if (from === to) continue;
      if (!edges.has(from)) edges.set(from, new Map());
      const byTarget = edges.get(from)!;
      if (!byTarget.has(to)) byTarget.set(to, []);
      byTarget.get(to)!.push(`${relative(SRC, file)}: ${match[1]}`);
    }
  }
  return edges;
}

test('the import graph is read from src/ (the test sees the folders and their imports)', () => {
  const edges = folderImports();
  assert.ok(edges.get('resources')?.has('access'), 'resources imports the authorizer');
  assert.ok(edges.get('(root)')?.has('database'), 'the application module imports the database module');
});

test('no two folders of src/ import each other, except the pairs listed (and those still do)', () => {
  const edges = folderImports();
  const mutual: string[] = [];
  const why: string[] = [];
  for (const [from, targets] of edges) {
    for (const to of targets.keys()) {
      if (from >= to || !edges.get(to)?.has(from)) continue;
      const pair = `${from}<->${to}`;
      mutual.push(pair);
      if (!ALLOWED.has(pair)) {
        why.push(
          `${pair}:\n  ${targets.get(to)!.join('\n  ')}\n  ${edges.get(to)!.get(from)!.join('\n  ')}`,
        );
      }
    }
  }
  assert.deepEqual(why, [], `folders that import each other:\n${why.join('\n')}`);
  const gone = [...ALLOWED].filter((pair) => !mutual.includes(pair));
  assert.deepEqual(gone, [], 'these pairs no longer import each other: take them off ALLOWED');
});
