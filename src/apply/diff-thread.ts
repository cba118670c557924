// The diff of a large object is computed on a worker thread: written as YAML and compared line by line,
// a large object takes far longer than the event loop may be held for every other request (one changed
// all over, longer still). Small objects are diffed inline.
import { serveTask, WorkerBusyError, WorkerTasks } from '../common/worker-task.js';
import { unifiedDiff } from './apply-diff.js';

type Obj = Record<string, any>;
interface DiffInput {
  label: string;
  before: Obj | null;
  after: Obj;
  secret: boolean;
  /** How long finding the changes may take (THREAD_TIMEOUT_MS unless given). */
  timeoutMs?: number;
}

/** Objects up to this many bytes (before and after, as the cluster sent them) are diffed inline. */
export const INLINE_DIFF_BYTES = 64 * 1024;
/** How long finding the changes may take: inline (small objects, never near it) and on a thread. */
const INLINE_TIMEOUT_MS = 50;
const THREAD_TIMEOUT_MS = 5_000;

/** Writing a large object of many keys as YAML alone can take seconds: a thread is stopped after 20 s. */
const threads = new WorkerTasks<DiffInput, string | undefined>(new URL(import.meta.url), 'diff', {
  threads: 2,
  waiting: 16,
  heapMb: 256,
  timeoutMs: 20_000,
});

/** A diff that was not computed: the headers, and why, so it is never mistaken for "no change" (''). */
function notShown(input: DiffInput, why: string): string {
  return `--- ${input.before ? `a/${input.label}` : '/dev/null'}\n+++ b/${input.label}\n# ${why}\n`;
}

/**
 * The unified diff of `before` and `after` (see unifiedDiff), on a worker thread when they are larger
 * than INLINE_DIFF_BYTES (`bytes`: their size as the cluster sent them). Never throws: a diff that takes
 * too long, or finds every thread busy and the queue full, is the headers and a line saying so.
 */
export async function diffOf(input: DiffInput, bytes: number): Promise<string> {
  const tooLong = 'not shown: the changes take too long to find';
  if (bytes <= INLINE_DIFF_BYTES) {
    const { label, before, after, secret } = input;
    return unifiedDiff(label, before, after, secret, INLINE_TIMEOUT_MS) ?? notShown(input, tooLong);
  }
  try {
    return (await threads.run(input)) ?? notShown(input, tooLong);
  } catch (error) {
    const why = error instanceof WorkerBusyError ? 'too many large diffs are being computed' : 'too large to diff';
    return notShown(input, `not shown: ${why}`);
  }
}

serveTask<DiffInput, string | undefined>('diff', ({ label, before, after, secret, timeoutMs }) =>
  unifiedDiff(label, before, after, secret, timeoutMs ?? THREAD_TIMEOUT_MS),
);
