import { GoneException, Inject, Injectable } from '@nestjs/common';
import { createHmac, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import net from 'node:net';
import type { Duplex } from 'node:stream';
import tls from 'node:tls';
import { APP_CONFIG, type AppConfig } from '../config/config.js';
import { Replicas } from '../database/replicas.js';

/** The signature of a forwarded upgrade, and the client's address it vouches for. */
const SIGNATURE = 'x-cas-replica-signature';
const FORWARDED_FOR = 'x-cas-replica-forwarded-for';
/** How old a signature may be (the replicas' clocks differ a little). */
const SIGNATURE_MS = 60_000;
/** A holder that does not accept the connection, or answer the upgrade, within these is taken for gone. */
const CONNECT_MS = 2000;
const ANSWER_MS = 10_000;

/**
 * A resumption that lands on a replica other than the one holding the session (its id names the
 * holder) is forwarded there: the holder's address from the database (Replicas), the client's upgrade
 * request passed on as it came, signed with CAS_REPLICA_SECRET so that the holder believes the client's
 * address it carries (for its audit rows) and never forwards it again; then the bytes both ways. The
 * holder checks the credential, rules and session as for any resumption. A holder that is gone (no
 * registration, or no connection within CONNECT_MS) is a 410 "session lost" at once.
 */
@Injectable()
export class SessionForwarding {
  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly replicas: Replicas,
  ) {}

  /** The replica holding a session, when it is not this one. */
  holderOf(sessionId: string): string | undefined {
    const holder = sessionId.slice(0, sessionId.indexOf('.'));
    return holder === this.replicas.id ? undefined : holder;
  }

  /** The client's address a replica vouches for, when the request was forwarded by one (its signature holds). */
  forwardedFor(req: IncomingMessage): string | undefined {
    const secret = this.config.exec.replicaSecret;
    const signature = req.headers[SIGNATURE];
    const address = req.headers[FORWARDED_FOR];
    if (!secret || typeof signature !== 'string' || typeof address !== 'string') return undefined;
    const [at, given] = signature.split('.');
    if (!/^\d{1,15}$/.test(at ?? '') || Math.abs(Date.now() - Number(at)) > SIGNATURE_MS) return undefined;
    const expected = sign(secret, at, req, address);
    const ok = given?.length === expected.length && timingSafeEqual(Buffer.from(given), Buffer.from(expected));
    return ok ? address : undefined;
  }

  /** Passes the client's upgrade on to the holder (410 "session lost" when the holder is gone). */
  async forward(
    req: IncomingMessage,
    socket: Duplex,
    head: Buffer,
    o: { sessionId: string; holder: string; clientAddress: string | null; forwarded: boolean },
  ): Promise<void> {
    const lost = (why: string) =>
      new GoneException(`session '${o.sessionId}' is lost: the replica holding it ${why}; open a new session`);
    // A replica forwards to the holder it found; another hop would mean the registration is stale.
    if (o.forwarded) throw lost('is not the one its address was registered for');
    const secret = this.config.exec.replicaSecret;
    const url = secret ? await this.replicas.urlOf(o.holder) : null;
    if (!url) throw lost('is gone (or registers no CAS_REPLICA_URL)');
    const target = new URL(url);
    const holder = await connect(target).catch(() => undefined);
    if (!holder) throw lost('does not answer');
    if (socket.destroyed) return void holder.destroy();
    const address = o.clientAddress ?? '';
    const at = String(Date.now());
    const lines = [`${req.method} ${req.url} HTTP/1.1`];
    for (let i = 0; i < req.rawHeaders.length; i += 2) {
      const name = req.rawHeaders[i].toLowerCase();
      if (name === SIGNATURE || name === FORWARDED_FOR) continue; // a client's own say nothing
      lines.push(`${req.rawHeaders[i]}: ${req.rawHeaders[i + 1]}`);
    }
    lines.push(`${SIGNATURE}: ${at}.${sign(secret!, at, req, address)}`, `${FORWARDED_FOR}: ${address}`);
    holder.write(lines.join('\r\n') + '\r\n\r\n');
    if (head.length > 0) holder.write(head);
    // A holder that accepted the connection but never answers does not hold the client forever.
    const silent = setTimeout(() => holder.destroy(), ANSWER_MS).unref();
    holder.once('data', () => clearTimeout(silent));
    const end = () => {
      clearTimeout(silent);
      holder.destroy();
      socket.destroy();
    };
    holder.on('error', end).on('close', end);
    socket.on('error', end).on('close', end);
    holder.pipe(socket);
    socket.pipe(holder);
  }
}

function sign(secret: string, at: string, req: IncomingMessage, address: string): string {
  return createHmac('sha256', secret).update(`${at}\n${req.method}\n${req.url}\n${address}`).digest('base64url');
}

/** A connection to the holder's address (TLS for https), or a rejection within CONNECT_MS. */
function connect(target: URL): Promise<net.Socket> {
  const host = target.hostname.replace(/^\[|\]$/g, '');
  const port = Number(target.port) || (target.protocol === 'https:' ? 443 : 80);
  return new Promise((resolve, reject) => {
    const socket =
      target.protocol === 'https:'
        ? tls.connect({ host, port, servername: net.isIP(host) ? undefined : host })
        : net.connect({ host, port });
    const fail = (error: Error) => {
      clearTimeout(timer);
      socket.destroy();
      reject(error);
    };
    const timer = setTimeout(() => fail(new Error('connect timed out')), CONNECT_MS);
    socket.once('error', fail);
    socket.once(target.protocol === 'https:' ? 'secureConnect' : 'connect', () => {
      clearTimeout(timer);
      socket.removeListener('error', fail);
      socket.setNoDelay(true);
      resolve(socket);
    });
  });
}
