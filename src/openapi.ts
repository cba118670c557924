import type { INestApplication } from '@nestjs/common';
import {
  DocumentBuilder,
  SwaggerModule,
  type OpenAPIObject,
  type OperationObject,
  type ParameterObject,
  type ResponseObject,
  type SchemaObject,
} from '@nestjs/swagger';
import { ACCESS_EXTENSION, CLUSTER_ERRORS_EXTENSION, ERROR_DESCRIPTIONS } from './common/api-errors.js';
import { SECURITY_SCHEMES } from './auth/auth.decorators.js';
import { SESSION_COOKIE } from './auth/session-cookie.js';
import { KUBERNETES_SCHEMAS, kubernetesRef } from './resources/dto/kubernetes-schemas.js';
import {
  CLUSTER_STATUS_EXAMPLE,
  errorExample,
  EXAMPLE_CLUSTER,
  PARAMETER_EXAMPLES,
  PATCH_CONTENT_TYPES,
  type PatchContentType,
  REQUEST_EXAMPLES,
  REQUEST_ARCHIVE_EXAMPLE,
  REQUEST_YAML_EXAMPLES,
  RESPONSE_EXAMPLES,
} from './openapi-examples.js';

export const DOCS_PATH = 'api/docs';
export const DOCS_JSON_PATH = 'api/docs/openapi.json';

/** Every tag an operation uses, with what it groups (a test fails on an operation whose tag is not here). */
export const API_TAGS: Array<{ name: string; description: string }> = [
  { name: 'Auth', description: 'Sign in and out, and who the caller is.' },
  { name: 'Users', description: 'User accounts, roles and the first (super) user.' },
  {
    name: 'API keys',
    description:
      'Long-lived credentials for programs; a key acts with the roles it was given that its owner still holds.',
  },
  { name: 'Clusters', description: 'The registry of Kubernetes clusters the service talks to.' },
  {
    name: 'Resources',
    description:
      'Generic access to any resource of the cluster named in `x-cluster-name`; the cluster answers, the service passes it through.',
  },
  {
    name: 'Apply',
    description:
      'Server-side apply of one or many documents (YAML or JSON), with a diff per object, conflicts, and dry run; Secret values never shown.',
  },
  {
    name: 'Helm',
    description:
      'Helm releases read from Helm’s own storage (list, a revision, history, diff) and written by the real Helm CLI as the caller (install, upgrade, roll back, uninstall); rules name `helmreleases`.',
  },
  { name: 'Roles', description: 'Built-in and custom roles: rules of clusters, namespaces, resources and verbs.' },
  {
    name: 'Metrics',
    description: "Queries of each cluster's Prometheus (its `metricsURL`), and CPU and memory of pods and nodes.",
  },
  { name: 'Audit', description: 'Who changed what, and who was refused: the audit log.' },
  { name: 'Health', description: 'Liveness and readiness probes.' },
  {
    name: 'Terminal',
    description:
      'Exec, attach and port-forward in a pod over WebSocket (the Kubernetes channel protocols), as the caller, audited and optionally recorded.',
  },
  {
    name: 'Kubernetes API',
    description:
      "Each cluster's own Kubernetes API under the service's users, roles and audit: what kubectl, client-go and @kubernetes/client-node use with a kubeconfig from `POST /api/v1/auth/kubeconfig`.",
  },
];

const SECURITY_PRECEDENCE =
  'When a request carries several credentials, the `Authorization` header wins and the cookie is ignored.';

export function buildOpenApiDocument(app: INestApplication): OpenAPIObject {
  const builder = new DocumentBuilder()
    .setTitle('Cluster Administration Service')
    .setDescription(
      'Users, a registry of Kubernetes clusters, and generic access to the resources of the cluster named in `x-cluster-name`.\n\n' +
        `Credentials: an API key (\`cas_key_…\`) or a session token from login (\`cas_sess_…\`) in \`Authorization\`, or the session cookie (not on the Kubernetes API path, which takes \`Authorization\` only). ${SECURITY_PRECEDENCE}\n\n` +
        'Errors the service produces have one shape, `{statusCode, error, message, requestId}`; on resource routes the cluster may answer instead, with its Kubernetes `Status` (`kind: "Status"`). Every response carries `x-request-id`.',
    )
    .setVersion('1')
    .addServer('/', 'This service (paths carry their /api/v1 prefix)')
    .addApiKey(
      {
        type: 'apiKey',
        in: 'header',
        name: 'Authorization',
        description: `An API key as the whole header value: \`Authorization: cas_key_…\`. ${SECURITY_PRECEDENCE}`,
      },
      SECURITY_SCHEMES.apiKey,
    )
    .addBearerAuth(
      {
        type: 'http',
        scheme: 'bearer',
        description: `An opaque token: a session token from login (\`cas_sess_…\`) or an API key (\`cas_key_…\`). ${SECURITY_PRECEDENCE}`,
      },
      SECURITY_SCHEMES.bearer,
    )
    .addCookieAuth(
      SESSION_COOKIE,
      {
        type: 'apiKey',
        in: 'cookie',
        name: SESSION_COOKIE,
        description: `The HttpOnly session cookie login sets (over https named \`__Host-cas_session\`, which is read too). Used only when the request has no \`Authorization\` header, and never on the Kubernetes API path (\`/api/v1/clusters/{name}/k8s/…\`).`,
      },
      SECURITY_SCHEMES.cookie,
    );
  for (const tag of API_TAGS) builder.addTag(tag.name, tag.description);
  const document = SwaggerModule.createDocument(app, builder.build(), {
    operationIdFactory: (_controller, method) => method,
  });
  return completeDocument(document);
}

const METHODS = ['get', 'put', 'post', 'delete', 'patch', 'options', 'head', 'trace'] as const;
const BODY_METHODS = new Set(['post', 'put', 'patch', 'delete']);
const ERROR_REF = '#/components/schemas/ErrorResponseDto';

function jsonContent(schema: SchemaObject | { $ref: string }) {
  return { 'application/json': { schema } };
}

/**
 * What holds for every route, declared once here so that every route, including those added later,
 * joins the contract: `x-request-id` on every response, `Retry-After` on 429, 400 (an unknown query
 * parameter is refused everywhere), 413/415 wherever a body is parsed, 503 while shutting down, `security: []` on public routes, a description that says
 * who may call, the Kubernetes schemas, and the error unions of routes marked by `@ResourceResponses()`.
 */
export function completeDocument(document: OpenAPIObject): OpenAPIObject {
  const components = (document.components ??= {});
  components.schemas = { ...components.schemas, ...KUBERNETES_SCHEMAS };
  components.headers = {
    ...components.headers,
    RequestId: {
      description: "The request's id: a well-formed incoming `x-request-id` is echoed, otherwise one is generated.",
      required: true,
      schema: { type: 'string' },
    },
    RetryAfter: {
      description: 'Seconds to wait before trying again.',
      required: true,
      schema: { type: 'integer', minimum: 0 },
    },
  };
  const bearer = components.securitySchemes?.[SECURITY_SCHEMES.bearer] as { bearerFormat?: string } | undefined;
  if (bearer) delete bearer.bearerFormat; // the tokens are opaque, not JWTs

  const serviceError = { $ref: ERROR_REF };
  const clusterOrServiceError = {
    oneOf: [serviceError, { $ref: '#/components/schemas/KubernetesStatus' }],
  };
  for (const item of Object.values(document.paths)) {
    for (const method of METHODS) {
      const op = item[method] as (OperationObject & Record<string, unknown>) | undefined;
      if (!op) continue;
      const responses = op.responses as Record<string, ResponseObject>;
      const addError = (code: number) => {
        const declared = responses[code]?.content?.['application/json']?.schema;
        if (!responses[code]) {
          responses[code] = { description: ERROR_DESCRIPTIONS[code], content: jsonContent(serviceError) };
        } else if (declared && (declared as { $ref?: string }).$ref !== ERROR_REF && code === 503) {
          // A route with its own 503 (readiness) still gets the service's error while shutting down.
          responses[code].content = jsonContent({ anyOf: [declared, serviceError] });
          responses[code].description += `\n\nOr: ${ERROR_DESCRIPTIONS[code]}`;
        }
      };
      // Every route refuses a query parameter it does not take (400 naming it), body or not.
      addError(400);
      if (BODY_METHODS.has(method)) [413, 415].forEach(addError);
      if (op.parameters?.some((p) => 'in' in p && p.in === 'path')) addError(414);
      addError(503);

      op.security ??= [];
      const access = op[ACCESS_EXTENSION];
      delete op[ACCESS_EXTENSION];
      if (typeof access === 'string') {
        op.description = [op.description || op.summary, access].filter(Boolean).join('\n\n');
      }
      // Swagger UI shows the summary as plain text beside the path (only descriptions are Markdown).
      if (op.summary) op.summary = plainSummary(op.summary);

      if (op[CLUSTER_ERRORS_EXTENSION]) {
        delete op[CLUSTER_ERRORS_EXTENSION];
        for (const [code, response] of Object.entries(responses)) {
          if (/^4\d\d$/.test(code) || code === 'default') {
            response.description = `${response.description} (from the service: its error; from the cluster: its \`Status\`)`;
            response.content = jsonContent(clusterOrServiceError);
          }
        }
      }

      addExamples(method, op);

      for (const [code, response] of Object.entries(responses)) {
        response.headers = { 'x-request-id': { $ref: '#/components/headers/RequestId' }, ...response.headers };
        if (code === '429') response.headers['Retry-After'] = { $ref: '#/components/headers/RetryAfter' };
      }
    }
  }
  return document;
}

/** The first sentence of a doc comment (a period outside parentheses), without Markdown, on one line. */
function plainSummary(text: string): string {
  const oneLine = text.replace(/`/g, '').replace(/\s+/g, ' ').trim();
  let depth = 0;
  for (let i = 0; i < oneLine.length; i++) {
    const c = oneLine[i];
    if (c === '(') depth++;
    else if (c === ')') depth = Math.max(0, depth - 1);
    else if (c === '.' && depth === 0 && oneLine[i + 1] === ' ') return oneLine.slice(0, i + 1);
  }
  return oneLine;
}

/** A JSON merge patch or strategic merge patch: an object whose properties replace or merge into the object's. */
const MERGE_PATCH = { type: 'object', additionalProperties: true, description: 'Properties to merge into the object' };
/** The schema of a Kubernetes patch under each of its content types. */
const PATCH_SCHEMAS: Record<PatchContentType, SchemaObject | { $ref: string }> = {
  'application/strategic-merge-patch+json': {
    ...MERGE_PATCH,
    description: 'A strategic merge patch (built-in types only)',
  },
  'application/merge-patch+json': { ...MERGE_PATCH, description: 'A JSON merge patch (RFC 7386)' },
  'application/json-patch+json': {
    type: 'array',
    items: kubernetesRef('JsonPatchOperation'),
    description: 'A JSON patch (RFC 6902): operations applied in order',
  },
  'application/apply-patch+yaml': {
    ...MERGE_PATCH,
    description:
      'Server-side apply: the object as you want it (YAML, or JSON, which is YAML), with apiVersion, kind and metadata.name',
  },
  'application/json': {
    oneOf: [
      { ...MERGE_PATCH, description: 'A strategic merge patch, or a JSON merge patch with `patchType=merge`' },
      { type: 'array', items: kubernetesRef('JsonPatchOperation'), description: 'A JSON patch, with `patchType=json`' },
    ],
  },
};

const ERROR_SCHEMA_KEYS = ['oneOf', 'anyOf'] as const;
function isServiceError(schema: unknown): boolean {
  const s = schema as { $ref?: string; oneOf?: unknown[]; anyOf?: unknown[] } | undefined;
  if (!s) return false;
  return s.$ref === ERROR_REF || ERROR_SCHEMA_KEYS.some((key) => s[key]?.some((item) => isServiceError(item)));
}

/**
 * Request examples (REQUEST_EXAMPLES, tested by sending each of them), examples of resource answers, error
 * examples with their real status, and each Kubernetes patch content type on PATCH routes (every PATCH route
 * of the service is a Kubernetes patch, and the service parses each of these types as JSON).
 */
function addExamples(method: string, op: OperationObject): void {
  const operationId = op.operationId ?? '';
  const example = REQUEST_EXAMPLES[operationId];
  const body = op.requestBody as { content?: Record<string, { schema?: unknown; example?: unknown }> } | undefined;
  if (method === 'patch' && body?.content) {
    const examples = (example ?? {}) as Partial<Record<PatchContentType, unknown>>;
    body.content = Object.fromEntries(
      (Object.keys(PATCH_CONTENT_TYPES) as PatchContentType[]).map((type) => [
        type,
        { schema: PATCH_SCHEMAS[type], ...(examples[type] === undefined ? {} : { example: examples[type] }) },
      ]),
    );
  } else if (example !== undefined && body?.content?.['application/json']) {
    body.content['application/json'].example = example;
  }
  if (body?.content?.['application/gzip']) body.content['application/gzip'].example = REQUEST_ARCHIVE_EXAMPLE;
  const yamlExample = REQUEST_YAML_EXAMPLES[operationId];
  if (yamlExample !== undefined && body?.content?.['application/yaml'])
    body.content['application/yaml'].example = yamlExample;
  const parameters = PARAMETER_EXAMPLES[operationId] ?? {};
  for (const parameter of op.parameters ?? []) {
    if (!('name' in parameter)) continue;
    if (parameters[parameter.name] !== undefined) parameter.example = parameters[parameter.name];
    else if (parameter.in === 'header' && parameter.name === 'x-cluster-name') parameter.example ??= EXAMPLE_CLUSTER;
    exampleAsHint(parameter);
  }
  for (const [code, response] of Object.entries(op.responses as Record<string, ResponseObject>)) {
    const media = response.content?.['application/json'];
    if (media && /^2/.test(code) && RESPONSE_EXAMPLES[operationId] !== undefined) {
      media.example = RESPONSE_EXAMPLES[operationId];
      continue;
    }
    if (!media || media.example !== undefined || !isServiceError(media.schema)) continue;
    const errorBody = code === 'default' ? CLUSTER_STATUS_EXAMPLE : errorExample(Number(code));
    if (errorBody) media.example = errorBody;
  }
}

/**
 * A parameter's example becomes a hint, never a value: Swagger UI's "Try it out" fills each parameter with
 * its `example` (or its schema's) and sends it, so `x-cluster-name: production` answered 404 and `search=web`
 * an empty page. `x-example` keeps it for readers and the tests that send the examples; the description
 * says it, and the field stays empty with the parameter's name as placeholder.
 */
function exampleAsHint(parameter: ParameterObject): void {
  const schema = parameter.schema as SchemaObject | undefined;
  const example: unknown = parameter.example ?? schema?.example;
  delete parameter.example;
  if (schema && 'example' in schema) delete schema.example;
  if (example === undefined) return;
  (parameter as ParameterObject & { 'x-example': unknown })['x-example'] = example;
  const shown = Array.isArray(example) ? example.join(', ') : String(example);
  const description = parameter.description?.trim() ?? '';
  parameter.description = `${description}${description && !/[.!?]$/.test(description) ? '. ' : description ? ' ' : ''}Example: \`${shown}\``;
}

export function setupSwagger(app: INestApplication): OpenAPIObject {
  const document = buildOpenApiDocument(app);
  SwaggerModule.setup(DOCS_PATH, app, document, {
    jsonDocumentUrl: DOCS_JSON_PATH,
    yamlDocumentUrl: 'api/docs/openapi.yaml',
    customSiteTitle: 'Cluster Administration Service',
    // Swagger UI would otherwise send the document's address to validator.swagger.io for a badge.
    // persistAuthorization keeps what was entered in "Authorize" across a reload of the page.
    swaggerOptions: { validatorUrl: null, persistAuthorization: true },
  });
  return document;
}
