import secureJson from 'secure-json-parse';

/** A body the service refuses while parsing it: the status and the message the client gets. */
export class BodyError extends Error {
  constructor(
    readonly statusCode: number,
    message: string,
  ) {
    super(message);
  }
}

const OPEN_BRACKET = 0x5b;
const OPEN_BRACE = 0x7b;
const CLOSE_BRACKET = 0x5d;
const CLOSE_BRACE = 0x7d;
const QUOTE = 0x22;
const BACKSLASH = 0x5c;

/** JSON's insignificant white space: space, tab, line feed, carriage return. */
const WHITESPACE = new Set([0x20, 0x09, 0x0a, 0x0d]);

/**
 * The deepest nesting of arrays and objects in a JSON text, stopping as soon as it passes `max`.
 * One linear pass over the bytes, no recursion: strings are skipped with `Buffer.indexOf` (memchr),
 * so a 10 MiB string costs a few milliseconds, not the tens a character loop (or a JavaScript
 * string's `indexOf`) would. The bytes of UTF-8 sequences are all ≥ 0x80: never a quote, a
 * backslash or a bracket, so scanning bytes sees what scanning characters would.
 */
export function jsonDepthExceeds(text: string | Buffer, max: number): boolean {
  const bytes = typeof text === 'string' ? Buffer.from(text, 'utf8') : text;
  let depth = 0;
  for (let i = 0; i < bytes.length; i++) {
    const c = bytes[i];
    if (c === QUOTE) {
      // Skip the string: find its closing quote (one not escaped by an odd run of backslashes).
      let end = bytes.indexOf(QUOTE, i + 1);
      while (end > 0) {
        let backslashes = 0;
        while (bytes[end - 1 - backslashes] === BACKSLASH) backslashes++;
        if (backslashes % 2 === 0) break;
        end = bytes.indexOf(QUOTE, end + 1);
      }
      if (end < 0) return false; // unterminated: the parser reports it
      i = end;
    } else if (c === OPEN_BRACKET || c === OPEN_BRACE) {
      if (++depth > max) return true;
    } else if (c === CLOSE_BRACKET || c === CLOSE_BRACE) depth--;
  }
  return false;
}

function isBlank(bytes: Buffer): boolean {
  for (let i = 0; i < bytes.length; i++) if (!WHITESPACE.has(bytes[i])) return false;
  return true;
}

/**
 * Parses a JSON request body (its bytes, as the body parser reads them, or a string): empty is
 * "no body", nesting deeper than `maxDepth` is refused before anything is decoded or parsed,
 * `__proto__` and `constructor.prototype` keys are dropped.
 */
export function parseJsonBody(body: string | Buffer, maxDepth: number): unknown {
  const bytes = typeof body === 'string' ? Buffer.from(body, 'utf8') : body;
  if (isBlank(bytes)) return undefined;
  if (jsonDepthExceeds(bytes, maxDepth)) {
    throw new BodyError(400, `body is nested deeper than ${maxDepth} levels`);
  }
  try {
    return secureJson.parse(bytes.toString('utf8'), undefined, { protoAction: 'remove', constructorAction: 'remove' });
  } catch (error) {
    throw new BodyError(400, `body is not valid JSON: ${String((error as Error).message).slice(0, 200)}`);
  }
}
