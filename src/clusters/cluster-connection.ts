import type { Dispatcher } from 'undici';

/**
 * A ready-to-use connection to one registered cluster, built by ClusterClientFactory (the only
 * place that turns a stored cluster into a connection) and cached per cluster until the cluster
 * changes.
 */
export interface ClusterConnection {
  clusterId: number;
  clusterName: string;
  /**
   * Bumped whenever the cluster's connection settings change; caches keyed by cluster
   * (discovery, for one) compare it to know they are stale.
   */
  generation: number;
  /** Resource calls impersonate the caller (`Impersonate-User`/`-Group`); a change bumps `generation`. */
  impersonate: boolean;
  /** The API server's base URL, e.g. `https://127.0.0.1:6443` (may carry a path prefix). */
  server: URL;
  /** The server URL's path without its trailing slash ('' for none): what every request path is put under. */
  pathPrefix: string;
  /**
   * A keep-alive connection pool (undici) to the server, with the cluster's CA, client
   * certificate/key, TLS settings and address policy.
   */
  dispatcher: Dispatcher;
  /**
   * The same TLS settings and address policy for a connection of its own (a WebSocket upgrade, which
   * leaves the pool): what `tls.connect` takes.
   */
  tls: Readonly<Record<string, unknown>>;
  /** How long the pool tries to connect before it gives up (absent: no bound of its own). */
  connectTimeoutMs?: number;
  /**
   * Set when the address policy refuses the server's literal address: every request then fails
   * before anything is connected. (A host name is checked each time the pool resolves it.)
   */
  refusedAddress?: string;
  /**
   * Headers carrying the cluster credentials (`Authorization: Bearer …` or `Basic …`); empty
   * for client-certificate auth. Read per request: an in-cluster token file may rotate.
   */
  authHeaders(): Readonly<Record<string, string>>;
}
