import { Inject, Injectable, type OnModuleDestroy } from '@nestjs/common';
import { Agent } from 'undici';
import { impersonationFor } from '../../access/impersonation.js';
import type { Caller } from '../../access/caller.js';
import { APP_CONFIG, type AppConfig } from '../../config/config.js';
import { policyLookup } from '../address-policy.js';
import { ClusterClientFactory } from '../cluster-client.factory.js';
import type { ClusterConnection } from '../cluster-connection.js';
import { ClusterClient, USER_AGENT } from './cluster-client.js';
import { WriteMarks } from './write-marks.js';
import { type MetricsEndpoint, MetricsEndpointClient, NO_LINK_LOCAL } from './metrics-endpoint.js';

/**
 * The only way to a cluster. A client made here binds the stored connection, the identity (the
 * caller's, impersonated on a cluster with `impersonate: true`, or explicitly the service's own), the
 * user agent, the time-outs, the request metrics and the one translation of failures.
 *
 * - `clientFor(caller, name)`: a call made on behalf of a caller. No route family is exempt.
 * - `serviceClientFor(name)`: a call the service makes for itself (health probes, discovery, a shared
 *   watch or cache that several callers read): what it serves is authorized per caller elsewhere.
 */
@Injectable()
export class ClusterGateway implements OnModuleDestroy {
  private readonly timeoutMs: number;
  /** Keep-alive connections to metrics endpoints, every one checked by the address policy as it connects. */
  private readonly metricsAgent = new Agent({ connect: { lookup: policyLookup(NO_LINK_LOCAL) as never } });

  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly connections: ClusterClientFactory,
    private readonly writes: WriteMarks,
  ) {
    this.timeoutMs = config.clusterRequestTimeoutSeconds * 1000;
  }

  /** The cluster named, for a caller: 404 unknown, 409 disabled, 503 unusable. */
  async clientFor(caller: Caller, name: string): Promise<ClusterClient> {
    return this.asCaller(await this.connections.forName(name), caller);
  }

  /** The cluster named, as the service itself. */
  async serviceClientFor(name: string): Promise<ClusterClient> {
    return this.asService(await this.connections.forName(name));
  }

  /** A connection already looked up, bound to a caller. */
  asCaller(conn: ClusterConnection, caller: Caller): ClusterClient {
    return new ClusterClient(
      conn,
      conn.impersonate ? impersonationFor(caller) : undefined,
      this.timeoutMs,
      USER_AGENT,
      this.writes,
    );
  }

  /**
   * A connection already looked up, as the service itself; `timeoutMs` for calls allowed less, and
   * `purpose` to tell them apart in the cluster's audit log (health probes: `health`).
   */
  asService(conn: ClusterConnection, timeoutMs = this.timeoutMs, purpose?: string): ClusterClient {
    const agent = purpose ? `${USER_AGENT} (${purpose})` : USER_AGENT;
    return new ClusterClient(conn, undefined, timeoutMs, agent, this.writes);
  }

  /** The current connection of a cluster (404/409/503 as clientFor): for streams that check it has not changed. */
  connection(name: string): Promise<ClusterConnection> {
    return this.connections.forName(name);
  }

  /** A cluster's metrics endpoint (Prometheus HTTP API). */
  metricsClient(endpoint: MetricsEndpoint, timeoutMs = this.config.metrics.queryTimeoutSeconds * 1000) {
    return new MetricsEndpointClient(endpoint, this.metricsAgent, timeoutMs);
  }

  onModuleDestroy(): Promise<void> {
    return this.metricsAgent.destroy();
  }
}
