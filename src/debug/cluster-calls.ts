import { HttpException } from '@nestjs/common';
import type { ClusterCall, ClusterClient } from '../clusters/gateway/cluster-client.js';

/** A cluster's answer read whole (bounded by the gateway) and parsed when it is JSON. */
export interface JsonAnswer {
  status: number;
  body: any;
}

/** Sends one call and reads its (small) answer. */
export async function callJson(client: ClusterClient, call: ClusterCall): Promise<JsonAnswer> {
  const res = await client.send({ accept: 'application/json', ...call });
  const raw = await client.read(res);
  let body: unknown = null;
  if (raw.length > 0) {
    try {
      body = JSON.parse(raw.toString('utf8'));
    } catch {
      body = null;
    }
  }
  return { status: res.statusCode, body };
}

/** The cluster's refusal, passed on with its status (a 4xx) and message; anything else is a 502 naming the cluster. */
export function refusedBy(client: ClusterClient, answer: JsonAnswer, what: string): HttpException {
  const message =
    typeof answer.body?.message === 'string' ? answer.body.message.slice(0, 1000) : `HTTP ${answer.status}`;
  const status = answer.status >= 400 && answer.status < 500 ? answer.status : 502;
  return new HttpException(`${client.target} refused ${what}: ${message}`, status);
}

/** A container's state that will not become `running` by waiting: the kubelet's reason, else null. */
export function stuckReason(state: any): string | null {
  const waiting = state?.waiting;
  if (waiting && typeof waiting.reason === 'string' && STUCK.has(waiting.reason)) {
    return `${waiting.reason}${typeof waiting.message === 'string' ? `: ${waiting.message.slice(0, 500)}` : ''}`;
  }
  const terminated = state?.terminated;
  if (terminated) {
    return `it terminated (${String(terminated.reason ?? 'exit code ' + String(terminated.exitCode)).slice(0, 200)})`;
  }
  return null;
}

/** Waiting reasons of a kubelet that mean the container cannot start as asked. */
const STUCK = new Set([
  'ErrImagePull',
  'ImagePullBackOff',
  'InvalidImageName',
  'ErrImageNeverPull',
  'CreateContainerConfigError',
  'CreateContainerError',
  'RunContainerError',
  'CrashLoopBackOff',
]);
