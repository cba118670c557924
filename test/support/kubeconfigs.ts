import { mkdtemp, rm } from 'node:fs/promises';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { makeCertificates, readPem } from '../harness/certs.js';

export const b64 = (text: string) => Buffer.from(text, 'utf8').toString('base64');

export interface ContextSpec {
  name: string;
  /** The cluster entry's body (server, certificate-authority-data, …). */
  cluster: Record<string, unknown>;
  /** The user entry's body (token, client-certificate-data, exec, …). */
  user: Record<string, unknown>;
  namespace?: string;
}

/** A kubeconfig with one cluster and one user per context, named `<context>-cluster` / `<context>-user`. */
export function kubeconfigYaml(contexts: ContextSpec[], currentContext: string | null = contexts[0]?.name ?? null) {
  return stringify({
    apiVersion: 'v1',
    kind: 'Config',
    ...(currentContext !== null ? { 'current-context': currentContext } : {}),
    clusters: contexts.map((c) => ({ name: `${c.name}-cluster`, cluster: c.cluster })),
    users: contexts.map((c) => ({ name: `${c.name}-user`, user: c.user })),
    contexts: contexts.map((c) => ({
      name: c.name,
      context: {
        cluster: `${c.name}-cluster`,
        user: `${c.name}-user`,
        ...(c.namespace ? { namespace: c.namespace } : {}),
      },
    })),
  });
}

/** What a control plane (or anything with a CA and an admin certificate) offers a kubeconfig. */
export interface Credentials {
  server: string;
  caData: string;
  adminToken?: string;
  adminCertData: string;
  adminKeyData: string;
}

/** A context for a server with inline CA and either a bearer token or the client certificate. */
export function contextFor(
  creds: Credentials,
  options: { name?: string; auth?: 'token' | 'cert'; token?: string; server?: string } = {},
): ContextSpec {
  const auth = options.auth ?? 'token';
  return {
    name: options.name ?? 'test',
    cluster: { server: options.server ?? creds.server, 'certificate-authority-data': b64(creds.caData) },
    user:
      auth === 'token'
        ? { token: options.token ?? creds.adminToken ?? 'test-token' }
        : { 'client-certificate-data': b64(creds.adminCertData), 'client-key-data': b64(creds.adminKeyData) },
  };
}

/** A CA, a client certificate and its key made with openssl (no control plane), for tests that only validate. */
export async function testCertificates(): Promise<{
  caData: string;
  certData: string;
  keyData: string;
  otherKeyData: string;
}> {
  const dir = await mkdtemp(join(tmpdir(), 'cas-kc-certs-'));
  try {
    const files = await makeCertificates(dir, 'unit');
    return {
      caData: await readPem(files.caCert),
      certData: await readPem(files.adminCert),
      keyData: await readPem(files.adminKey),
      otherKeyData: await readPem(files.controllerManagerKey),
    };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** A loopback port nothing listens on (it was free a moment ago). */
export async function closedPort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as net.AddressInfo).port;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}
