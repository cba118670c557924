import { BadRequestException, ConflictException, NotFoundException } from '@nestjs/common';

/** What a cluster's name may be: 1–253 printable ASCII characters without spaces. */
export const CLUSTER_NAME_PATTERN = /^[\x21-\x7e]{1,253}$/;

/** The cluster a call names in `x-cluster-name` (or `?cluster=` where a header cannot be sent): 400 unless it is one valid name. */
export function clusterNameOf(value: unknown): string {
  if (value === undefined || value === '') {
    throw new BadRequestException([
      'x-cluster-name header is required: name the target cluster (or the query parameter cluster)',
    ]);
  }
  if (typeof value !== 'string' || !CLUSTER_NAME_PATTERN.test(value)) {
    throw new BadRequestException([
      'x-cluster-name (or cluster) must be one cluster name: 1–253 printable characters without spaces',
    ]);
  }
  return value;
}

/** Refuses a call to a cluster that does not exist (404) or is disabled (409). */
export function requireUsable(name: string, row: { enabled: boolean | number } | null | undefined): void {
  if (!row) throw new NotFoundException(`cluster '${name}' not found`);
  if (!row.enabled) throw new ConflictException(`cluster '${name}' is disabled`);
}
