import { BadRequestException, Injectable, NotFoundException } from '@nestjs/common';
import type { ClusterResponse } from '../clusters/gateway/answer.js';
import { Authorizer, type Verb } from '../access/authorizer.js';
import { STATUS_SUFFIX } from '../access/rules.js';
import type { Caller } from '../access/caller.js';
import type { GetResourceQueryDto, PatchResourceQueryDto, WriteResourceQueryDto } from './dto/resource-query.dto.js';
import { patchRequest } from '../apply/apply-input.js';
import { assertOwnFieldManager } from '../apply/field-manager.js';
import { patchContentType, resourceIdOf } from '../k8s/resource-path.js';
import { type Resolved, type ResourceTarget, ResourcesService } from './resources.service.js';

/** The subresources served here; `log` of pods has a route of its own. */
export const SUBRESOURCES = ['scale', 'status'] as const;

function query(values: object): URLSearchParams {
  const params = new URLSearchParams();
  for (const [key, value] of Object.entries(values)) if (value !== undefined) params.set(key, String(value));
  return params;
}

const json = (value: unknown) => Buffer.from(JSON.stringify(value), 'utf8');

/**
 * `scale` and `status` of any type whose discovery lists them. Reading either needs `get` on the
 * parent resource; writing `scale` needs `update`/`patch` on it (e.g. `deployments.apps`). Writing
 * `status` needs `update`/`patch` on `<resource>/status` named in a rule (a `*` does not cover it, as
 * Kubernetes RBAC keeps status apart), and `get` on the parent.
 */
@Injectable()
export class SubresourcesService {
  constructor(
    private readonly resources: ResourcesService,
    private readonly authorizer: Authorizer,
  ) {}

  async getSubresource(caller: Caller, target: ResourceTarget, sub: string, q: GetResourceQueryDto) {
    const { r, path } = await this.resolve(caller, target, sub, 'get');
    return r.cluster.send({ method: 'GET', path, query: query(q) });
  }

  async replaceSubresource(
    caller: Caller,
    target: ResourceTarget,
    sub: string,
    body: unknown,
    q: WriteResourceQueryDto,
  ): Promise<ClusterResponse> {
    assertOwnFieldManager(caller, q.fieldManager);
    const { r, path } = await this.resolve(caller, target, sub, 'update');
    if (body === null || typeof body !== 'object' || Array.isArray(body)) {
      throw new BadRequestException([`body must be a JSON object: the full ${sub} object you read, changed`]);
    }
    const metadata = (body as { metadata?: Record<string, unknown> }).metadata;
    const problems: string[] = [];
    if (metadata === null || typeof metadata !== 'object' || Array.isArray(metadata)) {
      problems.push('metadata must be an object with name and resourceVersion');
    } else {
      if (metadata.name !== r.name) problems.push(`metadata.name must be '${r.name}', the name in the path`);
      if (typeof metadata.resourceVersion !== 'string' || metadata.resourceVersion === '') {
        problems.push('metadata.resourceVersion is required: send the resourceVersion of the object you read');
      }
      if (metadata.namespace !== undefined && metadata.namespace !== r.namespace) {
        problems.push(`metadata.namespace '${String(metadata.namespace)}' differs from the namespace in the path`);
      }
    }
    if (problems.length) throw new BadRequestException(problems);
    return r.cluster.send({
      method: 'PUT',
      path,
      query: query(q),
      body: json(body),
    });
  }

  async patchSubresource(
    caller: Caller,
    target: ResourceTarget,
    sub: string,
    body: unknown,
    q: PatchResourceQueryDto,
    requestContentType: string | undefined,
  ) {
    patchContentType(q.patchType, requestContentType); // a bad patch kind is a 400 before any work
    const { r, path } = await this.resolve(caller, target, sub, 'patch');
    const patch = await patchRequest(caller, body, q, requestContentType);
    return r.cluster.send({
      method: 'PATCH',
      path,
      query: query(patch.query),
      body: patch.body,
      contentType: patch.contentType,
    });
  }

  private async resolve(
    caller: Caller,
    target: ResourceTarget,
    sub: string,
    verb: Verb,
  ): Promise<{ r: Resolved; path: string }> {
    if (!(SUBRESOURCES as readonly string[]).includes(sub)) {
      throw new NotFoundException(
        `no route for subresource '${sub.slice(0, 64)}': this service serves ${SUBRESOURCES.map((s) => `'${s}'`).join(' and ')} (and pods' log at .../log)`,
      );
    }
    const writesStatus = sub === 'status' && verb !== 'get';
    const r = await this.resources.resolve(caller, target, writesStatus ? 'get' : verb);
    const id = resourceIdOf(r.type);
    if (writesStatus) {
      this.authorizer.require(caller, {
        verb,
        cluster: r.cluster.name,
        resource: `${id}${STATUS_SUFFIX}`,
        namespace: r.namespace,
      });
    }
    if (!(r.type.subresources ?? []).includes(sub)) {
      throw new NotFoundException(`${id} has no ${sub} subresource on ${r.cluster.target}`);
    }
    return { r, path: `${r.path}/${sub}` };
  }
}
