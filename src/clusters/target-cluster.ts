import { applyDecorators } from '@nestjs/common';
import { ApiHeader, ApiQuery } from '@nestjs/swagger';

/** The header every call to one cluster names it in. */
export const CLUSTER_HEADER = 'x-cluster-name';
/** The same, as a query parameter: what a client that cannot set headers sends (`EventSource`, a WebSocket, a link). */
export const CLUSTER_QUERY = 'cluster';

/**
 * Documents the target cluster of a route: `x-cluster-name`, or `?cluster=` where a header cannot be sent.
 * Neither is marked required, because either one will do; the route answers 400 when both are missing.
 */
export const ApiTargetCluster = () =>
  applyDecorators(
    ApiHeader({
      name: CLUSTER_HEADER,
      required: false,
      description: 'Name of the target cluster (required unless the query parameter `cluster` names it)',
      schema: { type: 'string', minLength: 1, maxLength: 253 },
    }),
    ApiQuery({
      name: CLUSTER_QUERY,
      required: false,
      description:
        'Name of the target cluster, for clients that cannot send `x-cluster-name` (`EventSource`, WebSocket); ' +
        'the header wins when both are sent',
      schema: { type: 'string', minLength: 1, maxLength: 253 },
    }),
  );

/**
 * The one place a request's target cluster is decided, before any guard, pipe or handler runs: on a route
 * that takes `x-cluster-name`, `?cluster=` stands for the header when the header is absent, and is then
 * taken out of the query either way, so that every reader (handlers, the audit row) sees the header alone
 * and no query DTO has to declare it.
 */
export function takeClusterFromQuery(request: {
  query: unknown;
  raw: { headers: Record<string, string | string[] | undefined> };
}): void {
  const query = request.query as Record<string, unknown> | null | undefined;
  if (!query || typeof query !== 'object' || !(CLUSTER_QUERY in query)) return;
  const value = query[CLUSTER_QUERY];
  delete query[CLUSTER_QUERY];
  if (request.raw.headers[CLUSTER_HEADER] !== undefined) return;
  // Repeated (`?cluster=a&cluster=b`) stays an array: clusterNameOf refuses it as not one name.
  request.raw.headers[CLUSTER_HEADER] = value as string | string[];
}
