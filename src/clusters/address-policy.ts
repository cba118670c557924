// Which network addresses a cluster server may be at. Pure, and small on purpose: every client that
// connects to a cluster (node:http today, undici perhaps later) calls it from its `lookup`, so the
// address checked is the one connected to, not only a literal in the URL.
import { lookup as dnsLookup, type LookupAddress, type LookupOptions } from 'node:dns';
import { isIP } from 'node:net';

export interface AddressPolicy {
  /** Allow link-local and cloud-metadata addresses (169.254.0.0/16, fe80::/10, fd00:ec2::254). */
  allowLinkLocal: boolean;
}

/** The connection was refused by the policy before it was made. */
export class AddressNotAllowedError extends Error {
  readonly code = 'EADDRNOTALLOWED';
}

function ipv4Octets(address: string): number[] | undefined {
  const parts = address.split('.');
  if (parts.length !== 4) return undefined;
  const octets = parts.map(Number);
  return octets.every((o) => Number.isInteger(o) && o >= 0 && o <= 255) ? octets : undefined;
}

/** The 8 16-bit groups of an IPv6 address (expanding `::` and a trailing dotted IPv4). */
function ipv6Groups(address: string): number[] | undefined {
  let text = address.toLowerCase().replace(/%.*$/, '');
  const dotted = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (dotted) {
    const o = ipv4Octets(dotted[1]);
    if (!o) return undefined;
    text =
      text.slice(0, -dotted[1].length) + `${((o[0] << 8) | o[1]).toString(16)}:${((o[2] << 8) | o[3]).toString(16)}`;
  }
  const [head, tail] = text.split('::');
  const parse = (s: string) => (s === '' ? [] : s.split(':').map((g) => parseInt(g, 16)));
  const left = parse(head);
  const right = tail === undefined ? [] : parse(tail);
  const missing = 8 - left.length - right.length;
  if (missing < 0 || (tail === undefined && missing !== 0)) return undefined;
  return [...left, ...Array<number>(missing).fill(0), ...right];
}

/**
 * Why a cluster server must not be at this address, or null when it may. Loopback stays allowed:
 * local clusters (kind, minikube, this service's tests) listen there.
 */
export function refusedAddress(address: string, policy: AddressPolicy): string | null {
  if (policy.allowLinkLocal) return null;
  const version = isIP(address.replace(/^\[|\]$/g, ''));
  const bare = address.replace(/^\[|\]$/g, '');
  if (version === 4) {
    const o = ipv4Octets(bare)!;
    return o[0] === 169 && o[1] === 254 ? 'a link-local address (169.254.0.0/16, where cloud metadata lives)' : null;
  }
  if (version === 6) {
    const g = ipv6Groups(bare);
    if (!g) return null;
    if ((g[0] & 0xffc0) === 0xfe80) return 'a link-local address (fe80::/10)';
    if (g.join(':') === [0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254].join(':')) return 'a cloud metadata address';
    // IPv4-mapped (::ffff:a.b.c.d) and NAT64 well-known prefix (64:ff9b::a.b.c.d) forms of 169.254/16.
    const mapped = g.slice(0, 5).every((x) => x === 0) && g[5] === 0xffff;
    const nat64 = g[0] === 0x64 && g[1] === 0xff9b && g.slice(2, 6).every((x) => x === 0);
    if ((mapped || nat64) && g[6] >> 8 === 169 && (g[6] & 0xff) === 254) {
      return 'a link-local address (169.254.0.0/16, where cloud metadata lives)';
    }
  }
  return null;
}

/**
 * Why a server URL's literal address is refused (`<address> is <reason>`), or null: allowed, or a
 * host name (checked as it resolves, by `policyLookup`).
 */
export function refusedServer(server: URL, policy: AddressPolicy): string | null {
  const host = server.hostname.replace(/^\[|\]$/g, '');
  const reason = refusedAddress(host, policy);
  return reason === null ? null : `${host} is ${reason}`;
}

type LookupCallback = (error: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void;
type Lookup = (hostname: string, options: LookupOptions, callback: LookupCallback) => void;

/**
 * A `lookup` for node:net / node:http / node:https (and undici's `connect.lookup`) that resolves
 * as usual and refuses the connection when an address it would use is not allowed.
 */
export function policyLookup(policy: AddressPolicy, lookup: Lookup = dnsLookup as unknown as Lookup): Lookup {
  return (hostname, options, callback) => {
    lookup(hostname, options, (error, address, family) => {
      if (error) return callback(error, address, family);
      const addresses = Array.isArray(address) ? address.map((a) => a.address) : [address];
      for (const a of addresses) {
        const reason = refusedAddress(a, policy);
        if (reason) return callback(new AddressNotAllowedError(`${hostname} resolves to ${reason}`), address, family);
      }
      callback(null, address, family);
    });
  };
}
