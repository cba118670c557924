// Work that would hold the event loop for long (parsing a large YAML body, diffing large objects) runs
// on a worker thread of its own: a few at a time, a bounded queue behind them, a bounded heap each.
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';
import { WorkLimiter } from './work-limiter.js';

export { BusyError as WorkerBusyError } from './work-limiter.js';

interface TaskData<I> {
  task: string;
  input: I;
}

/**
 * One kind of task, served by the module at `moduleUrl` (which calls `serveTask(name, …)` at its top
 * level). `run` starts a thread per task, at most `threads` at once and `waiting` more in line; beyond
 * that it throws WorkerBusyError at once. A thread that fails (out of its heap) or runs longer than
 * `timeoutMs` (then it is stopped) rejects with an Error.
 */
export class WorkerTasks<I, O> {
  private readonly limiter: WorkLimiter;

  constructor(
    private readonly moduleUrl: URL,
    private readonly name: string,
    private readonly options: { threads: number; waiting: number; heapMb: number; timeoutMs: number },
  ) {
    this.limiter = new WorkLimiter(options.threads, options.waiting);
  }

  run(input: I): Promise<O> {
    return this.limiter.run(
      () =>
        new Promise<O>((resolve, reject) => {
          const data: TaskData<I> = { task: this.name, input };
          const worker = new Worker(this.moduleUrl, {
            workerData: data,
            resourceLimits: { maxOldGenerationSizeMb: this.options.heapMb },
          });
          const timer = setTimeout(() => void worker.terminate(), this.options.timeoutMs);
          worker.once('message', (output: O) => resolve(output));
          worker.once('error', (error) => reject(error));
          worker.once('exit', (code) => {
            clearTimeout(timer);
            if (code !== 0) reject(new Error(`the ${this.name} thread exited with ${code}`));
          });
        }),
    );
  }
}

/** In a thread started for task `name`: answers with `work(input)`; elsewhere, nothing. */
export function serveTask<I, O>(name: string, work: (input: I) => O): void {
  if (isMainThread || !parentPort || (workerData as TaskData<I> | null)?.task !== name) return;
  parentPort.postMessage(work((workerData as TaskData<I>).input));
}
