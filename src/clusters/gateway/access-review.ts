import { Injectable } from '@nestjs/common';
import type { ClusterClient } from './cluster-client.js';

/** What is asked: a resource (`group` '' for the core group) or a non-resource path, as in a SubjectAccessReview. */
export type ReviewAttributes =
  | { verb: string; group: string; resource: string; subresource?: string; namespace?: string; name?: string }
  | { verb: string; path: string };

/** How long the cluster's answer for one identity and question is reused. */
const TTL_MS = 5_000;
const MAX_ENTRIES = 10_000;

interface Entry {
  at: number;
  answer: Promise<string | null>;
}

/**
 * The cluster's own answer, on an impersonating cluster, to "may this person do this?": a
 * SelfSubjectAccessReview sent as the person (it needs no permission beyond `impersonate`). What the
 * service serves from something it reads for itself (a shared watch, shared discovery) is checked
 * with it, so the cluster's RBAC applies there as it does to a GET. Answers are reused for 5 s.
 */
@Injectable()
export class ClusterAccessReview {
  private readonly answers = new Map<string, Entry>();

  /** null when the cluster allows it (or the client is not impersonating anyone), else why not. */
  check(cluster: ClusterClient, attributes: ReviewAttributes): Promise<string | null> {
    const identity = cluster.identity;
    if (!identity) return Promise.resolve(null);
    const { conn } = cluster;
    const key = JSON.stringify([conn.clusterId, conn.generation, identity, attributes]);
    const now = Date.now();
    const cached = this.answers.get(key);
    if (cached && now - cached.at < TTL_MS) return cached.answer;
    if (this.answers.size >= MAX_ENTRIES) this.answers.clear();
    const answer = this.ask(cluster, attributes);
    this.answers.set(key, { at: now, answer });
    answer.catch(() => this.answers.get(key)?.answer === answer && this.answers.delete(key));
    return answer;
  }

  private async ask(cluster: ClusterClient, attributes: ReviewAttributes): Promise<string | null> {
    const spec = 'path' in attributes ? { nonResourceAttributes: attributes } : { resourceAttributes: attributes };
    const res = await cluster.send({
      method: 'POST',
      path: '/apis/authorization.k8s.io/v1/selfsubjectaccessreviews',
      body: Buffer.from(
        JSON.stringify({ apiVersion: 'authorization.k8s.io/v1', kind: 'SelfSubjectAccessReview', spec }),
      ),
    });
    const body = await cluster.read(res, 64 * 1024);
    const who = cluster.identity!.user;
    if (res.statusCode !== 201 && res.statusCode !== 200) {
      return `${cluster.target} could not review the access of ${who} (HTTP ${res.statusCode})`;
    }
    const status = (cluster.parse(body, 'the access review') as { status?: { allowed?: unknown; reason?: unknown } })
      ?.status;
    if (status?.allowed === true) return null;
    const what =
      'path' in attributes
        ? `${attributes.verb} ${attributes.path}`
        : `${attributes.verb} ${attributes.group ? `${attributes.resource}.${attributes.group}` : attributes.resource}` +
          (attributes.namespace ? ` in namespace '${attributes.namespace}'` : '');
    const reason = typeof status?.reason === 'string' && status.reason ? `: ${status.reason.slice(0, 300)}` : '';
    return `${cluster.target} does not allow ${who} to ${what}${reason}`;
  }
}
