// YAML parsed within bounds, so that no document can hold the event loop: deep flow nesting
// (`[[[[…`) or compact sequences (`- - - -…`) make YAML parsing superlinear, aliases can expand a
// small text into a huge value (or one that contains itself), and yaml's own duplicate-key check is
// quadratic. Pure: no I/O, no Nest.
import { isScalar, LineCounter, parseAllDocuments, type parseDocument, visit } from 'yaml';

export interface YamlBounds {
  /** Characters of the whole text. */
  maxLength: number;
  /** Nesting of `[` and `{`. */
  maxFlowDepth: number;
  /** Columns of a line's indentation, counting leading `- `, `? ` and `: ` indicators. */
  maxIndent: number;
  /** Lines plus items of flow collections: what YAML parsing costs grows with it. */
  maxNodes: number;
  /** Aliases resolved while building a document's value (yaml's `maxAliasCount`). */
  maxAliasCount: number;
  /**
   * Collections opened (`[`, `{`, a `- ` entry): each costs the parser about as much as a line. Needed
   * when `maxLength` allows far more of them than `maxNodes` counts; unbounded when absent.
   */
  maxCollections?: number;
  /**
   * Characters of all the documents' values as JSON, each alias counted as often as it is used:
   * what the documents become once sent on. Twice `maxLength` when absent.
   */
  maxExpandedChars?: number;
}

/** Why a text is out of bounds (its message names `subject`), and the line (1-based) where that was seen. */
export interface YamlProblem {
  message: string;
  line?: number;
}

/**
 * Why the text's structure is out of bounds, or undefined. One linear pass, no regular
 * expression. It reads YAML's token boundaries the way the parser does (a quote or `#` only counts
 * at the start of a token), so a quote or comment cannot hide nesting from it.
 */
export function yamlStructureProblem(text: string, bounds: YamlBounds, subject: string): YamlProblem | undefined {
  const { maxLength, maxFlowDepth, maxIndent, maxNodes } = bounds;
  const maxCollections = bounds.maxCollections ?? Infinity;
  let collections = 0;
  if (text.length > maxLength) return { message: `${subject} is larger than ${maxLength} characters` };
  const boundary = (c: string | undefined) =>
    c === undefined || c === ' ' || c === '\t' || c === '\n' || c === '\r' || c === '[' || c === '{' || c === ',';
  let flow = 0;
  let quote = '';
  let lineStart = true;
  let indent = 0;
  let nodes = 0;
  let line = 1;
  const tooMany = () => ({ message: `${subject} has more than ${maxNodes} lines and list items`, line });
  const tooManyCollections = () => ({
    message: `${subject} opens more than ${maxCollections} lists and mappings ([, {, - )`,
    line,
  });
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (quote) {
      if (c === '\n') line++;
      if (c === quote) {
        if (quote === "'" && text[i + 1] === "'") i++;
        else quote = '';
      } else if (c === '\\' && quote === '"') i++;
      continue;
    }
    if (c === '\n') {
      line++;
      lineStart = true;
      indent = 0;
      if (++nodes > maxNodes) return tooMany();
      continue;
    }
    if (lineStart) {
      const indicator = (c === '-' || c === '?' || c === ':') && (text[i + 1] === ' ' || text[i + 1] === '\t');
      if (c === ' ' || c === '\t' || indicator) {
        indent += indicator ? 2 : 1;
        if (indicator) {
          i++;
          if (c === '-' && ++collections > maxCollections) return tooManyCollections();
        }
        if (indent > maxIndent) return { message: `${subject} is indented deeper than ${maxIndent} columns`, line };
        continue;
      }
      lineStart = false;
    }
    const tokenStart = boundary(text[i - 1]) || text[i - 1] === ':';
    if ((c === '"' || c === "'") && tokenStart) quote = c;
    else if (c === '#' && (i === 0 || text[i - 1] === ' ' || text[i - 1] === '\t' || text[i - 1] === '\n')) {
      const end = text.indexOf('\n', i);
      i = end < 0 ? text.length : end - 1;
    } else if (c === '[' || c === '{') {
      if (++flow > maxFlowDepth) return { message: `${subject} nests [ or { deeper than ${maxFlowDepth} levels`, line };
      if (++collections > maxCollections) return tooManyCollections();
    } else if (c === ']' || c === '}') flow = Math.max(0, flow - 1);
    else if (c === ',' && flow > 0 && ++nodes > maxNodes) return tooMany();
  }
  return undefined;
}

/** Where the first repeated key of any mapping is (a Set per mapping: linear), or undefined. */
export function duplicateKeyOffset(doc: ReturnType<typeof parseDocument>): number | undefined {
  let offset: number | undefined;
  visit(doc, {
    Map(_key, map) {
      const seen = new Set<string>();
      for (const item of map.items) {
        const key = isScalar(item.key) ? `s:${String(item.key.value)}` : `n:${String(item.key)}`;
        if (seen.has(key)) {
          offset = (item.key as { range?: [number] } | null)?.range?.[0] ?? map.range?.[0] ?? 0;
          return visit.BREAK;
        }
        seen.add(key);
      }
      return undefined;
    },
  });
  return offset;
}

/**
 * The options every bounded parse uses: yaml's quadratic duplicate check off (duplicateKeyOffset is
 * linear), and YAML 1.1's `!!binary`, `!!set`, `!!omap`, `!!pairs` and `!!timestamp` left as the text
 * they tag: as Buffers, Sets and Maps they would not become the JSON they were written as (a Buffer's
 * JSON is several times its text).
 */
export const BOUNDED_PARSE_OPTIONS = { uniqueKeys: false, prettyErrors: false, resolveKnownTags: false } as const;

/** A character JSON escapes: `"`, `\\` and the control characters. */
// eslint-disable-next-line no-control-regex -- control characters are exactly what JSON escapes
const ESCAPED = /["\\\u0000-\u001f]/;
/** Strings at least this long are sized once however often an alias repeats them. */
const MEMO_STRING_CHARS = 1024;

function jsonStringChars(text: string): number {
  let size = text.length + 2;
  if (!ESCAPED.test(text)) return size;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    // `\"`, `\\`, `\b`, `\t`, `\n`, `\f`, `\r` take two characters; any other control character six (`\u0001`).
    if (c === 0x22 || c === 0x5c || (c >= 8 && c <= 13 && c !== 11)) size += 1;
    else if (c < 0x20) size += 5;
  }
  return size;
}

/**
 * The characters of a parsed value as JSON, each alias counted as often as it is used, or Infinity
 * when the value contains itself (an alias inside what it refers to). Linear in the distinct values:
 * what an alias refers to is sized once (`sizes`), never expanded.
 */
export function jsonChars(value: unknown, sizes = new Map<unknown, number>(), open = new Set<object>()): number {
  if (typeof value === 'string') {
    if (value.length < MEMO_STRING_CHARS) return jsonStringChars(value);
    let size = sizes.get(value);
    if (size === undefined) sizes.set(value, (size = jsonStringChars(value)));
    return size;
  }
  if (typeof value === 'number') return Number.isFinite(value) ? String(value).length : 4; // `null`
  if (value === null || typeof value !== 'object') return String(value ?? null).length;
  const known = sizes.get(value);
  if (known !== undefined) return known;
  if (open.has(value)) return Infinity;
  open.add(value);
  let size = 2;
  if (Array.isArray(value)) {
    for (const item of value) size += jsonChars(item, sizes, open) + 1;
  } else {
    for (const [key, item] of Object.entries(value)) size += jsonStringChars(key) + jsonChars(item, sizes, open) + 2;
  }
  open.delete(value);
  sizes.set(value, size);
  return size;
}

/**
 * Where the first alias of a document is (with `inside`: the first inside the collection it refers to,
 * whose value would contain itself), or undefined.
 */
function aliasOffset(doc: ReturnType<typeof parseDocument>, inside = false): number | undefined {
  let offset: number | undefined;
  visit(doc, {
    Alias(_key, alias, path) {
      if (inside && !path.includes(alias.resolve(doc) as never)) return undefined;
      offset = alias.range?.[0] ?? 0;
      return visit.BREAK;
    },
  });
  return offset;
}

/** One document of a stream: its value and the line (1-based) it starts on. */
export interface YamlDocument {
  value: unknown;
  line: number;
}

/**
 * Every document of a YAML stream (JSON is YAML), each as a plain value, within `bounds`; empty
 * documents (a stray `---`, a comment alone) are left out, as kubectl leaves them. Throws nothing: a problem names the line it was found on,
 * never quotes the text (it may hold secrets).
 */
export function parseBoundedYamlStream(
  text: string,
  bounds: YamlBounds,
  subject: string,
): { documents: YamlDocument[] } | { problem: YamlProblem } {
  const structure = yamlStructureProblem(text, bounds, subject);
  if (structure) {
    const at = structure.line === undefined ? '' : ` at line ${structure.line}`;
    return { problem: { ...structure, message: `${structure.message}${at}` } };
  }
  const lineCounter = new LineCounter();
  const parsed = parseAllDocuments(text, { ...BOUNDED_PARSE_OPTIONS, lineCounter });
  const docs = Array.isArray(parsed) ? parsed : [parsed];
  const documents: YamlDocument[] = [];
  const maxExpanded = bounds.maxExpandedChars ?? 2 * bounds.maxLength;
  const sizes = new Map<unknown, number>();
  let expanded = 0;
  for (const doc of docs) {
    if (doc.errors.length > 0) {
      // Without prettyErrors, yaml's messages do not quote the text.
      const error = doc.errors[0];
      const { line, col } = lineCounter.linePos(error.pos[0]);
      return {
        problem: {
          message: `${subject} is not valid YAML: ${error.message.slice(0, 200)} at line ${line}, column ${col}`,
          line,
        },
      };
    }
    const duplicate = duplicateKeyOffset(doc as ReturnType<typeof parseDocument>);
    if (duplicate !== undefined) {
      const { line, col } = lineCounter.linePos(duplicate);
      return {
        problem: {
          message: `${subject} is not valid YAML: Map keys must be unique at line ${line}, column ${col}`,
          line,
        },
      };
    }
    const line = lineCounter.linePos(doc.contents?.range?.[0] ?? doc.range[0]).line;
    if (doc.contents === null) continue;
    const loop = aliasOffset(doc as ReturnType<typeof parseDocument>, true);
    if (loop !== undefined) {
      const at = lineCounter.linePos(loop).line;
      return {
        problem: {
          message: `${subject} has an alias inside the collection it refers to (a value that would contain itself) at line ${at}`,
          line: at,
        },
      };
    }
    let value: unknown;
    try {
      value = doc.toJS({ maxAliasCount: bounds.maxAliasCount });
    } catch {
      return {
        problem: { message: `${subject} is not valid YAML: too many aliases in the document at line ${line}`, line },
      };
    }
    // Aliases share what they refer to until the value is copied or serialised: sized here, before either.
    expanded += jsonChars(value, sizes);
    if (expanded > maxExpanded) {
      const first = aliasOffset(doc as ReturnType<typeof parseDocument>);
      const alias = first === undefined ? undefined : lineCounter.linePos(first).line;
      return {
        problem: {
          message: `${subject} expands to more than ${maxExpanded} characters as JSON (each alias repeats what it refers to) in the document at line ${line}${alias === undefined ? '' : `; its first alias is at line ${alias}`}`,
          line: alias ?? line,
        },
      };
    }
    if (value !== null && value !== undefined) documents.push({ value, line });
  }
  return { documents };
}
