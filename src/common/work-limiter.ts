/** The work limiter is full: the caller should come back shortly. */
export class BusyError extends Error {}

/**
 * Runs at most `concurrency` tasks at once; up to `maxWaiting` more wait their turn in order, and
 * anything beyond that is refused at once with BusyError (so waiting is bounded too).
 */
export class WorkLimiter {
  private running = 0;
  private readonly waiting: Array<() => void> = [];

  constructor(
    private readonly concurrency: number,
    private readonly maxWaiting: number,
  ) {}

  /** Whether a task would be refused at once (every slot busy and the queue full). */
  get full(): boolean {
    return this.running >= this.concurrency && this.waiting.length >= this.maxWaiting;
  }

  async run<T>(task: () => Promise<T>): Promise<T> {
    if (this.running >= this.concurrency) {
      if (this.waiting.length >= this.maxWaiting) throw new BusyError('too many operations waiting');
      await new Promise<void>((resolve) => this.waiting.push(resolve));
    } else {
      this.running++;
    }
    try {
      return await task();
    } finally {
      const next = this.waiting.shift();
      if (next) next();
      else this.running--;
    }
  }
}
