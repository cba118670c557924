// Large YAML bodies are parsed on a worker thread: parsing costs about 20–30 µs per line, so a body at
// the bounds would otherwise hold the event loop (every other request) for seconds. Small bodies are
// parsed inline, where starting a thread would cost more than the parse.
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';
import { parseBoundedYamlStream, type YamlBounds } from './bounded-yaml.js';
import { WorkLimiter } from './work-limiter.js';

export { BusyError as YamlParserBusyError } from './work-limiter.js';

type Parsed = ReturnType<typeof parseBoundedYamlStream>;

/** Texts up to this many characters are parsed on the calling thread. */
export const INLINE_YAML_CHARS = 64 * 1024;
/** Threads parsing at once; a request beyond waits for one to finish. */
const MAX_THREADS = 2;
/**
 * Texts that may wait for a thread (each holds its body meanwhile); beyond, a text is refused at once
 * with YamlParserBusyError, before anything else is spent on it.
 */
export const MAX_WAITING_YAML_TEXTS = 8;
/** A worker's heap: enough for a 10 MiB body's values, never the whole process's memory. */
const WORKER_HEAP_MB = 256;

const threads = new WorkLimiter(MAX_THREADS, MAX_WAITING_YAML_TEXTS);

/**
 * `parseBoundedYamlStream`, on a worker thread when the text is large; throws YamlParserBusyError
 * when every thread is busy and the queue is full.
 */
export async function parseYamlStream(text: string, bounds: YamlBounds, subject: string): Promise<Parsed> {
  if (text.length <= INLINE_YAML_CHARS) return parseBoundedYamlStream(text, bounds, subject);
  return threads.run(() => parseOnThread(text, bounds, subject));
}

async function parseOnThread(text: string, bounds: YamlBounds, subject: string): Promise<Parsed> {
  try {
    return await new Promise<Parsed>((resolve, reject) => {
      const worker = new Worker(new URL(import.meta.url), {
        workerData: { text, bounds, subject },
        resourceLimits: { maxOldGenerationSizeMb: WORKER_HEAP_MB },
      });
      worker.once('message', (parsed: Parsed) => resolve(parsed));
      worker.once('error', (error) => reject(error));
      worker.once('exit', (code) => {
        if (code !== 0) reject(new Error(`the YAML parser thread exited with ${code}`));
      });
    });
  } catch {
    // Out of the worker's memory (or the thread failed otherwise): the body is refused, never the process.
    return { problem: { message: `${subject} is too large to parse as YAML: send it as JSON` } };
  }
}

if (!isMainThread && parentPort && (workerData as { text?: unknown } | null)?.text !== undefined) {
  const { text, bounds, subject } = workerData as { text: string; bounds: YamlBounds; subject: string };
  parentPort.postMessage(parseBoundedYamlStream(text, bounds, subject));
}
