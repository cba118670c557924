import { StringDecoder } from 'node:string_decoder';

/** The three terminal verbs, each a pods subresource of the same name, as in Kubernetes. */
export type TerminalKind = 'exec' | 'attach' | 'portforward';
export const TERMINAL_KINDS: readonly TerminalKind[] = ['exec', 'attach', 'portforward'];

/** Subprotocols a client may choose, in the service's order of preference. */
const EXEC_PROTOCOLS = ['v4.channel.k8s.io', 'v4.base64.channel.k8s.io', 'channel.k8s.io', 'base64.channel.k8s.io'];
const PORTFORWARD_PROTOCOLS = ['portforward.k8s.io', 'v4.channel.k8s.io'];
/** A Kubernetes client's token, sent as a subprotocol by browsers (which cannot set headers on a WebSocket). */
export const BEARER_PROTOCOL_PREFIX = 'base64url.bearer.authorization.k8s.io.';

/** Channels of the exec and attach protocols. */
export const STDIN = 0;
export const STDOUT = 1;
export const STDERR = 2;
export const ERROR = 3;
export const RESIZE = 4;

/** The stream protocols of a SPDY/3.1 upgrade (kubectl ≤ 1.29), offered in `X-Stream-Protocol-Version`. */
const SPDY_EXEC_PROTOCOLS = ['v4.channel.k8s.io', 'v3.channel.k8s.io', 'v2.channel.k8s.io', 'channel.k8s.io'];
const SPDY_PORTFORWARD_PROTOCOLS = ['portforward.k8s.io'];
/** The one `Upgrade` besides WebSocket: served on the Kubernetes path only, relayed byte for byte. */
export const SPDY_UPGRADE = 'SPDY/3.1';

export function allowedProtocols(kind: TerminalKind, spdy = false): readonly string[] {
  if (spdy) return kind === 'portforward' ? SPDY_PORTFORWARD_PROTOCOLS : SPDY_EXEC_PROTOCOLS;
  return kind === 'portforward' ? PORTFORWARD_PROTOCOLS : EXEC_PROTOCOLS;
}

/** The stream protocols a SPDY client offered (the header repeated, or one comma-separated list). */
export function streamProtocols(header: string | string[] | undefined): string[] {
  return (Array.isArray(header) ? header : [header ?? ''])
    .flatMap((value) => value.split(','))
    .map((p) => p.trim())
    .filter((p) => p !== '');
}

/**
 * What the cluster is offered for a client's subprotocol: the same, except `portforward.k8s.io`, whose
 * WebSocket framing is the kubelet's `v4.channel.k8s.io` (binary, one channel byte per message).
 */
export function upstreamProtocol(protocol: string): string {
  return protocol === 'portforward.k8s.io' ? 'v4.channel.k8s.io' : protocol;
}

/** The subprotocols a client offered, split into the token (if any) and the rest. */
export function offeredProtocols(header: string | undefined): { token?: string; protocols: string[] } {
  const protocols: string[] = [];
  let token: string | undefined;
  for (const raw of (header ?? '').split(',')) {
    const protocol = raw.trim();
    if (protocol === '') continue;
    if (protocol.startsWith(BEARER_PROTOCOL_PREFIX)) {
      token = Buffer.from(protocol.slice(BEARER_PROTOCOL_PREFIX.length), 'base64url').toString('utf8');
    } else {
      protocols.push(protocol);
    }
  }
  return { token, protocols };
}

export function isBase64(protocol: string): boolean {
  return protocol.includes('base64');
}

/** A message of a channel protocol: its channel, and its payload (decoded from base64 when the protocol is). */
export function channelOf(data: Buffer, base64: boolean): { channel: number; payload: Buffer } | undefined {
  if (data.length === 0) return undefined;
  if (base64) {
    const channel = data[0] - 0x30;
    return { channel, payload: Buffer.from(data.subarray(1).toString('latin1'), 'base64') };
  }
  return { channel: data[0], payload: data.subarray(1) };
}

/** A message on `channel` in the protocol's framing. */
export function channelMessage(
  channel: number,
  payload: Buffer,
  base64: boolean,
): { data: Buffer | string; binary: boolean } {
  if (base64) return { data: String(channel) + payload.toString('base64'), binary: false };
  return { data: Buffer.concat([Buffer.from([channel]), payload]), binary: true };
}

/** The exit code a v4 error-channel Status carries: 0 on Success, the ExitCode cause on a non-zero exit. */
export function exitCodeOf(status: Buffer): number | undefined {
  try {
    const parsed = JSON.parse(status.toString('utf8')) as {
      status?: string;
      details?: { causes?: Array<{ reason?: string; message?: string }> };
    };
    if (parsed.status === 'Success') return 0;
    const cause = parsed.details?.causes?.find((c) => c.reason === 'ExitCode');
    const code = Number(cause?.message);
    return Number.isInteger(code) ? code : undefined;
  } catch {
    return undefined;
  }
}

/** The error-channel message that ends a session for a reason of the service's own. */
export function endStatus(protocol: string, code: number, reason: string, message: string): Buffer {
  if (!protocol.startsWith('v4.')) return Buffer.from(message, 'utf8');
  return Buffer.from(
    JSON.stringify({ kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message, reason, code }),
  );
}

/** Output as text, multi-byte characters split across messages kept whole (one decoder per channel). */
export function textDecoders(): Map<number, StringDecoder> {
  return new Map([
    [STDOUT, new StringDecoder('utf8')],
    [STDERR, new StringDecoder('utf8')],
  ]);
}
