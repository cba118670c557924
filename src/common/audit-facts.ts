import type { FastifyRequest } from 'fastify';
import { pipeline, type Readable, Transform } from 'node:stream';

/** Methods that only read: not audited unless refused (403, or 401 naming a user). */
const READ_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

export function isWriteMethod(method: string): boolean {
  return !READ_METHODS.has(method.toUpperCase());
}

/** A write answer larger than this is not kept for its uid/resourceVersion (objects are far smaller). */
export const MAX_PEEKED_ANSWER = 2 * 1024 * 1024;

/**
 * Small facts a route puts on its request for the audit row that the request itself does not show:
 * who tried to log in, the target a service resolved, the cluster's answer to a resource write.
 * Never a body of the caller's.
 */
export interface AuditFacts {
  /** The actor when the request carries no authenticated caller (login: the username tried; its id once known). */
  actor?: { kind: 'user'; id: number | null; name: string };
  /**
   * A call on the Kubernetes API path (`/clusters/<name>/k8s/...`), whose route parameters do not
   * name the object: the cluster, the apiserver's verb and the object as the request was parsed.
   */
  kube?: { cluster: string; verb: string; resource: string | null; namespace: string | null; name: string | null };
  /**
   * Apply: the documents the request applied (or tried to), each recorded as a row of its own, with its
   * target and the cluster's status for it, in place of the request's one row. Never a document's body.
   */
  documents?: AuditedDocument[];
  /**
   * A Helm operation (install, upgrade, rollback, uninstall): one row naming the release as `helmreleases`
   * (the objects Helm writes are rows of their own, made on the Kubernetes API path as the person). Never a value.
   */
  helm?: { cluster: string; namespace: string; name: string | null; dryRun: boolean };
  /**
   * The cluster object a route acts on when its path does not name it as the resource routes do (the debug
   * route: `pods/ephemeralcontainers` of a pod), and what the row's `detail` says of the call (image, target).
   */
  object?: { cluster: string; resource: string; namespace: string | null; name: string | null };
  detail?: Record<string, unknown>;
  /** Overrides the target the route's path gives. */
  target?: { kind: string; id: string | null };
  /** The cluster's answer to a resource write (bounded), read once the response is sent for uid and resourceVersion. */
  answer?: Buffer;
  /** A small JSON response of a create, read once the response is sent for the new object's `id`. */
  created?: string;
  /** The answer has been handed to Fastify (its status is final). */
  sent?: boolean;
  /** The caller hung up before the answer was sent. */
  callerGone?: boolean;
  /**
   * Overrides what the method says: true for a read method that changes state (a single sign-on
   * callback starts a session), false for a write method that only asks (`can-i`).
   */
  changesState?: boolean;
}

/** One applied document, as its audit row names it. */
export interface AuditedDocument {
  cluster: string;
  resource: string | null;
  namespace: string | null;
  name: string | null;
  uid: string | null;
  resourceVersion: string | null;
  statusCode: number;
}

const FACTS = Symbol('cas:audit-facts');
type WithFacts = FastifyRequest & { [FACTS]?: AuditFacts };

export function auditFactsOf(request: FastifyRequest): AuditFacts {
  const r = request as WithFacts;
  return (r[FACTS] ??= {});
}

/** Adds facts for the audit row of this request. */
export function noteAudit(request: FastifyRequest, facts: AuditFacts): void {
  Object.assign(auditFactsOf(request), facts);
}

/**
 * The cluster's streamed answer to a write, passed through unchanged while its first
 * `MAX_PEEKED_ANSWER` bytes are kept for the audit row. Reads never come here: they stream untouched.
 */
export function peekWriteAnswer(request: FastifyRequest, answer: Readable): Readable {
  const chunks: Buffer[] = [];
  let size = 0;
  const peek = new Transform({
    transform(chunk: Buffer, _encoding, callback) {
      if (size <= MAX_PEEKED_ANSWER) {
        size += chunk.length;
        if (size <= MAX_PEEKED_ANSWER) chunks.push(chunk);
        else chunks.length = 0;
      }
      callback(null, chunk);
    },
    flush(callback) {
      if (size <= MAX_PEEKED_ANSWER) noteAudit(request, { answer: Buffer.concat(chunks) });
      callback();
    },
  });
  // An upstream failure destroys the pass-through with the error, as it would the answer itself.
  pipeline(answer, peek, () => undefined);
  return peek;
}
