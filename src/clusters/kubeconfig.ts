// Validation and normalisation of kubeconfig documents (docs/API.md, Clusters). Pure: no I/O, no Nest.
//
// A stored kubeconfig must never run a program or read a file of the service's host, so only
// inline credentials are accepted, and only the selected context, its cluster and its user are
// kept. Problems are reported one per field, each naming the field's path in the document and
// never its value (values may be credentials).
import { createPrivateKey, X509Certificate } from 'node:crypto';
import { createSecureContext } from 'node:tls';
import { LineCounter, parseDocument, stringify } from 'yaml';
import { BOUNDED_PARSE_OPTIONS, duplicateKeyOffset, yamlStructureProblem } from '../common/bounded-yaml.js';
import { CLUSTER_NAME_PATTERN } from './cluster-name.js';

/** The connection part of one cluster entry. */
export interface KubeconfigCluster {
  /** https:// URL of the API server, without a trailing slash; may carry a path prefix. */
  server: string;
  /** Base64 of the PEM CA bundle, as in the document. */
  certificateAuthorityData?: string;
  insecureSkipTlsVerify: boolean;
  tlsServerName?: string;
}

/** Inline credentials of one user entry: a token, a client certificate and key, or basic auth. */
export interface KubeconfigUser {
  token?: string;
  clientCertificateData?: string;
  clientKeyData?: string;
  username?: string;
  password?: string;
}

/** One context with the cluster and user it names: everything needed to connect, nothing else. */
export interface KubeconfigContext {
  name: string;
  namespace?: string;
  clusterName: string;
  cluster: KubeconfigCluster;
  userName: string;
  user: KubeconfigUser;
}

/** What a connection needs from a context: TLS material (PEM) and the Authorization header value. */
export interface ConnectionCredentials {
  ca?: Buffer;
  cert?: Buffer;
  key?: Buffer;
  authorization?: string;
}

/**
 * The TLS material and Authorization header of a validated (inline-only) context: the same as
 * client-node's `KubeConfig.applyToHTTPSOptions` gives for it (a unit test compares the two), without
 * loading client-node's generated API models (about 70 MiB of memory) into the service.
 */
export function credentialsOf({ cluster, user }: Pick<KubeconfigContext, 'cluster' | 'user'>): ConnectionCredentials {
  const decode = (data: string | undefined) => (data ? Buffer.from(data, 'base64') : undefined);
  const credentials: ConnectionCredentials = {
    ca: decode(cluster.certificateAuthorityData),
    cert: decode(user.clientCertificateData),
    key: decode(user.clientKeyData),
  };
  if (user.token) credentials.authorization = `Bearer ${user.token}`;
  else if (user.username && user.password) {
    credentials.authorization = `Basic ${Buffer.from(`${user.username}:${user.password}`).toString('base64')}`;
  }
  return credentials;
}

/** What is wrong with a kubeconfig: one message per problem, each naming the field. */
export class KubeconfigError extends Error {
  constructor(readonly problems: string[]) {
    super(problems.join('; '));
  }
}

const NEVER_RUN = 'a stored kubeconfig must never run a program';
const NEVER_READ = "a stored kubeconfig must never read a file of the service's host";

/** Fields refused wherever they appear, and why. */
const REFUSED_CLUSTER_FIELDS: Record<string, string> = {
  'certificate-authority': `${NEVER_READ}; use certificate-authority-data`,
  'proxy-url': 'proxies are not supported; the service connects to the server directly',
};
const REFUSED_USER_FIELDS: Record<string, string> = {
  exec: NEVER_RUN,
  'auth-provider': `${NEVER_RUN} or refresh tokens through a provider; use token, client-certificate-data and client-key-data, or username and password`,
  tokenFile: `${NEVER_READ}; use token`,
  'token-file': `${NEVER_READ}; use token`,
  'client-certificate': `${NEVER_READ}; use client-certificate-data`,
  'client-key': `${NEVER_READ}; use client-key-data`,
  as: 'impersonation is not supported',
  'as-uid': 'impersonation is not supported',
  'as-groups': 'impersonation is not supported',
  'as-user-extra': 'impersonation is not supported',
};

type Entry = Record<string, unknown>;

/**
 * Bounds checked before (or while) a document is parsed, so no kubeconfig can hold the event loop:
 * deep flow nesting (`[[[[…`) or compact sequences (`- - - -…`) make YAML parsing superlinear, and
 * every certificate is parsed.
 */
export const KUBECONFIG_LIMITS = {
  /** Characters of the whole document. */
  maxLength: 512 * 1024,
  /** Nesting of `[` and `{` (kubeconfigs use none or one level). */
  maxFlowDepth: 16,
  /** Columns of a line's indentation, counting leading `- `, `? ` and `: ` indicators. */
  maxIndent: 64,
  /** Lines plus items of flow collections: what YAML parsing costs grows with it (a context takes ~15). */
  maxNodes: 1200,
  /** Entries in each of `clusters`, `users` and `contexts`. */
  maxEntries: 64,
  /** Certificates in one `*-data` field. */
  maxCertificatesPerField: 16,
  /** Certificates in the whole document. */
  maxCertificates: 32,
};

function isMapping(value: unknown): value is Entry {
  return typeof value === 'object' && value !== null && !Array.isArray(value) && !(value instanceof Uint8Array);
}

/** A parsed document: its named entries, not yet checked beyond their shape. */
interface Document {
  currentContext?: string;
  contexts: Array<{ index: number; name: string; body: Entry }>;
  clusters: Map<string, { index: number; body: Entry }>;
  users: Map<string, { index: number; body: Entry }>;
  /** Certificates the document may still make us parse. */
  certificateBudget: { left: number };
}

/** Parses YAML (or JSON) into the named entries of a kubeconfig; problems of shape are collected. */
function parseDocumentShape(text: string, problems: string[]): Document | undefined {
  if (text.trim() === '') {
    problems.push('config is empty');
    return undefined;
  }
  const tooBig = yamlStructureProblem(text, { ...KUBECONFIG_LIMITS, maxAliasCount: 100 }, 'config');
  if (tooBig) {
    problems.push(tooBig.message);
    return undefined;
  }
  const lineCounter = new LineCounter();
  const doc = parseDocument(text, { ...BOUNDED_PARSE_OPTIONS, lineCounter });
  if (doc.errors.length > 0) {
    // Without prettyErrors, yaml's messages do not quote the document (which may hold secrets).
    const error = doc.errors[0];
    const { line, col } = lineCounter.linePos(error.pos[0]);
    problems.push(`config is not valid YAML: ${error.message.slice(0, 200)} at line ${line}, column ${col}`);
    return undefined;
  }
  const duplicate = duplicateKeyOffset(doc);
  if (duplicate !== undefined) {
    const { line, col } = lineCounter.linePos(duplicate);
    problems.push(`config is not valid YAML: Map keys must be unique at line ${line}, column ${col}`);
    return undefined;
  }
  let root: unknown;
  try {
    root = doc.toJS({ maxAliasCount: 100 });
  } catch {
    problems.push('config is not valid YAML: too many aliases');
    return undefined;
  }
  if (!isMapping(root)) {
    problems.push('config must be a kubeconfig: a mapping with clusters, users and contexts');
    return undefined;
  }
  const current = root['current-context'];
  if (current !== undefined && current !== null && typeof current !== 'string') {
    problems.push('current-context must be a string');
  }
  const named = (list: string, key: string) => {
    const entries: Array<{ index: number; name: string; body: Entry }> = [];
    const value = root[list];
    if (value === undefined || value === null) return entries;
    if (!Array.isArray(value)) {
      problems.push(`${list} must be a list`);
      return entries;
    }
    if (value.length > KUBECONFIG_LIMITS.maxEntries) {
      problems.push(`${list} has more than ${KUBECONFIG_LIMITS.maxEntries} entries`);
      return entries;
    }
    const seen = new Set<string>();
    value.forEach((item: unknown, index: number) => {
      const path = `${list}[${index}]`;
      if (!isMapping(item)) return problems.push(`${path} must be a mapping with name and ${key}`);
      if (typeof item.name !== 'string' || item.name === '')
        return problems.push(`${path}.name must be a non-empty string`);
      if (seen.has(item.name)) return problems.push(`${path}.name '${item.name}' is used twice in ${list}`);
      seen.add(item.name);
      const body = item[key] ?? {};
      if (!isMapping(body)) return problems.push(`${path}.${key} must be a mapping`);
      entries.push({ index, name: item.name, body });
    });
    return entries;
  };
  const contexts = named('contexts', 'context');
  const byName = (entries: Array<{ index: number; name: string; body: Entry }>) =>
    new Map(entries.map((e) => [e.name, { index: e.index, body: e.body }]));
  return {
    currentContext: typeof current === 'string' && current !== '' ? current : undefined,
    contexts,
    clusters: byName(named('clusters', 'cluster')),
    users: byName(named('users', 'user')),
    certificateBudget: { left: KUBECONFIG_LIMITS.maxCertificates },
  };
}

function optionalString(body: Entry, field: string, path: string, problems: string[]): string | undefined {
  const value = body[field];
  if (value === undefined || value === null || value === '') return undefined;
  if (typeof value !== 'string') {
    problems.push(`${path}.${field} must be a string`);
    return undefined;
  }
  return value;
}

/** Base64 data field holding PEM; returns the normalised base64 and the PEM text. */
function pemData(body: Entry, field: string, path: string, problems: string[]) {
  const raw = optionalString(body, field, path, problems);
  if (raw === undefined) return undefined;
  const base64 = raw.replace(/\s+/g, '');
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(base64) || base64.length % 4 !== 0) {
    problems.push(`${path}.${field} must be base64`);
    return undefined;
  }
  return { base64, pem: Buffer.from(base64, 'base64').toString('utf8') };
}

const BEGIN = '-----BEGIN CERTIFICATE-----';
const END = '-----END CERTIFICATE-----';

/** The PEM blocks of a bundle, found with indexOf (a lazy regex over an unbounded bundle backtracks). */
function certificateBlocks(pem: string): string[] {
  const blocks: string[] = [];
  let start = pem.indexOf(BEGIN);
  while (start >= 0) {
    const end = pem.indexOf(END, start + BEGIN.length);
    if (end < 0) break;
    blocks.push(pem.slice(start, end + END.length));
    start = pem.indexOf(BEGIN, end + END.length);
  }
  return blocks;
}

function checkCertificates(pem: string, field: string, problems: string[], budget: { left: number }): boolean {
  const blocks = certificateBlocks(pem);
  if (blocks.length > KUBECONFIG_LIMITS.maxCertificatesPerField) {
    problems.push(`${field} holds more than ${KUBECONFIG_LIMITS.maxCertificatesPerField} certificates`);
    return false;
  }
  budget.left -= blocks.length;
  if (budget.left < 0) {
    problems.push(`config holds more than ${KUBECONFIG_LIMITS.maxCertificates} certificates`);
    return false;
  }
  try {
    for (const block of blocks) new X509Certificate(block);
    if (blocks.length > 0) return true;
  } catch {
    /* reported below */
  }
  problems.push(`${field} must be base64 of PEM certificates`);
  return false;
}

function refuse(body: Entry, refused: Record<string, string>, path: string, problems: string[]): void {
  for (const [field, reason] of Object.entries(refused)) {
    if (body[field] !== undefined && body[field] !== null) problems.push(`${path}.${field} is not allowed: ${reason}`);
  }
}

function checkCluster(
  index: number,
  body: Entry,
  problems: string[],
  budget: { left: number },
): KubeconfigCluster | undefined {
  const path = `clusters[${index}].cluster`;
  const before = problems.length;
  refuse(body, REFUSED_CLUSTER_FIELDS, path, problems);

  let server = optionalString(body, 'server', path, problems);
  if (body.server === undefined || body.server === null || body.server === '') {
    problems.push(`${path}.server is required`);
  } else if (server !== undefined) {
    let url: URL | undefined;
    try {
      url = new URL(server);
    } catch {
      problems.push(`${path}.server must be an https:// URL`);
    }
    if (url) {
      if (url.protocol !== 'https:') problems.push(`${path}.server must be an https:// URL`);
      else if (url.username || url.password) problems.push(`${path}.server must not carry credentials`);
      else if (url.search || url.hash) problems.push(`${path}.server must not have a query or fragment`);
      server = server.replace(/\/+$/, '');
    }
  }

  const ca = pemData(body, 'certificate-authority-data', path, problems);
  if (ca) checkCertificates(ca.pem, `${path}.certificate-authority-data`, problems, budget);

  const insecure = body['insecure-skip-tls-verify'];
  if (insecure !== undefined && insecure !== null && typeof insecure !== 'boolean') {
    problems.push(`${path}.insecure-skip-tls-verify must be true or false`);
  }
  if (insecure === true && ca) {
    problems.push(
      `${path}.insecure-skip-tls-verify cannot be true together with certificate-authority-data: remove one of them`,
    );
  }
  const tlsServerName = optionalString(body, 'tls-server-name', path, problems);
  if (tlsServerName !== undefined && !/^[A-Za-z0-9.-]{1,253}$/.test(tlsServerName)) {
    problems.push(`${path}.tls-server-name must be a host name`);
  }

  if (problems.length > before || server === undefined) return undefined;
  return {
    server,
    ...(ca ? { certificateAuthorityData: ca.base64 } : {}),
    insecureSkipTlsVerify: insecure === true,
    ...(tlsServerName ? { tlsServerName } : {}),
  };
}

function checkUser(
  index: number,
  body: Entry,
  problems: string[],
  budget: { left: number },
): KubeconfigUser | undefined {
  const path = `users[${index}].user`;
  const before = problems.length;
  refuse(body, REFUSED_USER_FIELDS, path, problems);

  const token = optionalString(body, 'token', path, problems);
  const username = optionalString(body, 'username', path, problems);
  const password = optionalString(body, 'password', path, problems);
  const cert = pemData(body, 'client-certificate-data', path, problems);
  const key = pemData(body, 'client-key-data', path, problems);

  if ((username === undefined) !== (password === undefined)) {
    problems.push(`${path}.username and ${path}.password must be given together`);
  }
  if (token !== undefined && username !== undefined) {
    problems.push(`${path}: give token or username and password, not both`);
  }
  if (token !== undefined && /[\r\n]/.test(token)) problems.push(`${path}.token must be a single line`);
  if (username !== undefined && username.includes(':')) problems.push(`${path}.username must not contain ':'`);
  if ((cert === undefined) !== (key === undefined)) {
    problems.push(`${path}.client-certificate-data and ${path}.client-key-data must be given together`);
  }
  if (cert && key) {
    const certOk = checkCertificates(cert.pem, `${path}.client-certificate-data`, problems, budget);
    let keyOk = true;
    try {
      createPrivateKey(key.pem);
    } catch {
      keyOk = false;
      problems.push(`${path}.client-key-data must be base64 of a PEM private key`);
    }
    if (certOk && keyOk) {
      try {
        createSecureContext({ cert: cert.pem, key: key.pem });
      } catch {
        problems.push(`${path}.client-key-data is not the key of client-certificate-data`);
      }
    }
  }
  const hasCredentials = token !== undefined || username !== undefined || cert !== undefined || key !== undefined;
  if (problems.length === before && !hasCredentials) {
    problems.push(
      `${path} has no inline credentials: give token, client-certificate-data and client-key-data, or username and password`,
    );
  }
  if (problems.length > before) return undefined;
  return {
    ...(token !== undefined ? { token } : {}),
    ...(cert && key ? { clientCertificateData: cert.base64, clientKeyData: key.base64 } : {}),
    ...(username !== undefined ? { username, password } : {}),
  };
}

/** Checks one context and what it references; problems are added, the context is returned when sound. */
function checkContext(doc: Document, name: string, problems: string[]): KubeconfigContext | undefined {
  const entry = doc.contexts.find((c) => c.name === name)!;
  const path = `contexts[${entry.index}].context`;
  const before = problems.length;
  const clusterName = optionalString(entry.body, 'cluster', path, problems);
  const userName = optionalString(entry.body, 'user', path, problems);
  const namespace = optionalString(entry.body, 'namespace', path, problems);
  let cluster: KubeconfigCluster | undefined;
  let user: KubeconfigUser | undefined;
  if (clusterName === undefined) {
    if (problems.length === before) problems.push(`${path}.cluster is required`);
  } else if (!doc.clusters.has(clusterName)) {
    problems.push(`${path}.cluster '${clusterName}' is not one of the clusters`);
  } else {
    const { index, body } = doc.clusters.get(clusterName)!;
    cluster = checkCluster(index, body, problems, doc.certificateBudget);
  }
  if (userName === undefined) {
    problems.push(`${path}.user is required: the service needs credentials`);
  } else if (!doc.users.has(userName)) {
    problems.push(`${path}.user '${userName}' is not one of the users`);
  } else {
    const { index, body } = doc.users.get(userName)!;
    user = checkUser(index, body, problems, doc.certificateBudget);
  }
  if (problems.length > before || !cluster || !user || !clusterName || !userName) return undefined;
  return { name, ...(namespace ? { namespace } : {}), clusterName, cluster, userName, user };
}

function uniqueProblems(problems: string[]): string[] {
  return [...new Set(problems)];
}

/**
 * The one context a cluster is created from: `current-context`, or the only context. Throws
 * KubeconfigError listing every problem.
 */
export function selectContext(text: string): KubeconfigContext {
  const problems: string[] = [];
  const doc = parseDocumentShape(text, problems);
  if (!doc) throw new KubeconfigError(problems);
  let name = doc.currentContext;
  const names = doc.contexts.map((c) => c.name);
  if (name !== undefined && !names.includes(name)) {
    problems.push(`current-context '${name}' is not one of the contexts (${names.join(', ') || 'none'})`);
  } else if (name === undefined && names.length === 1) {
    name = names[0];
  } else if (name === undefined && names.length === 0) {
    problems.push('config has no usable context: add a context naming a cluster and a user');
  } else if (name === undefined) {
    problems.push(`config has ${names.length} contexts and no current-context: set current-context to choose one`);
  }
  if (problems.length > 0 || name === undefined) throw new KubeconfigError(uniqueProblems(problems));
  const context = checkContext(doc, name, problems);
  if (!context) throw new KubeconfigError(uniqueProblems(problems));
  return context;
}

/**
 * Every context of a document, for import: each must be sound and its name must be usable as a
 * cluster name. Throws KubeconfigError listing every problem of every context.
 */
export function allContexts(text: string): { contexts: KubeconfigContext[]; currentContext?: string } {
  const problems: string[] = [];
  const doc = parseDocumentShape(text, problems);
  if (!doc) throw new KubeconfigError(problems);
  if (doc.contexts.length === 0)
    problems.push('config has no usable context: add a context naming a cluster and a user');
  const names = doc.contexts.map((c) => c.name);
  if (doc.currentContext !== undefined && !names.includes(doc.currentContext)) {
    problems.push(`current-context '${doc.currentContext}' is not one of the contexts (${names.join(', ') || 'none'})`);
  }
  const contexts: KubeconfigContext[] = [];
  for (const entry of doc.contexts) {
    if (!CLUSTER_NAME_PATTERN.test(entry.name)) {
      problems.push(
        `contexts[${entry.index}].name '${entry.name.slice(0, 60)}' cannot be a cluster name: use 1–253 printable ASCII characters without spaces`,
      );
    }
    const context = checkContext(doc, entry.name, problems);
    if (context) contexts.push(context);
  }
  if (problems.length > 0) throw new KubeconfigError(uniqueProblems(problems));
  return { contexts, currentContext: doc.currentContext };
}

/** The kubeconfig that is stored: the one context, its cluster and its user, and nothing else. */
export function toStoredKubeconfig(context: KubeconfigContext): string {
  const { cluster, user } = context;
  return stringify({
    apiVersion: 'v1',
    kind: 'Config',
    'current-context': context.name,
    clusters: [
      {
        name: context.clusterName,
        cluster: {
          server: cluster.server,
          ...(cluster.certificateAuthorityData
            ? { 'certificate-authority-data': cluster.certificateAuthorityData }
            : {}),
          ...(cluster.insecureSkipTlsVerify ? { 'insecure-skip-tls-verify': true } : {}),
          ...(cluster.tlsServerName ? { 'tls-server-name': cluster.tlsServerName } : {}),
        },
      },
    ],
    users: [
      {
        name: context.userName,
        user: {
          ...(user.token !== undefined ? { token: user.token } : {}),
          ...(user.clientCertificateData ? { 'client-certificate-data': user.clientCertificateData } : {}),
          ...(user.clientKeyData ? { 'client-key-data': user.clientKeyData } : {}),
          ...(user.username !== undefined ? { username: user.username, password: user.password } : {}),
        },
      },
    ],
    contexts: [
      {
        name: context.name,
        context: {
          cluster: context.clusterName,
          user: context.userName,
          ...(context.namespace ? { namespace: context.namespace } : {}),
        },
      },
    ],
  });
}
