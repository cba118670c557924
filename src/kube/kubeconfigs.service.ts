import { BadRequestException, ForbiddenException, Inject, Injectable } from '@nestjs/common';
import { InjectRepository } from '@nestjs/typeorm';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { Repository } from 'typeorm';
import { stringify } from 'yaml';
import { Authorizer } from '../access/authorizer.js';
import { ApiKeysService } from '../auth/api-keys.service.js';
import type { Caller } from '../access/caller.js';
import { ClusterEntity } from '../clusters/cluster.entity.js';
import { APP_CONFIG, type AppConfig } from '../config/config.js';
import type { CreateKubeconfigDto } from './dto/kubeconfig.dto.js';

export const DEFAULT_KUBECONFIG_SECONDS = 8 * 3600;

/** A kubeconfig made for a caller, and the id of the key it carries (for the audit row). */
export interface MintedKubeconfig {
  yaml: string;
  keyId: number;
}

/**
 * Kubeconfigs that point kubectl at the Kubernetes API path: one context per cluster, and one new
 * API key of the caller's, with the caller's roles, expiring (listed and revocable with the caller's
 * other keys). Never a cluster's own credentials.
 */
@Injectable()
export class KubeconfigsService {
  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    @InjectRepository(ClusterEntity) private readonly clusters: Repository<ClusterEntity>,
    private readonly authorizer: Authorizer,
    private readonly apiKeys: ApiKeysService,
  ) {}

  async createKubeconfig(caller: Caller, dto: CreateKubeconfigDto): Promise<MintedKubeconfig> {
    const max = this.config.kube.kubeconfigMaxSeconds;
    const seconds = dto.expiresInSeconds ?? Math.min(DEFAULT_KUBECONFIG_SECONDS, max);
    if (seconds > max) {
      throw new BadRequestException([`expiresInSeconds must be at most ${max} (CAS_KUBECONFIG_MAX_SECONDS)`]);
    }
    const mayUse = (name: string) => caller.isAdmin || this.authorizer.permissions(caller, name).rules.length > 0;
    let chosen: ClusterEntity[];
    if (dto.clusters) {
      // Checked before the names are looked up: a caller learns nothing about clusters it has no rule on.
      const noRule = dto.clusters.filter((name) => !mayUse(name));
      if (noRule.length) {
        throw new ForbiddenException(`your roles grant nothing on cluster ${noRule.map((n) => `'${n}'`).join(', ')}`);
      }
      const rows = await this.clusters.find({ select: { id: true, name: true, enabled: true, isDefault: true } });
      const byName = new Map(rows.map((row) => [row.name, row]));
      const problems = dto.clusters.flatMap((name) => {
        const row = byName.get(name);
        if (!row) return [`clusters: no cluster named '${name}'`];
        if (!row.enabled) return [`clusters: cluster '${name}' is disabled`];
        return [];
      });
      if (problems.length) throw new BadRequestException(problems);
      chosen = dto.clusters.map((name) => byName.get(name)!);
    } else {
      const rows = await this.clusters.find({
        select: { id: true, name: true, enabled: true, isDefault: true },
        where: { enabled: true },
        order: { name: 'ASC' },
      });
      chosen = rows.filter((row) => mayUse(row.name));
      if (chosen.length === 0) throw new ForbiddenException('your roles grant nothing on any enabled cluster');
    }

    const expiresAt = new Date(Date.now() + seconds * 1000);
    const key = await this.apiKeys.createApiKey(
      {
        // Unique without a round trip: the owner, when it expires, and a few random characters.
        name: `kubeconfig ${caller.name.slice(0, 50)} ${expiresAt.toISOString()} ${randomBytes(3).toString('hex')}`,
        roles: caller.roles,
        expiresAt: expiresAt.toISOString(),
      },
      caller,
    );
    return { yaml: this.render(caller, chosen, key.key), keyId: key.id };
  }

  private render(caller: Caller, clusters: ClusterEntity[], token: string): string {
    const caData = this.config.kube.publicCaFile
      ? Buffer.from(readFileSync(this.config.kube.publicCaFile)).toString('base64')
      : undefined;
    const user = `${caller.name}@cas`;
    const current = clusters.find((c) => c.isDefault) ?? clusters[0];
    return stringify({
      apiVersion: 'v1',
      kind: 'Config',
      preferences: {},
      clusters: clusters.map((c) => ({
        name: c.name,
        cluster: {
          server: `${this.config.kube.publicUrl}/api/v1/clusters/${encodeURIComponent(c.name)}/k8s`,
          ...(caData ? { 'certificate-authority-data': caData } : {}),
        },
      })),
      users: [{ name: user, user: { token } }],
      contexts: clusters.map((c) => ({ name: c.name, context: { cluster: c.name, user } })),
      'current-context': current.name,
    });
  }
}
