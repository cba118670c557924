import { WebSocket } from 'ws';
import http, { type ClientRequest, type IncomingHttpHeaders, type IncomingMessage } from 'node:http';
import https from 'node:https';
import type { Duplex } from 'node:stream';
import { readBounded } from '../../common/read-bounded.js';
import { ClusterTimeoutError } from './failures.js';

/** What a cluster answered to a WebSocket upgrade. */
export type UpgradeAnswer =
  /** Paused: `resume()` it once its messages are listened to. */
  | { open: true; socket: WebSocket }
  /** Refused before the upgrade (a Status for an unknown pod or container, a 403…): passed on to the caller. */
  | { open: false; statusCode: number; contentType: string; body: Buffer };

/** The largest refusal read (a Status is a few hundred bytes). */
const REFUSAL_LIMIT = 64 * 1024;
/**
 * The largest WebSocket message of a terminal session, either way (the cluster's here, the client's in the
 * terminal). client-go writes one message per write of a stream, and copies stdin and port-forward data 32 KiB
 * at a time; the kubelet's output messages are as small. `ws` refuses a bigger one with 1009 (message too big)
 * as soon as its length is read, before holding any of it.
 */
export const MAX_WEBSOCKET_MESSAGE = 1024 * 1024;

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
      maxPayload: MAX_WEBSOCKET_MESSAGE,
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
      refusal(res).then((answer) => {
        resolve(answer);
        req.destroy();
      }, reject);
    });
    socket.once('error', reject);
  });
}

/** What a cluster answered to a raw (SPDY) upgrade. */
export type RawUpgradeAnswer =
  /** Paused; `head`: bytes the cluster sent after its 101, to be passed on first. */
  | { open: true; socket: Duplex; head: Buffer; headers: IncomingHttpHeaders }
  | { open: false; statusCode: number; contentType: string; body: Buffer };

/**
 * Asks `url` for an `Upgrade: <protocol>` (SPDY/3.1: kubectl's exec, attach and port-forward) with
 * these headers and TLS settings, on a connection of its own; resolves with the upgraded socket, or
 * the cluster's refusal (its status and body), rejects on a connection failure or no answer in time.
 */
export function openRawUpgrade(
  url: URL,
  protocol: string,
  headers: Record<string, string | string[]>,
  tls: Readonly<Record<string, unknown>>,
  timeoutMs: number,
): Promise<RawUpgradeAnswer> {
  return new Promise((resolve, reject) => {
    const request = (url.protocol === 'https:' ? https : http).request(url, {
      ...tls,
      method: 'GET',
      agent: false,
      headers: { ...headers, connection: 'Upgrade', upgrade: protocol },
    });
    const timer = setTimeout(
      () => request.destroy(new ClusterTimeoutError('no answer to the upgrade in time')),
      timeoutMs,
    );
    request.once('upgrade', (res: IncomingMessage, socket: Duplex, head: Buffer) => {
      clearTimeout(timer);
      socket.pause();
      // The owner listens for errors from now on; until then one must not crash the process.
      socket.on('error', () => socket.destroy());
      resolve({ open: true, socket, head, headers: res.headers });
    });
    request.once('response', (res: IncomingMessage) => {
      clearTimeout(timer);
      refusal(res).then(resolve, reject);
    });
    request.once('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
    request.end();
  });
}

/**
 * A refused upgrade's answer, read (at most REFUSAL_LIMIT) to be passed on. Its connection is then
 * closed: nothing pools it, and without this it stays open until the cluster closes it, one per
 * refused session. (Taken first: once the answer has ended, the response no longer holds it.)
 */
async function refusal(
  res: IncomingMessage,
): Promise<{ open: false; statusCode: number; contentType: string; body: Buffer }> {
  const connection = res.socket;
  const body = await readBounded(res, REFUSAL_LIMIT, () => new Error('refusal too large')).catch(() => Buffer.alloc(0));
  connection?.destroy();
  return {
    open: false,
    statusCode: res.statusCode ?? 502,
    contentType: String(res.headers['content-type'] ?? 'text/plain'),
    body,
  };
}
