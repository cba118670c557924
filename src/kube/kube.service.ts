import { HttpException, Injectable } from '@nestjs/common';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { Readable } from 'node:stream';
import { Authorizer } from '../access/authorizer.js';
import { foreignFieldManager } from '../apply/field-manager.js';
import { isWriteMethod, noteAudit, peekWriteAnswer } from '../common/audit-facts.js';
import { authorizationSecret } from '../auth/auth.guard.js';
import type { Caller } from '../access/caller.js';
import { CLUSTER_NAME_PATTERN } from '../clusters/cluster-name.js';
import { ClusterAccessReview } from '../clusters/gateway/access-review.js';
import type { ClusterClient } from '../clusters/gateway/cluster-client.js';
import { ClusterGateway } from '../clusters/gateway/cluster-gateway.js';
import { ResourceDiscovery } from '../resources/discovery.js';
import { StreamOwner } from '../streams/stream-owner.js';
import { readBounded } from '../common/read-bounded.js';
import { decideKubeAccess, kubeAccessOf, resourceIdOf } from './kube-access.js';
import { KubeForwarder, type KubeRequest } from './kube-forwarder.js';
import { KubeStatusException, type StatusDetails } from './kube-status.js';
import { KubeStream } from './kube-streams.js';
import { parseRequestInfo, queryBoolean, type RequestInfo, UnplaceableRequestError } from '../k8s/request-info.js';
import { prefersProtobuf, PROTOBUF, ProtobufError } from './protobuf.js';
import { decodeReview, encodeReview, type ReviewKind } from './review-codec.js';
import {
  accessReviewDecision,
  isSelfReview,
  ReviewInputError,
  rulesReviewStatus,
  subjectReviewStatus,
} from './self-reviews.js';

/** The largest body passed on: as on the resource routes (the apiserver itself takes 3 MiB objects). */
export const KUBE_BODY_LIMIT = 10 * 1024 * 1024;
const MAX_REVIEW_BYTES = 64 * 1024;
/** The kind of each review the service answers itself, by its resource. */
const REVIEW_KINDS: Record<string, ReviewKind> = {
  selfsubjectaccessreviews: 'SelfSubjectAccessReview',
  selfsubjectrulesreviews: 'SelfSubjectRulesReview',
  selfsubjectreviews: 'SelfSubjectReview',
};
/** A forwarded header value: printable ASCII, bounded. */
const HEADER_VALUE = /^[\x20-\x7e]{1,1024}$/;
/** Characters a path segment may carry unencoded (RFC 3986 pchar), so names like `system:node:a` reach the cluster as sent. */
const SEGMENT_SAFE = /%(3A|40|21|24|26|27|28|29|2A|2B|2C|3B|3D)/gi;

function encodeSegment(segment: string): string {
  return encodeURIComponent(segment).replace(SEGMENT_SAFE, (escape) => decodeURIComponent(escape));
}

function refuse(code: number, message: string, details?: StatusDetails): never {
  throw new KubeStatusException(code, message, details);
}

/** The request's path below `.../k8s`, decoded segment by segment and checked, and its query. */
export function kubePathOf(url: string): { path: string; forwardPath: string; query: URLSearchParams } {
  const mark = url.indexOf('?');
  const rawPath = mark < 0 ? url : url.slice(0, mark);
  const query = new URLSearchParams(mark < 0 ? '' : url.slice(mark + 1));
  // `/api/v1/clusters/<name>/k8s/<path>`: the name is one segment (the router's parameter), the path all that follows.
  const all = rawPath.split('/');
  const at = all.indexOf('k8s', 5);
  if (at < 0) refuse(404, 'not a path of the Kubernetes API: /api/v1/clusters/<name>/k8s/<path>');
  const rest = `/${all.slice(at + 1).join('/')}`;
  const segments = all.slice(at + 1);
  if (segments.length > 0 && segments[segments.length - 1] === '') segments.pop();
  const decoded = segments.map((segment) => {
    let value: string;
    try {
      value = decodeURIComponent(segment);
    } catch {
      return refuse(400, `the path segment '${segment.slice(0, 64)}' is not validly percent-encoded`);
    }
    if (value === '' || value === '.' || value === '..' || value.includes('/')) {
      refuse(400, `the path has an empty, '.', '..' or encoded-slash segment: ${rest.slice(0, 200)}`);
    }
    return value;
  });
  return {
    path: `/${decoded.join('/')}`,
    forwardPath: `/${decoded.map(encodeSegment).join('/')}`,
    query,
  };
}

function headerValue(request: FastifyRequest, name: string): string | undefined {
  const value = request.headers[name];
  if (value === undefined) return undefined;
  if (typeof value !== 'string' || !HEADER_VALUE.test(value)) {
    refuse(400, `the ${name} header must be one value of printable characters, at most 1024`);
  }
  return value;
}

function detailsOf(info: RequestInfo): StatusDetails {
  if (!info.isResourceRequest) return {};
  return {
    ...(info.name ? { name: info.name } : {}),
    group: info.apiGroup,
    kind: info.subresource ? `${info.resource}/${info.subresource}` : info.resource,
  };
}

/**
 * `/api/v1/clusters/<name>/k8s/<path>`: the cluster's Kubernetes API under the service's users, roles
 * and audit. Each request is parsed as the apiserver parses it, decided by the one authorizer before
 * anything is sent, and forwarded with the cluster's stored credentials (as the caller on an
 * impersonating cluster); the answer streams back unchanged.
 */
@Injectable()
export class KubeService {
  private readonly forwarder = new KubeForwarder(KUBE_BODY_LIMIT);

  constructor(
    private readonly gateway: ClusterGateway,
    private readonly authorizer: Authorizer,
    private readonly streams: StreamOwner,
    private readonly discovery: ResourceDiscovery,
    private readonly reviews: ClusterAccessReview,
  ) {}

  async serve(caller: Caller, cluster: string, request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> {
    if (!CLUSTER_NAME_PATTERN.test(cluster))
      refuse(400, 'the cluster name must be 1–253 printable characters without spaces');
    noteAudit(request, { kube: { cluster, verb: '', resource: null, namespace: null, name: null } });
    const impersonating = Object.keys(request.headers).find((name) => name.startsWith('impersonate-'));
    if (impersonating) {
      refuse(
        403,
        `the ${impersonating} header is not accepted: the service acts as the caller itself (kubectl --as cannot be used through it)`,
      );
    }
    const method = request.method.toUpperCase() as KubeRequest['method'];
    const { path, forwardPath, query } = kubePathOf(request.url);
    let info: RequestInfo;
    try {
      info = parseRequestInfo(method, path, query);
    } catch (error) {
      if (error instanceof UnplaceableRequestError) refuse(404, `the path ${path} names no resource: ${error.message}`);
      throw error;
    }
    noteAudit(request, {
      kube: {
        cluster,
        verb: info.verb,
        resource: info.isResourceRequest
          ? resourceIdOf(info) + (info.subresource ? `/${info.subresource}` : '')
          : path.slice(0, 253),
        namespace: info.namespace || null,
        name: info.name || null,
      },
    });

    // A self review asks about the caller itself: anyone with a rule on the cluster may ask.
    const review = isSelfReview(info);
    const access = review ? ({ kind: 'discovery' } as const) : kubeAccessOf(info, cluster);
    const decision = decideKubeAccess(this.authorizer, caller, access, cluster);
    if (!decision.allowed) {
      const code = access.kind === 'invalid' ? access.statusCode : 403;
      const what = info.isResourceRequest ? `${resourceIdOf(info)} is forbidden` : `${path} is forbidden`;
      refuse(code, code === 403 ? `${what}: ${decision.reason}` : decision.reason, detailsOf(info));
    }
    const foreignManager = foreignFieldManager(caller, query.getAll('fieldManager'));
    if (foreignManager) refuse(403, foreignManager, detailsOf(info));

    const client = await this.gateway.clientFor(caller, cluster);
    if (review) return this.answerReview(caller, client, info, request, reply);

    // As the apiserver reads it: whatever it will stream is admitted and re-checked as a stream here.
    const follow = info.subresource === 'log' && queryBoolean(query, 'follow');
    const longLived = info.verb === 'watch' || follow;
    // The slot is taken before anything is awaited.
    const ticket = longLived ? this.streams.admit(caller, follow ? 'log' : 'watch') : undefined;
    let answer;
    try {
      answer = await this.forwarder.forward(client, {
        method,
        path: forwardPath,
        query,
        headers: {
          accept: headerValue(request, 'accept'),
          contentType: headerValue(request, 'content-type'),
          contentEncoding: headerValue(request, 'content-encoding'),
        },
        body: request.body instanceof Readable ? request.body : undefined,
        longLived,
        // A log (even unfollowed) is no object: it streams as the kubelet writes it.
        object: method === 'GET' && info.verb === 'get' && info.subresource === '' && !longLived,
      });
    } catch (error) {
      ticket?.release();
      throw error;
    }
    reply.status(answer.statusCode).headers(answer.headers);
    // A pod's, service's or node's own pages are a download, never a page, should a browser ever get one.
    if (info.verb === 'proxy' || info.subresource === 'proxy') reply.header('content-disposition', 'attachment');
    if (ticket && answer.statusCode < 300) {
      const stream = new KubeStream(
        follow ? 'log' : 'watch',
        caller,
        authorizationSecret(request) ?? '',
        client.conn,
        async (now) => {
          const decision = decideKubeAccess(this.authorizer, now, kubeAccessOf(info, cluster), cluster);
          return decision.allowed ? null : decision.reason;
        },
        answer.body as Readable, // a long-lived answer always streams
        this.streams,
      );
      return reply.send(stream.start(ticket));
    }
    ticket?.release();
    const body = answer.body;
    return reply.send(isWriteMethod(method) && body instanceof Readable ? peekWriteAnswer(request, body) : body);
  }

  /**
   * SelfSubjectAccessReview and SelfSubjectRulesReview, answered from the service's rules, and
   * SelfSubjectReview, answered with the caller's identity (questions, not changes: no audit row).
   * Read as JSON or protobuf (kubectl ≥ 1.32 sends protobuf) and answered in the first of the two the
   * client's `Accept` names. On an impersonating cluster an access review the service allows is also
   * put to the cluster as the person, and allowed only when the cluster allows it too.
   */
  private async answerReview(
    caller: Caller,
    client: ClusterClient,
    info: RequestInfo,
    request: FastifyRequest,
    reply: FastifyReply,
  ): Promise<FastifyReply> {
    const conn = client.conn;
    noteAudit(request, { changesState: false });
    const kind = REVIEW_KINDS[info.resource];
    const type = String(request.headers['content-type'] ?? '');
    const protobuf = type.toLowerCase().startsWith(PROTOBUF);
    if (!protobuf && !/^application\/json\b/i.test(type)) {
      refuse(415, `a ${kind} must be sent as application/json or ${PROTOBUF}`);
    }
    const body = request.body instanceof Readable ? request.body : undefined;
    if (!body) refuse(400, `the body must be a ${kind} object`);
    const bytes = await readBounded(
      body,
      MAX_REVIEW_BYTES,
      (limit) => new KubeStatusException(413, `a review is at most ${limit} bytes`),
    );
    let review: Record<string, unknown>;
    try {
      if (protobuf) review = decodeReview(kind, bytes);
      else {
        review = JSON.parse(bytes.toString('utf8')) as Record<string, unknown>;
        if (review === null || typeof review !== 'object' || Array.isArray(review)) throw new Error();
      }
    } catch (error) {
      if (error instanceof ProtobufError) refuse(400, `the body is not a ${kind} in protobuf: ${error.message}`);
      return refuse(400, `the body must be a ${kind} object in JSON`);
    }
    const spec = (review.spec ?? {}) as Record<string, unknown>;
    const apiVersion = `${info.apiGroup}/${info.apiVersion}`;
    let status: object;
    try {
      if (kind === 'SelfSubjectReview') {
        status = subjectReviewStatus(caller);
      } else if (kind === 'SelfSubjectRulesReview') {
        const namespace = typeof spec.namespace === 'string' ? spec.namespace : '';
        const types = await this.discovery.list(conn);
        status = rulesReviewStatus(this.authorizer, caller, conn.clusterName, namespace, types);
      } else {
        let decision = accessReviewDecision(this.authorizer, caller, conn.clusterName, spec);
        if (decision.allowed && conn.impersonate) {
          decision = await this.clusterAlsoAllows(client, info, { apiVersion, kind, spec }, decision.reason);
        }
        status = { allowed: decision.allowed, ...(decision.allowed ? {} : { denied: true }), reason: decision.reason };
      }
    } catch (error) {
      if (error instanceof ReviewInputError) refuse(400, error.message);
      throw error;
    }
    const answer = {
      kind,
      apiVersion,
      metadata: { creationTimestamp: null },
      ...(kind === 'SelfSubjectReview' ? {} : { spec }),
      status,
    };
    if (prefersProtobuf(request.headers.accept)) {
      return reply.status(201).header('content-type', PROTOBUF).send(encodeReview(answer));
    }
    return reply.status(201).header('content-type', 'application/json').send(JSON.stringify(answer));
  }

  /** The cluster's own answer for the person (an impersonating cluster): it may refuse what the service allows. */
  private async clusterAlsoAllows(
    client: ClusterClient,
    info: RequestInfo,
    review: Record<string, unknown>,
    serviceReason: string,
  ) {
    const conn = client.conn;
    const impersonate = client.identity!;
    let answer;
    try {
      answer = await this.reviews.review(client, info.apiVersion, review);
    } catch (error) {
      if (error instanceof HttpException) refuse(error.getStatus(), error.message);
      throw error;
    }
    const { status } = answer;
    if (answer.statusCode !== 201 || status === undefined) {
      refuse(502, `cluster '${conn.clusterName}' answered the access review with ${answer.statusCode}`);
    }
    if (status.allowed === true)
      return { allowed: true, reason: `${serviceReason}; cluster '${conn.clusterName}' allows it too` };
    const why = typeof status.reason === 'string' && status.reason ? `: ${status.reason.slice(0, 500)}` : '';
    return {
      allowed: false,
      reason: `your roles allow it, but cluster '${conn.clusterName}' does not allow it for ${impersonate.user}${why}`,
    };
  }
}
