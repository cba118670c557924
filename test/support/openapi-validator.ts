/**
 * Checks every response the tests receive against the OpenAPI document (mechanism 1 of issue 10): the
 * status is declared for the operation (method + path template), the body is valid against the declared
 * schema (ajv, with OpenAPI's `nullable` and `discriminator`), its content type is a declared one, and the
 * declared required headers are there. A mismatch throws an error naming the operation.
 *
 * `test/support/http.ts` calls it for every `request()`/`client()` call, with the document the app under test
 * serves; tests that talk to a listening service over a socket call `assertContract()` with the committed
 * `openapi.json` (the two are equal by test/http/openapi.test.ts).
 */
import { parse as parseYaml } from 'yaml';
import { Ajv, type ValidateFunction } from 'ajv';
import addFormatsModule from 'ajv-formats';
import { readFileSync } from 'node:fs';

const addFormats = addFormatsModule as unknown as (ajv: Ajv) => Ajv;

export interface Exchange {
  method: string;
  /** Path and query, as sent (`/api/v1/admin/users/?page=2`). */
  url: string;
  status: number;
  headers: Record<string, unknown>;
  /** The response body as text ('' when none). */
  text: string;
  /** The request body as sent, when the test wants it checked too (only for answers 2xx: what the service accepted). */
  requestBody?: string;
}

interface Operation {
  method: string;
  template: string;
  regex: RegExp;
  literalSegments: number;
  op: any;
}

/** Paths the service serves that are not API operations: Swagger UI and the document itself. */
const UNDOCUMENTED = [/^\/api\/docs(\/|$)/];
const METHODS = ['get', 'put', 'post', 'delete', 'patch'];

export class ContractError extends Error {}

export class ContractValidator {
  private readonly operations: Operation[] = [];
  private readonly ajv: Ajv;
  private readonly compiled = new Map<unknown, ValidateFunction>();

  constructor(private readonly document: any) {
    this.ajv = new Ajv({ strict: false, allErrors: true, discriminator: true });
    addFormats(this.ajv);
    // The components become one schema resource that every response schema refers into.
    this.ajv.addSchema({ $id: 'openapi.json', components: withoutMappings(rebaseRefs(document.components ?? {})) });
    for (const [template, item] of Object.entries<any>(document.paths ?? {})) {
      for (const method of METHODS) {
        if (!item[method]) continue;
        const segments = template.split('/').filter(Boolean);
        const pattern = segments.map((s) => (/^\{.+\}$/.test(s) ? '[^/]+' : escapeRegex(s))).join('/');
        this.operations.push({
          method,
          template,
          regex: new RegExp(`^/${pattern}$`),
          literalSegments: segments.filter((s) => !s.startsWith('{')).length,
          op: item[method],
        });
      }
    }
    // The most literal template wins, as in the router (`/admin/users/create_super_user` over `/{resource}/{namespace}`).
    this.operations.sort((a, b) => b.literalSegments - a.literalSegments);
  }

  /** The problems with one response; empty when it matches the document. */
  check(exchange: Exchange): string[] {
    const method = exchange.method.toLowerCase();
    // CORS preflights and HEAD are answered by the framework, not by an operation.
    if (method === 'options' || method === 'head') return [];
    let path = exchange.url.split('?')[0];
    if (path.length > 1) path = path.replace(/\/+$/, '');
    if (UNDOCUMENTED.some((r) => r.test(path))) return [];
    const match = this.operations.find((o) => o.method === method && o.regex.test(path));
    if (!match) {
      // Fastify's not-found answer for a path or method no route serves: it must still be the service's error.
      // The same for a URL the HTTP layer refuses before routing (a malformed escape: 400; too long: 414).
      if ([400, 404, 414].includes(exchange.status)) {
        return this.checkBody(`${exchange.method} ${path} (no route)`, exchange, {
          'application/json': { schema: { $ref: '#/components/schemas/ErrorResponseDto' } },
        });
      }
      return [`${exchange.method} ${path}: answered ${exchange.status}, but the document has no such operation`];
    }
    const label = `${match.op.operationId} (${method.toUpperCase()} ${match.template})`;
    const responses = match.op.responses ?? {};
    const declared =
      responses[String(exchange.status)] ?? responses[`${String(exchange.status)[0]}XX`] ?? responses.default;
    if (!declared) {
      return [`${label}: status ${exchange.status} is not declared (declared: ${Object.keys(responses).join(', ')})`];
    }
    const response = this.resolve(declared);
    const problems: string[] = [];
    for (const [name, header] of Object.entries<any>(response.headers ?? {})) {
      const h = this.resolve(header);
      const value = headerValue(exchange.headers, name);
      if (value === undefined) {
        if (h.required) problems.push(`${label} ${exchange.status}: declared header ${name} is missing`);
        continue;
      }
      if (h.schema?.type === 'integer' && !/^\d+$/.test(value)) {
        problems.push(`${label} ${exchange.status}: header ${name} is not an integer: ${value}`);
      }
    }
    problems.push(...this.checkBody(`${label} ${exchange.status}`, exchange, response.content));
    if (exchange.status >= 200 && exchange.status < 300)
      problems.push(...this.checkAccepted(label, match.op, exchange));
    return problems;
  }

  /**
   * What the service accepted (answered 2xx) must be what the document allows: every query parameter
   * declared and valid, the body valid against the declared request schema. A service more lenient than
   * its document (a pattern that rejects `""` the service takes) fails here.
   */
  private checkAccepted(label: string, op: any, exchange: Exchange): string[] {
    const problems: string[] = [];
    const params = (op.parameters ?? []).map((p: any) => this.resolve(p));
    const query = new URLSearchParams(exchange.url.split('?')[1] ?? '');
    for (const [name, value] of query) {
      const param = params.find((p: any) => p.in === 'query' && p.name === name);
      if (!param) {
        problems.push(`${label}: query parameter ${name} is not declared, but the service accepted it`);
        continue;
      }
      const schema = param.schema ?? {};
      const typed =
        schema.type === 'integer' || schema.type === 'number'
          ? Number(value)
          : schema.type === 'boolean'
            ? value === 'true'
              ? true
              : value === 'false'
                ? false
                : value
            : value;
      const validate = this.validatorOf(schema);
      // A repeated (array) parameter is checked value by value: `match[]=a&match[]=b`.
      if (schema.type === 'array') {
        const item = this.validatorOf(schema.items ?? {});
        if (!item(typed)) problems.push(`${label}: query ${name}=${value} ${this.ajv.errorsText(item.errors)}`);
        continue;
      }
      if (!validate(typed)) problems.push(`${label}: query ${name}=${value} ${this.ajv.errorsText(validate.errors)}`);
    }
    const schema = op.requestBody && this.resolve(op.requestBody).content?.['application/json']?.schema;
    if (schema && exchange.requestBody) {
      let body: unknown;
      try {
        body = JSON.parse(exchange.requestBody);
      } catch {
        return problems;
      }
      const validate = this.validatorOf(schema);
      if (!validate(body)) {
        problems.push(
          `${label}: the service accepted a body the document refuses: ${this.ajv.errorsText(validate.errors)}`,
        );
      }
    }
    return problems;
  }

  /** Throws a ContractError naming the operation when the response does not match the document. */
  assert(exchange: Exchange): void {
    const problems = this.check(exchange);
    if (problems.length > 0) {
      throw new ContractError(
        `response does not match openapi.json:\n  ${problems.join('\n  ')}\n  body: ${exchange.text.slice(0, 600)}`,
      );
    }
  }

  private checkBody(label: string, exchange: Exchange, content: Record<string, any> | undefined): string[] {
    if (!content || Object.keys(content).length === 0) {
      return exchange.text === '' ? [] : [`${label}: a body came back, but none is declared`];
    }
    const type = String(headerValue(exchange.headers, 'content-type') ?? '')
      .split(';')[0]
      .trim()
      .toLowerCase();
    const media = content[type];
    // An empty text is a body only where a string may be empty (a diff of no change).
    const emptyText = media?.schema?.type === 'string' && !media.schema.minLength;
    if (exchange.text === '' && !emptyText) return [`${label}: no body, but one is declared`];
    if (!media) return [`${label}: content type '${type}' is not declared (${Object.keys(content).join(', ')})`];
    if (!media.schema) return [];
    let body: unknown = exchange.text;
    // Text media types (a pod's log, an event stream) are checked as the string they are.
    if (type === 'application/json' || type.endsWith('+json')) {
      try {
        body = JSON.parse(exchange.text);
      } catch {
        return [`${label}: the body is not JSON`];
      }
    } else if (type === 'application/yaml' && media.schema.type !== 'string') {
      // A document declared with the schema of its data (a resource read as YAML) is checked as that data.
      try {
        body = parseYaml(exchange.text);
      } catch {
        return [`${label}: the body is not YAML`];
      }
    }
    const validate = this.validatorOf(media.schema);
    if (validate(body)) return [];
    return (validate.errors ?? []).map(
      (e) => `${label}: body${e.instancePath} ${e.message}${e.params ? ' ' + JSON.stringify(e.params) : ''}`,
    );
  }

  private validatorOf(schema: unknown): ValidateFunction {
    let validate = this.compiled.get(schema);
    if (!validate) {
      validate = this.ajv.compile(withoutMappings(rebaseRefs(schema)) as object);
      this.compiled.set(schema, validate);
    }
    return validate;
  }

  private resolve(node: any): any {
    while (node && typeof node.$ref === 'string') {
      node = node.$ref
        .replace(/^#\//, '')
        .split('/')
        .reduce((at: any, key: string) => at?.[key.replace(/~1/g, '/').replace(/~0/g, '~')], this.document);
    }
    return node ?? {};
  }
}

function headerValue(headers: Record<string, unknown>, name: string): string | undefined {
  const key = Object.keys(headers).find((k) => k.toLowerCase() === name.toLowerCase());
  if (key === undefined) return undefined;
  const value = headers[key];
  if (value === undefined) return undefined;
  return Array.isArray(value) ? value.join(', ') : String(value);
}

function escapeRegex(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/** `#/components/...` → `openapi.json#/components/...`, so every schema resolves into the one components resource. */
function rebaseRefs(node: unknown): unknown {
  if (Array.isArray(node)) return node.map(rebaseRefs);
  if (node && typeof node === 'object') {
    return Object.fromEntries(
      Object.entries(node).map(([k, v]) => [
        k,
        k === '$ref' && typeof v === 'string' && v.startsWith('#/') ? `openapi.json${v}` : rebaseRefs(v),
      ]),
    );
  }
  return node;
}

/** ajv implements `discriminator` from the property's `enum`; it refuses `mapping` (test/http/openapi.test.ts checks the two agree). */
function withoutMappings(node: unknown): unknown {
  if (Array.isArray(node)) return node.map(withoutMappings);
  if (node && typeof node === 'object') {
    return Object.fromEntries(
      Object.entries(node).map(([k, v]) => [
        k,
        k === 'discriminator' && v && typeof v === 'object'
          ? { propertyName: (v as any).propertyName }
          : withoutMappings(v),
      ]),
    );
  }
  return node;
}

const byText = new Map<string, ContractValidator>();

/** The validator of a document (given as its JSON text); compiled once per distinct document. */
export function validatorFor(documentText: string): ContractValidator {
  let validator = byText.get(documentText);
  if (!validator) {
    validator = new ContractValidator(JSON.parse(documentText));
    byText.set(documentText, validator);
  }
  return validator;
}

let committed: ContractValidator | undefined;

/** The validator of the committed openapi.json (for tests that talk to a listening service). */
export function committedContract(): ContractValidator {
  committed ??= validatorFor(readFileSync(new URL('../../../openapi.json', import.meta.url), 'utf8'));
  return committed;
}

/** Checks one response against the committed document; for tests that use fetch or sockets. */
export function assertContract(exchange: Exchange): void {
  committedContract().assert(exchange);
}

/** A fetch Response's parts as an Exchange (read the body once, pass its text). */
export function exchangeOf(method: string, url: string, res: Response, text: string): Exchange {
  const u = new URL(url);
  return {
    method,
    url: u.pathname + u.search,
    status: res.status,
    headers: Object.fromEntries(res.headers.entries()),
    text,
  };
}

/** A body's JSON, or undefined when it is not JSON. */
export function parseJson(text: string): any {
  try {
    return text ? JSON.parse(text) : undefined;
  } catch {
    return undefined;
  }
}
