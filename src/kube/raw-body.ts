import { errorCodes, type FastifyRequest } from 'fastify';
import type { Readable } from 'node:stream';

/**
 * Route config, set by the HTTP edge on the Kubernetes API path: the route takes its body as the request
 * stream, unread, whatever its content type (JSON, YAML, protobuf, every patch kind).
 */
export const RAW_BODY_CONFIG = 'casRawBody';
/** The routes whose bodies pass through unread. */
export const RAW_BODY_ROUTES = '/api/v1/clusters/:name/k8s';

type Done = (error: Error | null, body?: unknown) => void;
type Parser = (request: FastifyRequest, payload: Readable, done: Done) => void;

function takesRawBody(request: FastifyRequest): boolean {
  return (request.routeOptions.config as unknown as Record<string, unknown> | undefined)?.[RAW_BODY_CONFIG] === true;
}

/**
 * Content-type parsers are shared by every route (Nest registers them all in one Fastify context), so
 * the choice is made per request: a raw-body route gets the stream itself, any other route `parser`.
 */
export function unlessRawBody(parser: Parser): Parser {
  return (request, payload, done) => (takesRawBody(request) ? done(null, payload) : parser(request, payload, done));
}

/** The parser of every type no other parser takes: the stream on a raw-body route, else Fastify's own 415. */
export const rawBodyOnly: Parser = (request, payload, done) => {
  if (takesRawBody(request)) return done(null, payload);
  // No route matched: the 404 is answered without reading the body, as without this parser.
  if (request.is404) return done(null, undefined);
  done(new errorCodes.FST_ERR_CTP_INVALID_MEDIA_TYPE());
};
