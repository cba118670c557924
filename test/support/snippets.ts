import { readdirSync, readFileSync } from 'node:fs';

/**
 * How `test/e2e/readme.test.ts` runs a shell block of the documentation, named by the HTML comment
 * `<!-- snippet: <how> -->` right before the block (docs/DEVELOPMENT.md lists them).
 */
export const SNIPPET_KINDS = [
  'start',
  'ci',
  'first-steps',
  'after-first-steps',
  'own-service',
  'kubectl-dry-run',
  'kubectl-through-service',
] as const;
export type SnippetKind = (typeof SNIPPET_KINDS)[number];

export interface Snippet {
  file: string;
  /** 1-based line of the opening fence. */
  line: number;
  /** The marker's word, or undefined when the block has none. */
  kind: string | undefined;
  code: string;
}

/** Fences whose content a reader would paste into a shell. */
const SHELL_FENCE = /^```(sh|bash|shell|console|zsh)\s*$/;
const MARKER = /^<!--\s*snippet:\s*(\S+)\s*-->$/;

/** The documentation a newcomer reads: the README and every page of docs/. */
export function documentationFiles(): string[] {
  const pages = readdirSync('docs')
    .filter((name) => name.endsWith('.md'))
    .sort()
    .map((name) => `docs/${name}`);
  return ['README.md', ...pages];
}

/** Every shell block of a Markdown file, with the marker before it. */
export function shellSnippets(file: string): Snippet[] {
  const lines = readFileSync(file, 'utf8').split('\n');
  const snippets: Snippet[] = [];
  for (let i = 0; i < lines.length; i++) {
    if (!lines[i].startsWith('```')) continue;
    const end = lines.findIndex((l, j) => j > i && l.startsWith('```'));
    if (end < 0) throw new Error(`${file}:${i + 1}: a fence that is never closed`);
    if (SHELL_FENCE.test(lines[i])) {
      let k = i - 1;
      while (k >= 0 && lines[k].trim() === '') k--;
      const kind = k >= 0 ? MARKER.exec(lines[k].trim())?.[1] : undefined;
      snippets.push({ file, line: i + 1, kind, code: lines.slice(i + 1, end).join('\n') + '\n' });
    }
    i = end;
  }
  return snippets;
}

export function allShellSnippets(): Snippet[] {
  return documentationFiles().flatMap(shellSnippets);
}
