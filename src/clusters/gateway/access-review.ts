import { BadGatewayException, Injectable } from '@nestjs/common';
import type { ClusterResourceRule } from '../../access/namespaces.js';
import type { ClusterClient } from './cluster-client.js';

/** What is asked: a resource (`group` '' for the core group) or a non-resource path, as in a SubjectAccessReview. */
export type ReviewAttributes =
  | { verb: string; group: string; resource: string; subresource?: string; namespace?: string; name?: string }
  | { verb: string; path: string };

/** The cluster's answer to a SelfSubjectAccessReview: its HTTP status, and the review's status when it sent one. */
export interface ReviewAnswer {
  statusCode: number;
  status?: { allowed?: unknown; denied?: unknown; reason?: unknown };
}

/** How long the cluster's answer for one identity and question is reused. */
const TTL_MS = 5_000;
const MAX_ENTRIES = 10_000;
/** A review's answer is small; anything larger is a cluster gone wrong. */
const MAX_ANSWER_BYTES = 64 * 1024;
const GROUP = 'authorization.k8s.io';

interface Entry<T> {
  at: number;
  answer: Promise<T>;
}

/** Answers reused for TTL_MS per key; a failed one is forgotten at once. */
class Reused<T> {
  private readonly answers = new Map<string, Entry<T>>();

  get(key: string, ask: () => Promise<T>): Promise<T> {
    const now = Date.now();
    const cached = this.answers.get(key);
    if (cached && now - cached.at < TTL_MS) return cached.answer;
    if (this.answers.size >= MAX_ENTRIES) this.answers.clear();
    const answer = ask();
    this.answers.set(key, { at: now, answer });
    answer.catch(() => this.answers.get(key)?.answer === answer && this.answers.delete(key));
    return answer;
  }
}

/**
 * The one client of a cluster's self reviews, asked as the person on an impersonating cluster (a
 * review needs no permission beyond `impersonate`): "may this person do this?" (SelfSubjectAccessReview)
 * and "what may this person do in this namespace?" (SelfSubjectRulesReview). What the service serves
 * from something it reads for itself (a shared watch, a list cache, shared discovery) is checked with
 * it, so the cluster's RBAC applies there as it does to a GET; the Kubernetes path puts a caller's own
 * access review to the cluster through it; the namespaces route asks it for the rules. Answers of
 * `check` and `rulesIn` are reused for 5 s.
 */
@Injectable()
export class ClusterAccessReview {
  private readonly checks = new Reused<string | null>();
  private readonly rules = new Reused<ClusterResourceRule[]>();

  /** null when the cluster allows it (or the client is not impersonating anyone), else why not. */
  check(cluster: ClusterClient, attributes: ReviewAttributes): Promise<string | null> {
    if (!cluster.identity) return Promise.resolve(null);
    return this.checks.get(this.keyOf(cluster, attributes), () => this.ask(cluster, attributes));
  }

  /**
   * The rules the cluster grants the client's identity in `namespace` (a SelfSubjectRulesReview), or
   * undefined when the client impersonates no one (the cluster's answer would be the service's own).
   */
  async rulesIn(cluster: ClusterClient, namespace: string): Promise<ClusterResourceRule[] | undefined> {
    if (!cluster.identity) return undefined;
    return this.rules.get(this.keyOf(cluster, { rules: namespace }), async () => {
      const answer = await this.post(cluster, 'v1', 'selfsubjectrulesreviews', {
        kind: 'SelfSubjectRulesReview',
        spec: { namespace },
      });
      const rules = (answer.status as { resourceRules?: unknown } | undefined)?.resourceRules;
      if ((answer.statusCode !== 201 && answer.statusCode !== 200) || !Array.isArray(rules)) {
        throw new BadGatewayException(
          `${cluster.target} could not review the rules of ${cluster.identity!.user} in namespace '${namespace}' (HTTP ${answer.statusCode})`,
        );
      }
      return rules.filter(isResourceRule);
    });
  }

  /**
   * A SelfSubjectAccessReview as written (`review`, of API version `version`), sent as the client's
   * identity, not reused: what `kubectl auth can-i` asks through the Kubernetes path.
   */
  review(cluster: ClusterClient, version: string, review: Record<string, unknown>): Promise<ReviewAnswer> {
    return this.post(cluster, version, 'selfsubjectaccessreviews', review);
  }

  private keyOf(cluster: ClusterClient, question: unknown): string {
    const { conn } = cluster;
    return JSON.stringify([conn.clusterId, conn.generation, cluster.identity, question]);
  }

  private async post(
    cluster: ClusterClient,
    version: string,
    resource: string,
    review: Record<string, unknown>,
  ): Promise<ReviewAnswer> {
    const res = await cluster.send({
      method: 'POST',
      path: `/apis/${GROUP}/${encodeURIComponent(version)}/${resource}`,
      body: Buffer.from(JSON.stringify({ apiVersion: `${GROUP}/${version}`, ...review, status: undefined })),
    });
    const body = await cluster.read(res, MAX_ANSWER_BYTES);
    let status: ReviewAnswer['status'];
    try {
      const parsed = JSON.parse(body.toString('utf8')) as { status?: unknown };
      if (parsed?.status && typeof parsed.status === 'object') status = parsed.status as ReviewAnswer['status'];
    } catch {
      status = undefined;
    }
    return { statusCode: res.statusCode, status };
  }

  private async ask(cluster: ClusterClient, attributes: ReviewAttributes): Promise<string | null> {
    const spec = 'path' in attributes ? { nonResourceAttributes: attributes } : { resourceAttributes: attributes };
    const { statusCode, status } = await this.post(cluster, 'v1', 'selfsubjectaccessreviews', {
      kind: 'SelfSubjectAccessReview',
      spec,
    });
    const who = cluster.identity!.user;
    if (statusCode !== 201 && statusCode !== 200) {
      return `${cluster.target} could not review the access of ${who} (HTTP ${statusCode})`;
    }
    if (status === undefined) {
      throw new BadGatewayException(`${cluster.target} answered the access review with something that is not JSON`);
    }
    if (status.allowed === true) return null;
    const what =
      'path' in attributes
        ? `${attributes.verb} ${attributes.path}`
        : `${attributes.verb} ${attributes.group ? `${attributes.resource}.${attributes.group}` : attributes.resource}` +
          (attributes.namespace ? ` in namespace '${attributes.namespace}'` : '');
    const reason = typeof status.reason === 'string' && status.reason ? `: ${status.reason.slice(0, 300)}` : '';
    return `${cluster.target} does not allow ${who} to ${what}${reason}`;
  }
}

function isResourceRule(rule: unknown): rule is ClusterResourceRule {
  const r = rule as ClusterResourceRule | null;
  const strings = (v: unknown) => Array.isArray(v) && v.every((s) => typeof s === 'string');
  return r !== null && typeof r === 'object' && strings(r.verbs) && strings(r.apiGroups) && strings(r.resources);
}
