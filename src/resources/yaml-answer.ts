// Reads answered as YAML (`Accept: application/yaml`): the cluster's JSON written by the `yaml` library.
// Writing YAML costs about a microsecond per byte, so an answer of more than a few KiB is written on a
// worker thread (as apply's diffs and YAML bodies are), and the answer is bounded.
import { HttpException, ServiceUnavailableException } from '@nestjs/common';
import { Readable } from 'node:stream';
import { stringify } from 'yaml';
import type { ClusterAnswer } from '../clusters/gateway/answer.js';
import type { ClusterClient } from '../clusters/gateway/cluster-client.js';
import { badAnswer, translateFailure } from '../clusters/gateway/failures.js';
import { readBounded } from '../common/read-bounded.js';
import { serveTask, WorkerBusyError, WorkerTasks } from '../common/worker-task.js';

export const JSON_TYPE = 'application/json';
export const YAML_TYPE = 'application/yaml';
/** What a read of resources answers in, the default first. */
export const READ_TYPES = [JSON_TYPE, YAML_TYPE] as const;

/** The most JSON a read answers as YAML (a larger list: page it with `limit`, or read it as JSON). */
export const MAX_YAML_ANSWER_BYTES = 8 * 1024 * 1024;
/** Answers up to this size are written inline: well under a few milliseconds. */
const INLINE_YAML_BYTES = 8 * 1024;

const threads = new WorkerTasks<string, string | null>(new URL(import.meta.url), 'yaml-answer', {
  threads: 2,
  waiting: 8,
  heapMb: 512,
  timeoutMs: 30_000,
});

/**
 * JSON text as YAML: block style, long strings never folded (a YAML reader gets back the same values);
 * null when the text is not JSON.
 */
function yamlOf(json: string): string | null {
  let value: unknown;
  try {
    value = JSON.parse(json);
  } catch {
    return null;
  }
  return stringify(value, { lineWidth: 0, aliasDuplicateObjects: false });
}

function tooLarge(limit: number): HttpException {
  return new HttpException(
    `the answer is larger than ${limit / 1024 / 1024} MiB as JSON, more than is answered as YAML: page the list with limit, or ask for application/json`,
    406,
  );
}

/**
 * A successful answer of the cluster as YAML; any other (the cluster's `Status` of a refusal) as it came.
 * Bounded: MAX_YAML_ANSWER_BYTES of JSON (406 beyond), and a 503 with Retry-After when every writer
 * thread is busy and the queue is full.
 */
export async function yamlAnswer(cluster: ClusterClient, answer: ClusterAnswer): Promise<ClusterAnswer> {
  if (answer.statusCode < 200 || answer.statusCode >= 300) return answer;
  const json =
    answer instanceof Readable
      ? await readBounded(answer, MAX_YAML_ANSWER_BYTES, tooLarge).catch((error: unknown) => {
          throw translateFailure(cluster.target, error, cluster.timeoutMs);
        })
      : answer.body;
  if (json.length > MAX_YAML_ANSWER_BYTES) throw tooLarge(MAX_YAML_ANSWER_BYTES);
  const text = json.toString('utf8');
  let yaml: string | null;
  try {
    yaml = json.length <= INLINE_YAML_BYTES ? yamlOf(text) : await threads.run(text);
  } catch (error) {
    if (error instanceof WorkerBusyError) {
      throw new ServiceUnavailableException({
        message: 'too many large answers are being written as YAML; try again in a moment (or ask for JSON)',
        retryAfter: 1,
      });
    }
    // The thread ran out of its heap or its time: the answer is refused, never the process.
    throw new HttpException('the answer is too large to write as YAML: ask for application/json', 406);
  }
  if (yaml === null) throw badAnswer(cluster.target, 'with something that is not JSON');
  const warning = answer instanceof Readable ? answer.headers.warning : answer.warning;
  return { statusCode: answer.statusCode, contentType: YAML_TYPE, body: Buffer.from(yaml, 'utf8'), warning };
}

serveTask<string, string | null>('yaml-answer', yamlOf);
