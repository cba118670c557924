import { randomUUID } from 'node:crypto';
import type { Socket } from 'node:net';
import { errorBody } from '../common/filters/http-exception.filter.js';

/** Sockets with an answer under way (from its head to its end). */
export const answeringSockets = new WeakSet<Socket>();

/**
 * An error answered on a bare socket, before Fastify has a request (a request not received in time,
 * malformed HTTP, one connection too many): still the service's shape. A socket that is in the middle
 * of an answer is only closed: a second status line would corrupt it.
 */
export function rawError(socket: Socket, statusCode: number, message: string): void {
  if (socket.destroyed) return;
  if (socket.writable && !answeringSockets.has(socket)) {
    const requestId = randomUUID();
    const body = JSON.stringify(errorBody(statusCode, message, requestId));
    // Ended, not destroyed at once: on a TLS socket the answer is still being encrypted after write() returns.
    socket.end(
      `HTTP/1.1 ${statusCode} ${errorBody(statusCode, '', '').error}\r\n` +
        `content-type: application/json; charset=utf-8\r\ncontent-length: ${Buffer.byteLength(body)}\r\n` +
        `x-request-id: ${requestId}\r\nconnection: close\r\n\r\n${body}`,
    );
    // A client that neither reads nor closes is not waited for.
    setTimeout(() => socket.destroy(), LINGER_MS).unref();
    return;
  }
  socket.destroy();
}

/** How long an answered socket may take to flush its error answer before it is closed anyway. */
const LINGER_MS = 1000;
