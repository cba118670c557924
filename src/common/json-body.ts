import { errorCodes, type FastifyRequest } from 'fastify';
import type { Readable } from 'node:stream';
import secureJson from 'secure-json-parse';

/** A body refused while parsing it, as Fastify's body parsing reports one: the status and the message the client gets. */
function refusal(statusCode: number, message: string): Error {
  return Object.assign(new Error(message), { statusCode });
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
 * Counts the nesting of arrays and objects in a JSON text fed in pieces, and says as soon as it
 * passes `max`. One linear pass over the bytes, no recursion: strings are skipped with
 * `Buffer.indexOf` (memchr), so a 10 MiB string costs a few milliseconds. The bytes of UTF-8
 * sequences are all ≥ 0x80 — never a quote, a backslash or a bracket — so scanning bytes sees what
 * scanning characters would. A string, or a run of backslashes, may go on from one piece to the next.
 */
export class DepthScanner {
  private depth = 0;
  private inString = false;
  /** In a string: the backslashes that ended the previous piece (they may escape its next quote). */
  private carriedBackslashes = 0;

  constructor(private readonly max: number) {}

  /** Scans the next piece; true once the nesting has passed `max`. */
  push(bytes: Buffer): boolean {
    let i = 0;
    while (i < bytes.length) {
      if (this.inString) {
        const from = i;
        let end = bytes.indexOf(QUOTE, i);
        while (end >= 0) {
          // The quote ends the string unless an odd run of backslashes stands right before it.
          let backslashes = 0;
          while (end - 1 - backslashes >= from && bytes[end - 1 - backslashes] === BACKSLASH) backslashes++;
          if (end - backslashes === from) backslashes += this.carriedBackslashes;
          if (backslashes % 2 === 0) break;
          end = bytes.indexOf(QUOTE, end + 1);
        }
        if (end < 0) {
          let trailing = 0;
          while (bytes.length - 1 - trailing >= from && bytes[bytes.length - 1 - trailing] === BACKSLASH) trailing++;
          this.carriedBackslashes = trailing + (bytes.length - trailing === from ? this.carriedBackslashes : 0);
          return false;
        }
        this.inString = false;
        this.carriedBackslashes = 0;
        i = end + 1;
        continue;
      }
      const c = bytes[i++];
      if (c === QUOTE) this.inString = true;
      else if (c === OPEN_BRACKET || c === OPEN_BRACE) {
        if (++this.depth > this.max) return true;
      } else if (c === CLOSE_BRACKET || c === CLOSE_BRACE) this.depth--;
    }
    return false;
  }
}

function isBlank(bytes: Buffer): boolean {
  for (let i = 0; i < bytes.length; i++) if (!WHITESPACE.has(bytes[i])) return false;
  return true;
}

/**
 * The parse itself, once the nesting is known to be within bounds: empty is "no body", `__proto__`
 * and `constructor.prototype` keys are dropped.
 */
function parseJsonBytes(bytes: Buffer): unknown {
  if (isBlank(bytes)) return undefined;
  try {
    return secureJson.parse(bytes.toString('utf8'), undefined, { protoAction: 'remove', constructorAction: 'remove' });
  } catch (error) {
    throw refusal(400, `body is not valid JSON: ${String((error as Error).message).slice(0, 200)}`);
  }
}

type Done = (error: Error | null, body?: unknown) => void;

/**
 * A Fastify content-type parser that reads the request stream itself, with the same limits and errors
 * as Fastify's own body reader (the route's body limit, 413 past it, 400 when the body is not as long
 * as its Content-Length). `inspect` sees each piece as it arrives and may refuse the body there;
 * `finish` turns the whole body into the route's value.
 */
function boundedBodyParser(
  start: () => { inspect?: (bytes: Buffer) => Error | undefined },
  finish: (bytes: Buffer) => unknown,
) {
  return (request: FastifyRequest, payload: Readable, done: Done) => {
    const limit = request.routeOptions.bodyLimit;
    const contentLength = Number(request.headers['content-length']);
    if (contentLength > limit) return done(new errorCodes.FST_ERR_CTP_BODY_TOO_LARGE());
    const { inspect } = start();
    const chunks: Buffer[] = [];
    let received = 0;
    const stop = () => {
      payload.off('data', onData);
      payload.off('end', onEnd);
      payload.off('error', onEnd);
    };
    function onData(chunk: Buffer | string) {
      const bytes = typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
      received += bytes.length;
      if (received > limit) {
        stop();
        return done(new errorCodes.FST_ERR_CTP_BODY_TOO_LARGE());
      }
      const refused = inspect?.(bytes);
      if (refused) {
        stop();
        return done(refused);
      }
      chunks.push(bytes);
    }
    function onEnd(error?: Error & { statusCode?: number }) {
      stop();
      if (error) {
        if (!(typeof error.statusCode === 'number' && error.statusCode >= 400)) error.statusCode = 400;
        return done(error);
      }
      if (!Number.isNaN(contentLength) && received !== contentLength) {
        return done(new errorCodes.FST_ERR_CTP_INVALID_CONTENT_LENGTH());
      }
      let body: unknown;
      try {
        // A copy, never a view of the socket's read buffer.
        body = finish(Buffer.concat(chunks, received));
      } catch (parseError) {
        return done(parseError as Error);
      }
      done(null, body);
    }
    payload.on('data', onData);
    payload.on('end', onEnd);
    payload.on('error', onEnd);
    payload.resume();
  };
}

/**
 * Fastify's content-type parser for JSON bodies: the nesting is checked on each piece as it arrives,
 * so a body nested too deep is refused there, never joined into one buffer. Joining 10 MiB of fresh
 * memory held the event loop for long (page faults), in one go.
 */
export function jsonBodyParser(maxDepth: number) {
  return boundedBodyParser(() => {
    const scanner = new DepthScanner(maxDepth);
    return {
      inspect: (bytes) =>
        scanner.push(bytes) ? refusal(400, `body is nested deeper than ${maxDepth} levels`) : undefined,
    };
  }, parseJsonBytes);
}

/** Media types read as text, for the route to parse (YAML, within the bounds of src/common/bounded-yaml.ts). */
export const YAML_TYPES = ['application/yaml', 'application/apply-patch+yaml'];

/**
 * Fastify's content-type parser for YAML bodies: the text, decoded as UTF-8 (empty is "no body"). The
 * route parses it: the bounds of a YAML document depend on what it carries.
 */
export const textBodyParser = boundedBodyParser(
  () => ({}),
  (bytes) => (isBlank(bytes) ? undefined : bytes.toString('utf8')),
);

/** Chart archives (`helm package`'s `.tgz`), taken whole by the Helm routes only. */
export const GZIP_TYPES = ['application/gzip', 'application/x-gzip'];

/** The body as bytes, within the route's body limit (a chart archive). */
export const bytesBodyParser = boundedBodyParser(
  () => ({}),
  (bytes) => (bytes.length === 0 ? undefined : bytes),
);
