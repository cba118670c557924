import { ValidateBy } from 'class-validator';
import { isLinkLocal } from './gateway/metrics-endpoint.js';

export const MAX_METRICS_URL_LENGTH = 2048;

/**
 * Why a metricsURL is unusable, or null when it is fine: an http(s) URL (WHATWG parser, after a
 * length check, so no pattern runs over unbounded input) without credentials, query or fragment,
 * and not a link-local address (cloud metadata services live there).
 */
export function metricsUrlProblem(value: unknown): string | null {
  if (typeof value !== 'string' || value.length > MAX_METRICS_URL_LENGTH) {
    return `metricsURL must be a string of at most ${MAX_METRICS_URL_LENGTH} characters`;
  }
  if (value === '') return null;
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return 'metricsURL must be an http(s) URL or ""';
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return 'metricsURL must be an http(s) URL or ""';
  if (url.username || url.password) return 'metricsURL must not carry credentials (it is shown to admins)';
  if (url.search || url.hash || value.includes('?') || value.includes('#')) {
    return 'metricsURL must not have a query or fragment: give the Prometheus base address';
  }
  if (isLinkLocal(url.hostname.replace(/^\[|\]$/g, ''))) return 'metricsURL must not be a link-local address';
  return null;
}

/** class-validator decorator for metricsURL (`""` clears it). */
export function IsMetricsUrl() {
  return ValidateBy({
    name: 'isMetricsUrl',
    validator: {
      validate: (value: unknown) => metricsUrlProblem(value) === null,
      defaultMessage: (args) => metricsUrlProblem(args?.value) ?? 'metricsURL is invalid',
    },
  });
}
