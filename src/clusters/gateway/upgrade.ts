import { WebSocket } from 'ws';
import type { ClientRequest, IncomingMessage } from 'node:http';
import { readBounded } from '../../common/read-bounded.js';

/** What a cluster answered to a WebSocket upgrade. */
export type UpgradeAnswer =
  /** Paused: `resume()` it once its messages are listened to. */
  | { open: true; socket: WebSocket }
  /** Refused before the upgrade (a Status for an unknown pod or container, a 403…): passed on to the caller. */
  | { open: false; statusCode: number; contentType: string; body: Buffer };

/** The largest refusal read (a Status is a few hundred bytes). */
const REFUSAL_LIMIT = 64 * 1024;

/**
 * Opens a WebSocket to `url` with these headers and TLS settings; resolves once the cluster has
 * answered the upgrade (open, or refused with its status and body), rejects on a connection failure.
 */
export function openWebSocket(
  url: URL,
  protocols: string[],
  headers: Record<string, string | string[]>,
  tls: Readonly<Record<string, unknown>>,
  timeoutMs: number,
): Promise<UpgradeAnswer> {
  return new Promise((resolve, reject) => {
    const socket = new WebSocket(url, protocols, {
      ...tls,
      headers: headers as Record<string, string>,
      handshakeTimeout: timeoutMs,
      perMessageDeflate: false,
      // Frames are relayed as they come: a cluster's message may be as large as the client's.
      maxPayload: 64 * 1024 * 1024,
      followRedirects: false,
    });
    socket.once('open', () => {
      // Paused until the caller listens: a message that came now would be lost.
      socket.pause();
      // The owner listens for errors from now on; until then one must not crash the process.
      socket.removeListener('error', reject);
      socket.on('error', () => undefined);
      resolve({ open: true, socket });
    });
    socket.once('unexpected-response', (req: ClientRequest, res: IncomingMessage) => {
      // Taken now: once the answer has ended, neither the request nor the response holds it any more.
      const connection = res.socket;
      readBounded(res, REFUSAL_LIMIT, () => new Error('refusal too large'))
        .catch(() => Buffer.alloc(0))
        .then((body) => {
          resolve({
            open: false,
            statusCode: res.statusCode ?? 502,
            contentType: String(res.headers['content-type'] ?? 'text/plain'),
            body,
          });
          // The refusal's connection is not reused (nothing pools it): without this it stays open until the
          // cluster closes it, one per refused session.
          connection?.destroy();
          req.destroy();
        }, reject);
    });
    socket.once('error', reject);
  });
}
