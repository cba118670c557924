import { FASTIFY_ROUTE_CONFIG_METADATA } from '@nestjs/platform-fastify/constants.js';
import { errorCodes, type FastifyRequest } from 'fastify';
import type { Readable } from 'node:stream';

/** Route config: the route takes its body as the request stream, unread, whatever its content type. */
export const RAW_BODY_CONFIG = 'casRawBody';

type Done = (error: Error | null, body?: unknown) => void;
type Parser = (request: FastifyRequest, payload: Readable, done: Done) => void;

function takesRawBody(request: FastifyRequest): boolean {
  return (request.routeOptions.config as unknown as Record<string, unknown> | undefined)?.[RAW_BODY_CONFIG] === true;
}

/**
 * Marks a route whose body is passed on as it arrives (the Kubernetes API path: JSON, YAML, protobuf,
 * every patch kind). Merged into the route config the other decorators set; put it above them.
 */
export function RawBody(): MethodDecorator {
  return (_target, _key, descriptor: PropertyDescriptor) => {
    const handler = descriptor.value as object;
    const config = (Reflect.getMetadata(FASTIFY_ROUTE_CONFIG_METADATA, handler) ?? {}) as object;
    Reflect.defineMetadata(FASTIFY_ROUTE_CONFIG_METADATA, { ...config, [RAW_BODY_CONFIG]: true }, handler);
    return descriptor;
  };
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
