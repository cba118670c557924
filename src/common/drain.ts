import { Logger } from '@nestjs/common';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Socket } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { errorBody } from './filters/http-exception.filter.js';

const COUNTED = Symbol('cas:counted');
type Counted = FastifyRequest & { [COUNTED]?: boolean };

/**
 * Graceful shutdown: once draining, new requests get a clean 503 (and the connection is closed)
 * while the requests already in flight run to completion.
 */
export class RequestDrain {
  private readonly logger = new Logger('Drain');
  private inFlight = 0;
  private draining = false;
  private onIdle?: () => void;
  private readonly drainListeners: Array<() => void> = [];

  /** Every open client connection, upgraded ones (terminal sessions) included. */
  private readonly sockets = new Set<Socket>();

  register(fastify: FastifyInstance): void {
    fastify.server.on('connection', (socket: Socket) => {
      this.sockets.add(socket);
      socket.once('close', () => this.sockets.delete(socket));
    });
    // Callback-style hooks: nothing here waits, so no promise per request.
    fastify.addHook('onRequest', (request, reply, next) => {
      if (this.draining) {
        // HTTP/2 has no `Connection` header: the session is told to take no new streams (GOAWAY) instead.
        const session = (request.raw as { stream?: { session?: { close(): void } } }).stream?.session;
        if (session) reply.raw.once('finish', () => session.close());
        else reply.header('connection', 'close');
        // Answered here: the request goes no further (no next()).
        void reply.code(503).send(errorBody(503, 'the service is shutting down; try again', String(request.id)));
        return;
      }
      this.inFlight++;
      (request as Counted)[COUNTED] = true;
      next();
    });
    const finished = (request: FastifyRequest, _reply: unknown, next: () => void) => {
      if ((request as Counted)[COUNTED]) {
        (request as Counted)[COUNTED] = false;
        this.inFlight--;
        if (this.draining && this.inFlight === 0) this.onIdle?.();
      }
      next();
    };
    fastify.addHook('onResponse', finished);
    fastify.addHook('onRequestAbort', (request, next) => finished(request, undefined, next));
  }

  /**
   * Called once when draining starts: long-lived responses (watch streams) close themselves then,
   * so they do not hold shutdown for the whole grace period and their clients reconnect elsewhere.
   */
  onDrain(listener: () => void): void {
    if (this.draining) listener();
    else this.drainListeners.push(listener);
  }

  get isDraining(): boolean {
    return this.draining;
  }

  get active(): number {
    return this.inFlight;
  }

  /** Stops taking requests; resolves true when those in flight have finished, false when the bound ran out first. */
  async drain(timeoutMs: number): Promise<boolean> {
    if (!this.draining) {
      this.draining = true;
      for (const listener of this.drainListeners.splice(0)) {
        try {
          listener();
        } catch (error) {
          // One listener failing must not keep the others (or the drain) from running.
          this.logger.error(`a drain listener failed: ${(error as Error)?.stack ?? String(error)}`);
        }
      }
    }
    if (this.inFlight === 0) return true;
    const idle = new Promise<boolean>((resolve) => (this.onIdle = () => resolve(true)));
    return Promise.race([idle, sleep(timeoutMs, false, { ref: false })]);
  }

  /**
   * Closes every client connection still open. Called once the grace period is over: a stream told to end whose
   * client no longer reads (its last bytes never leave), a client that never answers a WebSocket close, would
   * otherwise hold the server's close, and the process, for as long as the client likes.
   */
  closeConnections(): number {
    const open = this.sockets.size;
    for (const socket of this.sockets) socket.destroy();
    this.sockets.clear();
    return open;
  }
}

const drains = new WeakMap<object, RequestDrain>();

export function attachDrain(app: object, fastify: FastifyInstance): RequestDrain {
  const drain = new RequestDrain();
  drain.register(fastify);
  drains.set(app, drain);
  drains.set(fastify, drain);
  return drain;
}

/** The drain of a Nest app or of its Fastify instance (what providers can reach through HttpAdapterHost). */
export function drainOf(app: object): RequestDrain {
  const drain = drains.get(app);
  if (!drain) throw new Error('the app was not created by createApp()');
  return drain;
}
