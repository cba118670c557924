// Certificates of one control plane, made with the openssl CLI.
// Keys are ECDSA P-256 (instant to generate; supported by every 1.20 component).
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

async function openssl(args: string[], cwd: string): Promise<void> {
  try {
    await run('openssl', args, { cwd });
  } catch (err) {
    const e = err as { stderr?: string; message: string };
    throw new Error(`openssl ${args.join(' ')} failed: ${e.stderr || e.message}`, { cause: err });
  }
}

const EC = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];

export interface CertFiles {
  caCert: string;
  caKey: string;
  serverCert: string;
  serverKey: string;
  adminCert: string;
  adminKey: string;
  controllerManagerCert: string;
  controllerManagerKey: string;
  /** The apiserver's client certificate towards kubelets (logs, exec): CN=kube-apiserver-kubelet-client */
  kubeletClientCert: string;
  kubeletClientKey: string;
  serviceAccountKey: string; // private (PKCS#8 PEM)
  serviceAccountPub: string;
}

async function leaf(dir: string, base: string, subject: string, extensions: string[]): Promise<void> {
  await openssl(['req', '-new', ...EC, '-keyout', `${base}.key`, '-subj', subject, '-out', `${base}.csr`], dir);
  await writeFile(join(dir, `${base}.ext`), extensions.join('\n') + '\n');
  await openssl(
    [
      'x509',
      '-req',
      '-in',
      `${base}.csr`,
      '-CA',
      'ca.crt',
      '-CAkey',
      'ca.key',
      '-set_serial',
      '0x' + randomBytes(12).toString('hex'),
      '-days',
      '3650',
      '-sha256',
      '-extfile',
      `${base}.ext`,
      '-out',
      `${base}.crt`,
    ],
    dir,
  );
}

/** The common name of the client certificate the apiserver presents to kubelets. */
export const KUBELET_CLIENT_CN = 'kube-apiserver-kubelet-client';

/**
 * A kubelet's serving certificate for 127.0.0.1, signed by the CA of an existing control plane
 * (`pkiDir` holds its ca.crt and ca.key); written into `outDir` as kubelet.crt/kubelet.key.
 */
export async function makeKubeletServingCert(
  pkiDir: string,
  outDir: string,
  nodeName: string,
): Promise<{ cert: string; key: string }> {
  await openssl(
    ['req', '-new', ...EC, '-keyout', 'kubelet.key', '-subj', `/CN=system:node:${nodeName}`, '-out', 'kubelet.csr'],
    outDir,
  );
  await writeFile(
    join(outDir, 'kubelet.ext'),
    [
      'basicConstraints=critical,CA:FALSE',
      'keyUsage=critical,digitalSignature,keyEncipherment',
      'extendedKeyUsage=serverAuth',
      `subjectAltName=IP:127.0.0.1,DNS:localhost`,
    ].join('\n') + '\n',
  );
  await openssl(
    [
      'x509',
      '-req',
      '-in',
      'kubelet.csr',
      '-CA',
      join(pkiDir, 'ca.crt'),
      '-CAkey',
      join(pkiDir, 'ca.key'),
      '-set_serial',
      '0x' + randomBytes(12).toString('hex'),
      '-days',
      '30',
      '-sha256',
      '-extfile',
      'kubelet.ext',
      '-out',
      'kubelet.crt',
    ],
    outDir,
  );
  const [cert, key] = await Promise.all([
    readFile(join(outDir, 'kubelet.crt'), 'utf8'),
    readFile(join(outDir, 'kubelet.key'), 'utf8'),
  ]);
  return { cert, key };
}

/** Writes a fresh CA and the certificates of one control plane into `dir`. */
export async function makeCertificates(dir: string, name: string): Promise<CertFiles> {
  await openssl(
    [
      'req',
      '-x509',
      ...EC,
      '-keyout',
      'ca.key',
      '-out',
      'ca.crt',
      '-days',
      '3650',
      '-sha256',
      '-subj',
      `/CN=cas-test-ca-${name}-${randomBytes(4).toString('hex')}`,
      '-addext',
      'basicConstraints=critical,CA:TRUE',
      '-addext',
      'keyUsage=critical,keyCertSign,cRLSign,digitalSignature',
    ],
    dir,
  );
  const client = [
    'basicConstraints=critical,CA:FALSE',
    'keyUsage=critical,digitalSignature,keyEncipherment',
    'extendedKeyUsage=clientAuth',
  ];
  await Promise.all([
    leaf(dir, 'apiserver', '/CN=kube-apiserver', [
      'basicConstraints=critical,CA:FALSE',
      'keyUsage=critical,digitalSignature,keyEncipherment',
      'extendedKeyUsage=serverAuth',
      'subjectAltName=IP:127.0.0.1,DNS:localhost,IP:10.0.0.1,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local',
    ]),
    leaf(dir, 'admin', '/O=system:masters/CN=cas-admin', client),
    leaf(dir, 'controller-manager', '/CN=system:kube-controller-manager', client),
    leaf(dir, 'apiserver-kubelet-client', `/O=system:masters/CN=${KUBELET_CLIENT_CN}`, client),
    (async () => {
      await openssl(['genpkey', '-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-out', 'sa.key'], dir);
      await openssl(['pkey', '-in', 'sa.key', '-pubout', '-out', 'sa.pub'], dir);
    })(),
  ]);
  const f = (n: string) => join(dir, n);
  return {
    caCert: f('ca.crt'),
    caKey: f('ca.key'),
    serverCert: f('apiserver.crt'),
    serverKey: f('apiserver.key'),
    adminCert: f('admin.crt'),
    adminKey: f('admin.key'),
    controllerManagerCert: f('controller-manager.crt'),
    controllerManagerKey: f('controller-manager.key'),
    kubeletClientCert: f('apiserver-kubelet-client.crt'),
    kubeletClientKey: f('apiserver-kubelet-client.key'),
    serviceAccountKey: f('sa.key'),
    serviceAccountPub: f('sa.pub'),
  };
}

export async function readPem(path: string): Promise<string> {
  return readFile(path, 'utf8');
}
