import type { FastifyRequest } from 'fastify';

/**
 * For long-lived streaming responses (watch, logs): lifts the connection's inactivity time-out
 * (CAS_CONNECTION_TIMEOUT_SECONDS), which would otherwise close a stream that stays quiet that long.
 * The request time-out (CAS_REQUEST_TIMEOUT_SECONDS) only covers receiving the request and never
 * cuts a response. The stream's owner then bounds the stream's life itself (heartbeats, limits).
 */
export function exemptFromIdleTimeout(request: FastifyRequest): void {
  // HTTP/2: the stream's own time-out; the connection is shared with the page's other calls.
  const stream = (request.raw as { stream?: { setTimeout(ms: number): unknown } }).stream;
  if (stream) {
    stream.setTimeout(0);
    return;
  }
  const socket = request.raw.socket;
  if (typeof socket?.setTimeout === 'function') socket.setTimeout(0); // (no real socket under inject())
}
