import type { FastifyInstance, FastifyRequest } from 'fastify';
import { setTimeout as sleep } from 'node:timers/promises';
import { errorBody } from './filters/http-exception.filter.js';

const COUNTED = Symbol('cas:counted');
type Counted = FastifyRequest & { [COUNTED]?: boolean };

/**
 * Graceful shutdown: once draining, new requests get a clean 503 (and the connection is closed)
 * while the requests already in flight run to completion.
 */
export class RequestDrain {
  private inFlight = 0;
  private draining = false;
  private onIdle?: () => void;
  private readonly drainListeners = new Set<() => void>();

  register(fastify: FastifyInstance): void {
    fastify.addHook('onRequest', async (request, reply) => {
      if (this.draining) {
        reply.header('connection', 'close');
        return reply.code(503).send(errorBody(503, 'the service is shutting down; try again', String(request.id)));
      }
      this.inFlight++;
      (request as Counted)[COUNTED] = true;
    });
    const done = async (request: FastifyRequest) => {
      if (!(request as Counted)[COUNTED]) return;
      (request as Counted)[COUNTED] = false;
      this.inFlight--;
      if (this.draining && this.inFlight === 0) this.onIdle?.();
    };
    fastify.addHook('onResponse', done);
    fastify.addHook('onRequestAbort', done);
  }

  get active(): number {
    return this.inFlight;
  }

  /** Called once when draining starts: long-lived streams end themselves so clients reconnect elsewhere. */
  onDrain(listener: () => void): void {
    this.drainListeners.add(listener);
  }

  /** Stops taking requests; resolves true when those in flight have finished, false when the bound ran out first. */
  async drain(timeoutMs: number): Promise<boolean> {
    const first = !this.draining;
    this.draining = true;
    if (first) for (const listener of this.drainListeners) listener();
    if (this.inFlight === 0) return true;
    const idle = new Promise<boolean>((resolve) => (this.onIdle = () => resolve(true)));
    return Promise.race([idle, sleep(timeoutMs, false, { ref: false })]);
  }
}

const drains = new WeakMap<object, RequestDrain>();

export function attachDrain(app: object, fastify: FastifyInstance): RequestDrain {
  const drain = new RequestDrain();
  drain.register(fastify);
  drains.set(app, drain);
  return drain;
}

export function drainOf(app: object): RequestDrain {
  const drain = drains.get(app);
  if (!drain) throw new Error('the app was not created by createApp()');
  return drain;
}
