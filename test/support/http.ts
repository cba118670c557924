import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import { validatorFor, type ContractValidator } from './openapi-validator.js';

export interface Response<T = any> {
  status: number;
  headers: Record<string, string | string[] | number | undefined>;
  body: T;
  text: string;
}

export interface RequestOptions {
  /** Sent as `Authorization: Bearer <token>`. */
  token?: string;
  headers?: Record<string, string>;
  body?: unknown;
  /** Sent verbatim (string) instead of JSON. */
  rawBody?: string;
  query?: Record<string, string>;
}

const contracts = new WeakMap<NestFastifyApplication, Promise<ContractValidator>>();

/** The OpenAPI document the app serves, compiled once per distinct document. */
export function contractOf(app: NestFastifyApplication): Promise<ContractValidator> {
  let contract = contracts.get(app);
  if (!contract) {
    contract = app.inject({ method: 'GET', url: '/api/docs/openapi.json' }).then((res) => validatorFor(res.body));
    contracts.set(app, contract);
  }
  return contract;
}

/**
 * One request through the real app (app.inject: the whole Fastify pipeline, no socket). The response is
 * checked against the app's OpenAPI document: an undeclared status, a body off its schema or a missing
 * declared header fails the test, naming the operation.
 */
export async function request<T = any>(
  app: NestFastifyApplication,
  method: string,
  url: string,
  options: RequestOptions = {},
): Promise<Response<T>> {
  const headers: Record<string, string> = { ...options.headers };
  if (options.token) headers.authorization = `Bearer ${options.token}`;
  let payload: string | undefined;
  if (options.rawBody !== undefined) payload = options.rawBody;
  else if (options.body !== undefined) {
    payload = JSON.stringify(options.body);
    headers['content-type'] ??= 'application/json';
  }
  const qs = options.query ? '?' + new URLSearchParams(options.query).toString() : '';
  const res = await app.inject({ method: method as 'GET', url: url + qs, headers, payload });
  let body: any;
  try {
    body = res.body ? JSON.parse(res.body) : undefined;
  } catch {
    body = undefined;
  }
  (await contractOf(app)).assert({
    method,
    url: url + qs,
    status: res.statusCode,
    headers: res.headers,
    text: res.body,
    requestBody: payload,
  });
  return { status: res.statusCode, headers: res.headers, body, text: res.body };
}

/** A client bound to one app and, optionally, one credential. */
export function client(app: NestFastifyApplication, token?: string) {
  const call =
    (method: string) =>
    (url: string, options: RequestOptions = {}) =>
      request(app, method, url, { token, ...options });
  return { get: call('GET'), post: call('POST'), put: call('PUT'), patch: call('PATCH'), delete: call('DELETE') };
}
