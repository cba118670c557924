import {
  BadRequestException,
  ConflictException,
  ForbiddenException,
  HttpException,
  Injectable,
  NotFoundException,
} from '@nestjs/common';
import type { Caller } from '../access/caller.js';
import { ALL_NAMESPACES, resourceIdOf } from '../k8s/resource-path.js';
import { ResourcesService } from './resources.service.js';
import { Authorizer, type Decision, type Verb } from '../access/authorizer.js';
import { HELM_RELEASES, HELM_VERBS, STATUS_SUFFIX } from '../access/rules.js';

/** One question as `can-i` takes it: `namespace` null (or `_all`) for lists across namespaces and cluster-scoped types. */
export interface RouteQuestion {
  cluster: string;
  resource: string;
  namespace: string | null;
  verb: Verb;
}

/** Route errors that mean "this call would be refused": each becomes `allowed: false` with its message. */
const REFUSALS = [BadRequestException, ForbiddenException, NotFoundException, ConflictException];

const deny = (reason: string): Decision => ({ allowed: false, reason });

function messageOf(error: HttpException): string {
  const body = error.getResponse() as { message?: unknown } | string;
  const message = typeof body === 'string' ? body : body.message;
  return Array.isArray(message) ? message.join('; ') : String(message ?? error.message);
}

/**
 * Answers `can-i` the way the routes decide: the type is resolved through the cluster's discovery
 * with the routes' own resolution (`ResourcesService.resolve`: cluster, type, scope, then the
 * authorizer), so a cluster-scoped type asked with a namespace, a namespaced type asked for one
 * object across `_all`, an unknown type, `log` on anything but pods and `metrics` with a namespace
 * are refused with the message the route would give, instead of being judged by the rules alone.
 */
@Injectable()
export class RouteAccess {
  constructor(
    private readonly authorizer: Authorizer,
    private readonly resources: ResourcesService,
  ) {}

  async decide(caller: Caller, question: RouteQuestion): Promise<Decision> {
    const { cluster, verb } = question;
    const namespace = question.namespace ?? ALL_NAMESPACES;
    if (question.resource === 'metrics') {
      // The metrics routes (raw PromQL) take no namespace and only read.
      if (namespace !== ALL_NAMESPACES) return deny('metrics are queried for a whole cluster: ask without a namespace');
      if (verb !== 'get') return deny(`metrics are only read (verb get); there is no route to ${verb} them`);
      return this.authorizer.can(caller, { verb, cluster, resource: 'metrics', namespace: null });
    }
    if (question.resource === HELM_RELEASES) {
      if (!HELM_VERBS.has(verb)) {
        return deny(
          `Helm releases are read with list and get and written with create, update and delete; there is no route to ${verb} them`,
        );
      }
      if (namespace === ALL_NAMESPACES && verb !== 'list') return deny(`${verb} on Helm releases needs a namespace`);
      return this.authorizer.can(caller, {
        verb,
        cluster,
        resource: HELM_RELEASES,
        namespace: namespace === ALL_NAMESPACES ? null : namespace,
      });
    }
    const status = question.resource.endsWith(STATUS_SUFFIX);
    const resource = status ? question.resource.slice(0, -STATUS_SUFFIX.length) : question.resource;
    if (verb === 'log' && (status || resource !== 'pods')) {
      return deny(
        `log is served for pods only (GET /api/v1/pods/<namespace>/<name>/log), not for ${question.resource}`,
      );
    }
    if (status && !['get', 'update', 'patch'].includes(verb)) {
      return deny(`status is read with get and written with update or patch; there is no route to ${verb} it`);
    }
    // As the subresource route asks: writing status reads the object's type with `get`, then needs
    // the verb on `<resource>/status`.
    const writesStatus = status && verb !== 'get';
    try {
      const r = await this.resources.resolve(caller, { cluster, resource, namespace }, writesStatus ? 'get' : verb);
      const id = resourceIdOf(r.type);
      const decision = this.authorizer.can(caller, {
        verb,
        cluster,
        resource: writesStatus ? `${id}${STATUS_SUFFIX}` : id,
        namespace: r.namespace,
      });
      if (decision.allowed && status && !(r.type.subresources ?? []).includes('status')) {
        return deny(`${id} has no status subresource on cluster '${cluster}'`);
      }
      return decision;
    } catch (error) {
      if (REFUSALS.some((kind) => error instanceof kind)) return deny(messageOf(error as HttpException));
      throw error;
    }
  }
}
