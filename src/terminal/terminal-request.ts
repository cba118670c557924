import { BadRequestException } from '@nestjs/common';
import { clusterNameOf } from '../clusters/cluster-name.js';
import { validateName, validateNamespace } from '../k8s/resource-path.js';
import { TERMINAL_KINDS, type TerminalKind } from './terminal-protocol.js';

/** An upgrade's target as both paths name it. */
export interface TerminalTarget {
  kind: TerminalKind;
  /** `rest`: `/api/v1/pods/…`; `kube`: the Kubernetes path (refusals as `Status`). */
  path: 'rest' | 'kube';
  cluster: string;
  namespace: string;
  pod: string;
  /** What is sent to the cluster: `command`, `container`, `stdin`… as the apiserver takes them. */
  query: URLSearchParams;
  /** For the audit row: the container, command, tty or ports asked for. */
  facts: Record<string, unknown>;
}

const REST = /^\/api\/v1\/pods\/([^/]+)\/([^/]+)\/(exec|attach|portforward)$/;
const KUBE =
  /^\/api\/v1\/clusters\/([^/]+)\/k8s\/api\/v1\/namespaces\/([^/]+)\/pods\/([^/]+)\/(exec|attach|portforward)$/;

/** The query each verb takes on the REST route (besides `cluster`). */
const QUERY: Record<TerminalKind, readonly string[]> = {
  exec: ['container', 'command', 'stdin', 'stdout', 'stderr', 'tty'],
  attach: ['container', 'stdin', 'stdout', 'stderr', 'tty'],
  portforward: ['ports'],
};
const BOOLEANS = new Set(['stdin', 'stdout', 'stderr', 'tty']);
const MAX_COMMAND_ARGS = 256;
const MAX_COMMAND_BYTES = 16 * 1024;

/** Whether a path is one of the terminal's upgrades (`upgrade` events of any other path are refused). */
export function isTerminalPath(pathname: string): 'rest' | 'kube' | undefined {
  if (REST.test(pathname)) return 'rest';
  if (KUBE.test(pathname)) return 'kube';
  return undefined;
}

function decode(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    throw new BadRequestException([`the path segment '${segment.slice(0, 64)}' is not validly percent-encoded`]);
  }
}

function bad(message: string): never {
  throw new BadRequestException([message]);
}

/** Parses and bounds an upgrade request's target: 400 naming what is wrong. */
export function parseTarget(
  url: URL,
  clusterHeader: string | string[] | undefined,
  /** SPDY port-forward names its ports per stream, not in the query. */
  spdy = false,
): TerminalTarget {
  const rest = REST.exec(url.pathname);
  const kube = rest ? null : KUBE.exec(url.pathname);
  const [cluster, namespace, pod, kind] = rest
    ? [
        clusterNameOf(
          Array.isArray(clusterHeader)
            ? clusterHeader[0]
            : (clusterHeader ?? url.searchParams.get('cluster') ?? undefined),
        ),
        decode(rest[1]),
        decode(rest[2]),
        rest[3],
      ]
    : [clusterNameOf(decode(kube![1])), decode(kube![2]), decode(kube![3]), kube![4]];
  validateNamespace(namespace);
  if (namespace === '_all') bad('namespace must name one namespace');
  validateName(pod);
  const verb = kind as TerminalKind;
  if (!TERMINAL_KINDS.includes(verb)) bad(`unknown terminal verb '${kind}'`);
  const query = new URLSearchParams();
  for (const [key, value] of url.searchParams) {
    if (key === 'cluster' && rest) continue;
    if (rest && !QUERY[verb].includes(key)) {
      bad(
        `query parameter '${key.slice(0, 64)}' is not accepted here; ${verb} takes: ${QUERY[verb].join(', ')}, cluster`,
      );
    }
    if (BOOLEANS.has(key) && !['true', 'false', '1', '0'].includes(value)) bad(`${key} must be true or false`);
    query.append(key, value);
  }
  const commands = query.getAll('command');
  if (commands.length > MAX_COMMAND_ARGS || commands.join(' ').length > MAX_COMMAND_BYTES) {
    bad(`command is too long (at most ${MAX_COMMAND_ARGS} arguments and ${MAX_COMMAND_BYTES} bytes)`);
  }
  if (verb === 'exec' && commands.length === 0) bad('command is required: repeat `command` for each argument');
  const ports = query.getAll('ports').flatMap((p) => p.split(','));
  if (verb === 'portforward') {
    if (ports.length === 0 && !spdy) bad('ports is required: the pod port(s) to forward');
    for (const p of ports) {
      const n = Number(p);
      if (!/^\d{1,5}$/.test(p) || n < 1 || n > 65535)
        bad(`ports must be port numbers 1–65535, got '${p.slice(0, 16)}'`);
    }
  }
  const container = query.get('container');
  if (container !== null && !/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/.test(container)) {
    bad('container must be a container name (a DNS label)');
  }
  const facts: Record<string, unknown> =
    verb === 'portforward'
      ? { ports: ports.map(Number) }
      : {
          container,
          ...(verb === 'exec' ? { command: commands } : {}),
          tty: ['true', '1'].includes(query.get('tty') ?? ''),
        };
  return { kind: verb, path: rest ? 'rest' : 'kube', cluster, namespace, pod, query, facts };
}

/** The cluster's path for the target, from validated, percent-encoded segments only. */
export function upstreamPath(target: TerminalTarget): string {
  return `/api/v1/namespaces/${encodeURIComponent(target.namespace)}/pods/${encodeURIComponent(target.pod)}/${target.kind}`;
}
