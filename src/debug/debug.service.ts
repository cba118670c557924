import {
  BadRequestException,
  ConflictException,
  GatewayTimeoutException,
  Inject,
  Injectable,
  UnprocessableEntityException,
} from '@nestjs/common';
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { Authorizer } from '../access/authorizer.js';
import { EPHEMERAL_CONTAINERS } from '../access/rules.js';
import type { Caller } from '../access/caller.js';
import { clusterNameOf } from '../clusters/cluster-name.js';
import type { ClusterClient } from '../clusters/gateway/cluster-client.js';
import { ClusterGateway } from '../clusters/gateway/cluster-gateway.js';
import { APP_CONFIG, type AppConfig } from '../config/config.js';
import { validateName, validateNamespace } from '../k8s/resource-path.js';
import { callJson, refusedBy, stuckReason } from './cluster-calls.js';
import { type EphemeralApi, ephemeralApiOf } from '../k8s/container-input.js';
import type { DebugContainerDto, DebugPodDto } from './dto/debug.dto.js';

/** How often the pod is read while its debug container starts. */
const POLL_MS = 200;
/** Lower-case letters and digits, as kubectl names its debuggers (`debugger-xxxxx`). */
const SUFFIX_CHARS = 'bcdfghjklmnpqrstvwxz2456789';

/** What the audit row of a debug call names (image, target): set as soon as the input is valid. */
export interface DebugFacts {
  cluster: string;
  namespace: string;
  pod: string;
  detail: Record<string, unknown>;
}

/**
 * Ephemeral debug containers (docs/TERMINAL.md, debugging): one added to a pod through its
 * `pods/ephemeralcontainers` subresource as the caller, in the shape the cluster's version takes,
 * then awaited (bounded) until the kubelet runs it. A console then attaches with the terminal's
 * attach route. An ephemeral container cannot be removed: attaching ends with its process.
 */
@Injectable()
export class DebugService {
  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly authorizer: Authorizer,
    private readonly gateway: ClusterGateway,
  ) {}

  async addDebugContainer(
    caller: Caller,
    clusterHeader: unknown,
    namespace: string,
    pod: string,
    dto: DebugPodDto,
    noteFacts: (facts: DebugFacts) => void,
  ): Promise<DebugContainerDto> {
    const cluster = clusterNameOf(clusterHeader);
    validateNamespace(namespace);
    validateName(pod);
    const name = dto.name ?? `debugger-${suffix()}`;
    const detail: Record<string, unknown> = { container: name, image: dto.image, target: dto.target ?? null };
    if (dto.command) detail.command = dto.command;
    noteFacts({ cluster, namespace, pod, detail });
    this.authorizer.require(caller, { verb: 'update', cluster, resource: EPHEMERAL_CONTAINERS, namespace });

    const client = await this.gateway.clientFor(caller, cluster);
    const api = await this.apiOf(client);
    const podPath = `/api/v1/namespaces/${encodeURIComponent(namespace)}/pods/${encodeURIComponent(pod)}`;
    const current = await callJson(client, { method: 'GET', path: podPath });
    if (current.status !== 200) throw refusedBy(client, current, `reading pod '${pod}'`);
    const spec = current.body?.spec ?? {};
    const names = (list: unknown) => (Array.isArray(list) ? list.map((c: { name?: string }) => String(c.name)) : []);
    const regular = names(spec.containers);
    if ([...regular, ...names(spec.initContainers), ...names(spec.ephemeralContainers)].includes(name)) {
      throw new ConflictException(`pod '${pod}' already has a container named '${name}': choose another name`);
    }
    if (dto.target !== undefined && !regular.includes(dto.target)) {
      throw new BadRequestException([
        `target '${dto.target}' is not a container of pod '${pod}' (it has: ${regular.join(', ')})`,
      ]);
    }
    const container: Record<string, unknown> = {
      name,
      image: dto.image,
      stdin: true,
      tty: true,
      terminationMessagePolicy: 'File',
      imagePullPolicy: 'IfNotPresent',
    };
    if (dto.command) container.command = dto.command;
    if (dto.target) container.targetContainerName = dto.target;
    const added = await callJson(client, {
      method: 'PATCH',
      path: `${podPath}/ephemeralcontainers`,
      ...(api === 'EphemeralContainers'
        ? {
            // v1.16–v1.21: the EphemeralContainers object, appended to by a JSON patch (as kubectl 1.20 does).
            contentType: 'application/json-patch+json',
            body: Buffer.from(JSON.stringify([{ op: 'add', path: '/ephemeralContainers/-', value: container }])),
          }
        : {
            // v1.22 on: the Pod; `ephemeralContainers` merges by name.
            contentType: 'application/strategic-merge-patch+json',
            body: Buffer.from(JSON.stringify({ spec: { ephemeralContainers: [container] } })),
          }),
    });
    if (added.status === 404) {
      throw new ConflictException(
        `${client.target} serves no pods/ephemeralcontainers: on Kubernetes ${this.version(client)} ephemeral containers need the EphemeralContainers feature gate`,
      );
    }
    if (added.status !== 200) throw refusedBy(client, added, `adding debug container '${name}' to pod '${pod}'`);
    await this.waitRunning(client, podPath, pod, name);
    const query = new URLSearchParams({ container: name, stdin: 'true', stdout: 'true', tty: 'true' });
    return {
      name,
      image: dto.image,
      target: dto.target ?? null,
      pod,
      namespace,
      cluster,
      api,
      attach: `/api/v1/pods/${encodeURIComponent(namespace)}/${encodeURIComponent(pod)}/attach?${query}`,
    };
  }

  private readonly versions = new WeakMap<ClusterClient, string>();

  private version(client: ClusterClient): string {
    return this.versions.get(client) ?? 'this version';
  }

  /** The subresource's object for the cluster's version; 409 naming the version when it has none. */
  private async apiOf(client: ClusterClient): Promise<EphemeralApi> {
    const answer = await callJson(client, { method: 'GET', path: '/version' });
    if (answer.status !== 200) throw refusedBy(client, answer, 'GET /version');
    const { major, minor, gitVersion } = (answer.body ?? {}) as Record<string, unknown>;
    const version = typeof gitVersion === 'string' ? gitVersion.slice(0, 64) : `v${String(major)}.${String(minor)}`;
    this.versions.set(client, version);
    const api = ephemeralApiOf(String(major ?? ''), String(minor ?? ''));
    if (!api) {
      throw new ConflictException(
        `${client.target} runs Kubernetes ${version}, which has no ephemeral containers (they came in v1.16)`,
      );
    }
    return api;
  }

  /** Reads the pod until the container runs: 422 with the kubelet's reason when it cannot, 504 past the bound. */
  private async waitRunning(client: ClusterClient, podPath: string, pod: string, name: string): Promise<void> {
    const deadline = Date.now() + this.config.debug.startMs;
    let last = 'no status yet';
    for (;;) {
      const answer = await callJson(client, { method: 'GET', path: podPath });
      if (answer.status !== 200) throw refusedBy(client, answer, `reading pod '${pod}'`);
      const statuses = answer.body?.status?.ephemeralContainerStatuses;
      const status = Array.isArray(statuses) ? statuses.find((s: { name?: string }) => s.name === name) : undefined;
      if (status?.state?.running) return;
      const stuck = stuckReason(status?.state);
      if (stuck) {
        throw new UnprocessableEntityException(
          `debug container '${name}' was added to pod '${pod}' but cannot start: ${stuck}`,
        );
      }
      if (status?.state?.waiting?.reason) last = String(status.state.waiting.reason).slice(0, 100);
      if (Date.now() >= deadline) {
        throw new GatewayTimeoutException(
          `debug container '${name}' of pod '${pod}' did not run within ${this.config.debug.startMs / 1000} s (${last})`,
        );
      }
      await sleep(POLL_MS);
    }
  }
}

function suffix(): string {
  return [...randomBytes(5)].map((b) => SUFFIX_CHARS[b % SUFFIX_CHARS.length]).join('');
}
