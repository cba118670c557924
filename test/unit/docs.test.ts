import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, normalize } from 'node:path';
import { describe, test } from 'node:test';
import { allShellSnippets, documentationFiles, SNIPPET_KINDS } from '../support/snippets.js';

/** Written by the lead beside this work; the README links it already. */
const EXPECTED_ELSEWHERE = new Set(['docs/ARCHITECTURE.md']);

describe('the README and docs/', () => {
  test('every shell block is marked with how the README test runs it', () => {
    const snippets = allShellSnippets();
    assert.ok(snippets.length > 0);
    const unmarked = snippets.filter((s) => !(SNIPPET_KINDS as readonly string[]).includes(s.kind ?? ''));
    assert.deepEqual(
      unmarked.map((s) => `${s.file}:${s.line} (${s.kind ?? 'no marker'})`),
      [],
      `mark each block with <!-- snippet: ${SNIPPET_KINDS.join('|')} --> (docs/DEVELOPMENT.md)`,
    );
    const readme = snippets.filter((s) => s.file === 'README.md').map((s) => s.kind);
    assert.deepEqual(
      readme,
      ['start', 'ci', 'first-steps', 'kubectl-through-service'],
      'the README shows the two set-up commands, then first steps',
    );
  });

  test('the README is a front door of at most 400 lines', () => {
    assert.ok(readFileSync('README.md', 'utf8').split('\n').length <= 400);
  });

  test('links stay inside the repository and name files that exist; no issue numbers', () => {
    const problems: string[] = [];
    for (const file of documentationFiles()) {
      const text = readFileSync(file, 'utf8');
      for (const [, target] of text.matchAll(/\]\(([^)\s]+)\)/g)) {
        if (/^[a-z]+:/i.test(target)) {
          problems.push(`${file}: link outside the repository: ${target}`);
          continue;
        }
        const path = target.split('#')[0];
        if (!path) continue;
        const resolved = normalize(join(dirname(file), path));
        if (!existsSync(resolved) && !EXPECTED_ELSEWHERE.has(resolved))
          problems.push(`${file}: ${target} does not exist`);
      }
      for (const [match] of text.matchAll(/\bissues? #?\d+|#\d{1,4}\b(?![-\w])/gi))
        problems.push(`${file}: issue number "${match}"`);
    }
    assert.deepEqual(problems, []);
  });

  test('every CAS_ variable the configuration reads is in docs/CONFIGURATION.md, and only those', () => {
    const source = readFileSync('src/config/config.ts', 'utf8');
    const docs = readFileSync('docs/CONFIGURATION.md', 'utf8');
    const names = (text: string) =>
      new Set(
        [...text.matchAll(/\bCAS_[A-Z0-9_]*[A-Z0-9](?![A-Z0-9_<])/g)]
          .map((m) => m[0])
          .filter((name) => !name.startsWith('CAS_OIDC_') || name.endsWith('_SECONDS')),
      );
    const read = names(source);
    const documented = names(docs);
    assert.deepEqual([...read].filter((name) => !documented.has(name)).sort(), [], 'read but not documented');
    assert.deepEqual([...documented].filter((name) => !read.has(name)).sort(), [], 'documented but not read');
    for (const suffix of source.match(/const OIDC_SUFFIXES = \[([^\]]*)\]/)![1].matchAll(/'([A-Z_]+)'/g))
      assert.ok(docs.includes(`CAS_OIDC_<ID>_${suffix[1]}`), `CAS_OIDC_<ID>_${suffix[1]} is documented`);
  });
});
