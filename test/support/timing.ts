import { monitorEventLoopDelay } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';

/**
 * How long the event loop was held at most while `work` ran, in ms: the worst delay the loop saw, but at
 * most the CPU time the process spent meanwhile (user and system, every thread). Work that holds the loop
 * spends CPU; a loop delayed because the shared machine gave the process no core spends none (see
 * test/http/event-loop-guard.test.ts).
 */
export async function loopHeld<T>(work: () => Promise<T>): Promise<{ result: T; heldMs: number }> {
  const histogram = monitorEventLoopDelay({ resolution: 5 });
  histogram.enable();
  await sleep(20); // the histogram samples on a timer: let it start, and record after the work
  const cpuBefore = process.cpuUsage();
  try {
    const result = await work();
    const cpu = process.cpuUsage(cpuBefore);
    await sleep(20);
    return { result, heldMs: Math.min(histogram.max / 1e6, (cpu.user + cpu.system) / 1000) };
  } finally {
    histogram.disable();
  }
}

/** `promise`, or a failure naming `what` after `ms` (a test that would otherwise hang fails instead). */
export async function within<T>(what: string, ms: number, promise: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: not within ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([promise, late]);
  } finally {
    clearTimeout(timer);
  }
}
