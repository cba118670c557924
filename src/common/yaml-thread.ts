// YAML bodies beyond a few KiB are parsed on a worker thread: parsing costs tens of µs per line, flow
// item or document, so even a body of tens of KiB (hundreds of small documents, thousands of flow items)
// would hold the event loop (every other request) for longer than it may, and one at the bounds for
// seconds. Small bodies (a manifest or two) are parsed inline, where starting a thread costs more.
import { parseBoundedYamlStream, type YamlBounds } from './bounded-yaml.js';
import { serveTask, WorkerBusyError, WorkerTasks } from './worker-task.js';

export { WorkerBusyError as YamlParserBusyError } from './worker-task.js';

type Parsed = ReturnType<typeof parseBoundedYamlStream>;
interface ParseInput {
  text: string;
  bounds: YamlBounds;
  subject: string;
}

/** Texts up to this many characters are parsed on the calling thread. */
export const INLINE_YAML_CHARS = 4 * 1024;
/**
 * Texts that may wait for one of the two threads (each holds its body meanwhile); beyond, a text is
 * refused at once with YamlParserBusyError, before anything else is spent on it.
 */
export const MAX_WAITING_YAML_TEXTS = 8;

/**
 * Two threads, each with a heap enough for a 10 MiB body's values (never the whole process's memory),
 * and far more time than a body at the bounds takes (about a second).
 */
const threads = new WorkerTasks<ParseInput, Parsed>(new URL(import.meta.url), 'yaml', {
  threads: 2,
  waiting: MAX_WAITING_YAML_TEXTS,
  heapMb: 256,
  timeoutMs: 30_000,
});

/**
 * `parseBoundedYamlStream`, on a worker thread when the text is large; throws YamlParserBusyError
 * when every thread is busy and the queue is full.
 */
export async function parseYamlStream(text: string, bounds: YamlBounds, subject: string): Promise<Parsed> {
  if (text.length <= INLINE_YAML_CHARS) return parseBoundedYamlStream(text, bounds, subject);
  try {
    return await threads.run({ text, bounds, subject });
  } catch (error) {
    if (error instanceof WorkerBusyError) throw error;
    // Out of the worker's memory (or the thread failed otherwise): the body is refused, never the process.
    return { problem: { message: `${subject} is too large to parse as YAML: send it as JSON` } };
  }
}

serveTask<ParseInput, Parsed>('yaml', ({ text, bounds, subject }) => parseBoundedYamlStream(text, bounds, subject));
