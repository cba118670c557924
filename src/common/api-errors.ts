import { applyDecorators } from '@nestjs/common';
import { ApiExtension, ApiResponse } from '@nestjs/swagger';
import { ErrorResponseDto } from './error-response.dto.js';

/** What each error status means when the service itself answers it. */
export const ERROR_DESCRIPTIONS: Record<number, string> = {
  400: 'Invalid input; `message` lists each problem, naming the field or parameter',
  401: 'No credentials, or unknown, expired or revoked ones, or a disabled user',
  403: 'The caller is not allowed to do this',
  404: 'Not found',
  406: '`Accept` names no media type the route answers in (the message names those it does), or the answer is too large to write in the one asked for',
  409: 'Conflicts with the current state',
  410: 'Gone: what was asked for no longer exists',
  413: 'Request body too large (1 MiB on admin and auth routes, 10 MiB on resource routes)',
  414: 'A path segment is too long',
  415: 'Unsupported request content type (send `application/json`)',
  422: 'The object was refused',
  429: 'Too many attempts; try again after `Retry-After` seconds',
  502: 'The cluster could not be reached or broke the connection',
  503: 'The service is shutting down; try again (another replica answers)',
  504: 'The cluster did not answer in time',
};

export type ErrorStatus = 400 | 401 | 403 | 404 | 406 | 409 | 410 | 413 | 414 | 415 | 422 | 429 | 502 | 503 | 504;

/**
 * Documents error responses of a route, all with the service's one error body
 * (`{statusCode, error, message, requestId}`). `descriptions` replaces the generic wording of a code.
 * Declaring 413/415 is optional: every route that takes a body gets them (and 400) added by
 * `completeDocument()`, as every route gets `x-request-id` and 503.
 */
export function ApiErrors(...codes: Array<ErrorStatus | Partial<Record<ErrorStatus, string>>>) {
  const descriptions: Record<number, string> = { ...ERROR_DESCRIPTIONS };
  const statuses: number[] = [];
  for (const code of codes) {
    if (typeof code === 'number') statuses.push(code);
    else
      for (const [status, text] of Object.entries(code)) {
        descriptions[Number(status)] = text;
        statuses.push(Number(status));
      }
  }
  return applyDecorators(
    ...statuses.map((status) => ApiResponse({ status, description: descriptions[status], type: ErrorResponseDto })),
  );
}

/** The extension that marks an operation whose errors may come from the cluster (see `ResourceResponses`). */
export const CLUSTER_ERRORS_EXTENSION = 'x-cas-cluster-errors';

/**
 * Marks a route that passes a cluster's answers through: each of its 4xx responses and `default` is then
 * documented as `oneOf` the service's error and the cluster's Kubernetes `Status` (`kind: "Status"`), and
 * 502/504 as the service's error. Put it on every route that streams what a cluster answers (resources,
 * watch, logs, events, metrics). `completeDocument()` does the rewriting, so the order of decorators and
 * the 401/403 that `@Authenticated()` adds do not matter.
 */
export function ResourceResponses() {
  return applyDecorators(
    ApiExtension(CLUSTER_ERRORS_EXTENSION, true),
    ApiErrors(400, 404, 409, 422),
    ApiResponse({ status: 'default', description: 'Any other error the cluster returns, with its status code' }),
    ApiErrors(502, 504),
  );
}

/** The extension `@Authenticated()`/`@Public()` leave on an operation; `completeDocument()` turns it into words of the description. */
export const ACCESS_EXTENSION = 'x-cas-access';
