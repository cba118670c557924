import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import Provider from 'oidc-provider';
import { generateKeyPairSync, randomBytes, createHash } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { request, type Response } from './http.js';

/**
 * A real, certified OpenID provider (the `oidc-provider` package) on a loopback port, for the
 * single sign-on tests. Its development login and consent pages are completed by `signInAt`
 * through HTTP like a browser would (cookies, redirects, form posts); every token the service sees
 * is issued by the provider.
 *
 * For the attack tests the same address can be switched to an impostor provider (same issuer,
 * same clients, another signing key published under the same `kid`) whose keys are never served at
 * `/jwks`, and one token response can be replaced by another real one (`replaceNextTokenResponse`),
 * as a compromised network path would.
 */

export interface TestAccount {
  /** Also the login typed into the provider's form. */
  sub: string;
  preferred_username?: string;
  name?: string;
  email?: string;
  picture?: string;
  groups: string[];
}

export interface TestClient {
  client_id: string;
  client_secret: string;
  redirect_uris: string[];
  id_token_signed_response_alg?: string;
}

export interface OidcTestProvider {
  issuer: string;
  accounts: Map<string, TestAccount>;
  /** GET /jwks requests served (the genuine keys). */
  jwksFetches: number;
  /** Requests that reached the token endpoint. */
  tokenRequests: number;
  /** The next POST /token is answered with this body (a real token response obtained earlier). */
  replaceNextTokenResponse(body: string): void;
  /** Every endpoint but /jwks is served by a provider with another key from now on (or again by the genuine one). */
  useImpostor(on: boolean): void;
  /** The provider rotates its signing key: a new key with a new `kid`, published at /jwks and used at once. */
  rotateKeys(): void;
  close(): Promise<void>;
}

const KID = 'signing-key-1';

function rsaJwk(kid: string) {
  const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  return { ...privateKey.export({ format: 'jwk' }), kid, alg: 'RS256', use: 'sig' };
}

function newProvider(
  issuer: string,
  clients: TestClient[],
  accounts: Map<string, TestAccount>,
  shortLived: Set<string>,
  kid = KID,
) {
  const provider = new Provider(issuer, {
    clients: clients.map((c) => ({
      grant_types: ['authorization_code'],
      response_types: ['code'],
      token_endpoint_auth_method: 'client_secret_basic',
      ...c,
    })),
    jwks: { keys: [rsaJwk(kid)] },
    enabledJWA: { idTokenSigningAlgValues: ['RS256', 'HS256'] },
    cookies: { keys: [randomBytes(16).toString('hex')] },
    pkce: { required: () => true },
    claims: {
      openid: ['sub'],
      profile: ['name', 'preferred_username', 'picture'],
      email: ['email'],
      groups: ['groups'],
    },
    ttl: {
      AccessToken: 600,
      Grant: 600,
      Interaction: 600,
      Session: 600,
      IdToken: (_ctx: unknown, token: { available?: { sub?: string } }) =>
        shortLived.has(token.available?.sub ?? '') ? 1 : 3600,
    },
    findAccount: async (_ctx: unknown, id: string) => {
      const account = accounts.get(id);
      if (!account) return undefined;
      return { accountId: id, claims: async () => ({ ...accounts.get(id) }) };
    },
  });
  provider.on('server_error', (_ctx: unknown, error: Error) => console.error('oidc-provider server_error', error));
  return provider;
}

export async function startOidcProvider(options: {
  clients: (issuer: string) => TestClient[];
  accounts: TestAccount[];
  /** Subjects whose ID tokens live one second. */
  shortLived?: string[];
}): Promise<OidcTestProvider> {
  const accounts = new Map(options.accounts.map((a) => [a.sub, a]));
  const shortLived = new Set(options.shortLived ?? []);
  let genuine: (req: IncomingMessage, res: ServerResponse) => void = () => undefined;
  let impostor: typeof genuine = () => undefined;
  let useImpostor = false;
  let replacement: string | null = null;
  let clients: TestClient[] = [];
  const handle: OidcTestProvider = {
    issuer: '',
    accounts,
    jwksFetches: 0,
    tokenRequests: 0,
    replaceNextTokenResponse: (body) => {
      replacement = body;
    },
    useImpostor: (on) => {
      useImpostor = on;
    },
    rotateKeys: () => {
      genuine = newProvider(
        handle.issuer,
        clients,
        accounts,
        shortLived,
        `rotated-${randomBytes(4).toString('hex')}`,
      ).callback();
    },
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
  const server: Server = createServer((req, res) => {
    const path = (req.url ?? '').split('?')[0];
    if (path === '/jwks') {
      handle.jwksFetches++;
      return genuine(req, res);
    }
    if (path === '/token' && req.method === 'POST') {
      handle.tokenRequests++;
      if (replacement !== null) {
        const body = replacement;
        replacement = null;
        req.resume();
        req.on('end', () => {
          res.writeHead(200, { 'content-type': 'application/json', 'cache-control': 'no-store' });
          res.end(body);
        });
        return;
      }
    }
    return (useImpostor ? impostor : genuine)(req, res);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  handle.issuer = issuer;
  clients = options.clients(issuer);
  genuine = newProvider(issuer, clients, accounts, shortLived).callback();
  impostor = newProvider(issuer, clients, accounts, shortLived).callback();
  server.keepAliveTimeout = 1000;
  return handle;
}

/** A browser's cookie jar for one site (the provider). */
export class CookieJar {
  private readonly cookies = new Map<string, string>();

  store(setCookies: string[]): void {
    for (const line of setCookies) {
      const [pair] = line.split(';');
      const eq = pair.indexOf('=');
      const name = pair.slice(0, eq).trim();
      const value = pair.slice(eq + 1).trim();
      if (!value || /max-age=0|expires=thu, 01 jan 1970/i.test(line)) this.cookies.delete(name);
      else this.cookies.set(name, value);
    }
  }

  header(): string {
    return [...this.cookies].map(([k, v]) => `${k}=${v}`).join('; ');
  }
}

function formOf(html: string): { action: string; fields: Record<string, string> } | null {
  const form = /<form[^>]*action="([^"]+)"[^>]*>([\s\S]*?)<\/form>/i.exec(html);
  if (!form) return null;
  const fields: Record<string, string> = {};
  for (const input of form[2].matchAll(/<input([^>]*)>/gi)) {
    const name = /name="([^"]*)"/.exec(input[1])?.[1];
    const value = /value="([^"]*)"/.exec(input[1])?.[1] ?? '';
    if (name) fields[name] = value;
  }
  return { action: form[1].replace(/&amp;/g, '&'), fields };
}

/**
 * Goes to the provider's authorization URL like a browser: follows its redirects, fills its login
 * form with `login` (and any password: the development login checks none), approves its consent
 * form, and stops at the first redirect that leaves the provider. Returns that URL (the service's
 * callback with `code` and `state`, or with `error`).
 */
export async function signInAt(authorizationUrl: string, login: string, jar = new CookieJar()): Promise<string> {
  let url = authorizationUrl;
  const origin = new URL(authorizationUrl).origin;
  let method = 'GET';
  let body: string | undefined;
  for (let step = 0; step < 20; step++) {
    const res = await fetch(url, {
      method,
      redirect: 'manual',
      headers: {
        cookie: jar.header(),
        ...(body ? { 'content-type': 'application/x-www-form-urlencoded' } : {}),
      },
      body,
    });
    jar.store(res.headers.getSetCookie());
    method = 'GET';
    body = undefined;
    if (res.status >= 300 && res.status < 400) {
      const next = new URL(res.headers.get('location')!, url);
      await res.arrayBuffer();
      if (next.origin !== origin) return next.href;
      url = next.href;
      continue;
    }
    const html = await res.text();
    const form = res.status === 200 ? formOf(html) : null;
    if (!form) throw new Error(`the provider answered ${res.status} at ${url}: ${html.slice(0, 500)}`);
    const fields = { ...form.fields };
    if ('login' in fields || fields.prompt === 'login') Object.assign(fields, { login, password: 'any password' });
    url = new URL(form.action, url).href;
    method = 'POST';
    body = new URLSearchParams(fields).toString();
  }
  throw new Error('too many steps at the provider');
}

/** PKCE for an authorization the test makes itself (as an attacker holding its own client would). */
export function pkcePair(): { verifier: string; challenge: string } {
  const verifier = randomBytes(32).toString('base64url');
  return { verifier, challenge: createHash('sha256').update(verifier).digest('base64url') };
}

/** Exchanges a code at the provider's token endpoint; returns the raw token response body. */
export async function exchangeCode(
  provider: OidcTestProvider,
  client: TestClient,
  code: string,
  verifier: string,
): Promise<string> {
  const res = await fetch(`${provider.issuer}/token`, {
    method: 'POST',
    headers: {
      authorization: 'Basic ' + Buffer.from(`${client.client_id}:${client.client_secret}`).toString('base64'),
      'content-type': 'application/x-www-form-urlencoded',
    },
    body: new URLSearchParams({
      grant_type: 'authorization_code',
      code,
      redirect_uri: client.redirect_uris[0],
      code_verifier: verifier,
    }).toString(),
  });
  const text = await res.text();
  if (res.status !== 200) throw new Error(`token exchange failed: ${res.status} ${text}`);
  return text;
}

export interface ServiceSignIn {
  /** The service's answer to `/login`. */
  login: Response;
  /** The sealed sign-in cookie the service set (`cas_oidc_<id>=…`). */
  stateCookie: string;
  /** The provider's authorization URL the service redirected to. */
  authorizationUrl: URL;
  /** Where the provider sent the browser back. */
  callbackUrl: URL;
  /** The service's answer to the callback. */
  callback: Response;
  /** The session token from the `cas_session` cookie, if one was set. */
  sessionToken: string | undefined;
}

function setCookies(res: Response): string[] {
  const raw = res.headers['set-cookie'];
  return raw === undefined ? [] : ([] as string[]).concat(raw as string | string[]);
}

export function cookieValue(res: Response, name: string): string | undefined {
  for (const line of setCookies(res)) {
    const [pair] = line.split(';');
    if (pair.startsWith(`${name}=`)) return pair.slice(name.length + 1);
  }
  return undefined;
}

/** Calls the service at a URL under its public address (through inject, with the given cookie). */
export function callService(app: NestFastifyApplication, url: URL | string, cookie?: string): Promise<Response> {
  const u = new URL(url);
  return request(app, 'GET', u.pathname + u.search, { headers: cookie ? { cookie } : {} });
}

/**
 * The whole browser journey: the service's `/login`, the provider's pages, back to the service's
 * callback. `tamper` may change the authorization URL (an attacker's) or the callback URL before use.
 */
export async function signInThroughService(
  app: NestFastifyApplication,
  providerId: string,
  login: string,
  options: {
    redirect?: string;
    tamperAuthorization?: (url: URL) => void;
    tamperCallback?: (url: URL) => void;
    beforeCallback?: (authorizationUrl: URL) => Promise<void>;
  } = {},
): Promise<ServiceSignIn> {
  const query = options.redirect === undefined ? '' : '?' + new URLSearchParams({ redirect: options.redirect });
  const loginRes = await request(app, 'GET', `/api/v1/auth/oidc/${providerId}/login${query}`);
  if (loginRes.status !== 302) throw new Error(`login answered ${loginRes.status}: ${loginRes.text}`);
  const stateValue = cookieValue(loginRes, `cas_oidc_${providerId}`);
  if (!stateValue) throw new Error('login set no sign-in cookie');
  const stateCookie = `cas_oidc_${providerId}=${stateValue}`;
  const authorizationUrl = new URL(String(loginRes.headers.location));
  const sent = new URL(authorizationUrl);
  options.tamperAuthorization?.(sent);
  const callbackUrl = new URL(await signInAt(sent.href, login));
  options.tamperCallback?.(callbackUrl);
  await options.beforeCallback?.(authorizationUrl);
  const callback = await callService(app, callbackUrl, stateCookie);
  return {
    login: loginRes,
    stateCookie,
    authorizationUrl,
    callbackUrl,
    callback,
    sessionToken: cookieValue(callback, 'cas_session') || undefined,
  };
}
