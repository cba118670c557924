import { classifyFailure } from '../clusters/cluster-request.js';
import { PROMETHEUS_PATHS, readBody, requestPrometheus, type MetricsEndpoint } from './prometheus-client.js';

export interface MetricsProbeResult {
  status: 'ok' | 'unreachable' | 'error';
  error: string | null;
}

/**
 * The cluster health probe's view of a metrics endpoint: `GET <metricsURL>/api/v1/status/buildinfo`
 * within the time-out (what every Prometheus-compatible API answers cheaply). Never throws.
 */
export async function probeMetricsEndpoint(endpoint: MetricsEndpoint, timeoutMs: number): Promise<MetricsProbeResult> {
  try {
    const res = await requestPrometheus(endpoint, PROMETHEUS_PATHS.buildInfo, new URLSearchParams(), timeoutMs);
    const body = await readBody(res, 64 * 1024).catch(() => Buffer.alloc(0));
    if (res.statusCode !== 200) {
      return { status: 'error', error: `GET /api/v1/status/buildinfo answered HTTP ${res.statusCode}` };
    }
    try {
      if ((JSON.parse(body.toString('utf8')) as { status?: unknown }).status === 'success') {
        return { status: 'ok', error: null };
      }
    } catch {
      /* reported below */
    }
    return { status: 'error', error: 'the metrics endpoint did not answer like a Prometheus HTTP API' };
  } catch (error) {
    const kind = classifyFailure(error);
    const reason = (error as NodeJS.ErrnoException).code ?? (error as Error).message;
    if (kind === 'timeout' || kind === 'unreachable') return { status: 'unreachable', error: String(reason) };
    return { status: 'error', error: String((error as Error).message || reason) };
  }
}
