import { performance } from 'node:perf_hooks';
import type { Dispatcher } from 'undici';
import { outcomeOfStatus, recordClusterRequest } from '../../observability/service-metrics.js';
import { AnswerHandler, type Answered, type ClusterAnswer, type Gather } from './answer.js';
import { classifyFailure, ClusterTimeoutError } from './failures.js';

/** One request and how to send it: the one way every call toward a cluster or its metrics endpoint leaves. */
export interface Exchange {
  dispatcher: Dispatcher;
  options: Dispatcher.DispatchOptions;
  gather: Gather;
  /** How long the answer may take to start. */
  timeoutMs: number;
  /** How long the dispatcher itself tries to connect: a shorter `timeoutMs` gets a deadline of its own. */
  connectTimeoutMs?: number;
  /** Whether the request may be sent again when a kept-alive connection turned out closed before any answer. */
  repeatable: boolean;
  /** For the request metrics. */
  cluster: string;
  target: 'apiserver' | 'metrics';
}

/** A kept-alive connection the server had closed meanwhile: the request never got an answer. */
const STALE_CONNECTION = new Set(['UND_ERR_SOCKET', 'ECONNRESET']);

/**
 * Sends the request and resolves with its answer (whole or streamed, as `gather` says), recording it in
 * the cluster request metrics. Failures are the raw errors: the caller translates them.
 */
export async function exchange(x: Exchange): Promise<ClusterAnswer> {
  const started = performance.now();
  const answered: Answered = { at: 0 };
  const seconds = () => ((answered.at || performance.now()) - started) / 1000;
  try {
    const answer = await once(x, answered).catch((error: unknown) => {
      // Sent again only when no answer had begun: a read that broke off midway is not repeated.
      if (answered.at === 0 && x.repeatable && STALE_CONNECTION.has((error as NodeJS.ErrnoException).code ?? '')) {
        return once(x, answered);
      }
      throw error;
    });
    recordClusterRequest(x.cluster, x.target, outcomeOfStatus(answer.statusCode), seconds());
    return answer;
  } catch (error) {
    const kind = classifyFailure(error);
    recordClusterRequest(x.cluster, x.target, kind === 'other' ? 'error' : kind, seconds());
    throw error;
  }
}

function once(x: Exchange, answered: Answered): Promise<ClusterAnswer> {
  return new Promise<ClusterAnswer>((resolve, reject) => {
    let deadline: NodeJS.Timeout | undefined;
    const handler = new AnswerHandler(
      String(x.options.method),
      x.gather,
      answered,
      (answer) => {
        clearTimeout(deadline);
        resolve(answer);
      },
      (error) => {
        clearTimeout(deadline);
        reject(error);
      },
    );
    if (x.timeoutMs < (x.connectTimeoutMs ?? Infinity)) {
      deadline = setTimeout(
        () => handler.abort(new ClusterTimeoutError(`no answer within ${x.timeoutMs} ms`)),
        x.timeoutMs,
      );
    }
    x.dispatcher.dispatch(x.options, handler);
  });
}
