import type { INestApplication } from '@nestjs/common';
import { DocumentBuilder, SwaggerModule, type OpenAPIObject } from '@nestjs/swagger';
import { SECURITY_SCHEMES } from './auth/auth.decorators.js';
import { SESSION_COOKIE } from './auth/session-cookie.js';

export const DOCS_PATH = 'api/docs';
export const DOCS_JSON_PATH = 'api/docs/openapi.json';

export function buildOpenApiDocument(app: INestApplication): OpenAPIObject {
  const config = new DocumentBuilder()
    .setTitle('Cluster Administration Service')
    .setDescription(
      'Users, a registry of Kubernetes clusters, and generic access to the resources of the cluster named in `x-cluster-name`.',
    )
    .setVersion('1')
    .addApiKey(
      { type: 'apiKey', in: 'header', name: 'Authorization', description: 'An API key as the whole header value' },
      SECURITY_SCHEMES.apiKey,
    )
    .addBearerAuth(
      { type: 'http', scheme: 'bearer', description: 'A session token from login, or an API key' },
      SECURITY_SCHEMES.bearer,
    )
    .addCookieAuth(SESSION_COOKIE, { type: 'apiKey', in: 'cookie', name: SESSION_COOKIE }, SECURITY_SCHEMES.cookie)
    .build();
  return SwaggerModule.createDocument(app, config, { operationIdFactory: (_controller, method) => method });
}

export function setupSwagger(app: INestApplication): OpenAPIObject {
  const document = buildOpenApiDocument(app);
  SwaggerModule.setup(DOCS_PATH, app, document, {
    jsonDocumentUrl: DOCS_JSON_PATH,
    yamlDocumentUrl: 'api/docs/openapi.yaml',
    customSiteTitle: 'Cluster Administration Service',
  });
  return document;
}
