import { type ArgumentsHost, Catch, type ExceptionFilter, HttpException, Logger } from '@nestjs/common';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { toErrorResponse } from '../common/filters/http-exception.filter.js';

/** The apiserver's StatusReason for each code the service answers with itself (kubectl prints it in parentheses). */
const REASONS: Record<number, string> = {
  400: 'BadRequest',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'NotFound',
  405: 'MethodNotAllowed',
  406: 'NotAcceptable',
  409: 'Conflict',
  413: 'RequestEntityTooLarge',
  415: 'UnsupportedMediaType',
  422: 'Invalid',
  429: 'TooManyRequests',
  500: 'InternalError',
  502: 'ServiceUnavailable',
  503: 'ServiceUnavailable',
  504: 'Timeout',
};

/** What a Status may say about the object a refused request named. */
export interface StatusDetails {
  name?: string;
  group?: string;
  kind?: string;
}

/** A Kubernetes `Status` (meta/v1) of a failure: how the apiserver itself answers one, so clients read it as one. */
export function kubeStatus(code: number, message: string, details?: StatusDetails) {
  return {
    kind: 'Status',
    apiVersion: 'v1',
    metadata: {},
    status: 'Failure',
    message,
    reason: REASONS[code] ?? (code >= 500 ? 'InternalError' : 'BadRequest'),
    ...(details && Object.keys(details).length ? { details } : {}),
    code,
  };
}

/** An error of the Kubernetes path that carries the Status details of the object the request named. */
export class KubeStatusException extends HttpException {
  constructor(
    code: number,
    message: string,
    readonly details?: StatusDetails,
  ) {
    super(message, code);
  }
}

/**
 * Every error on the Kubernetes path (the guard's refusals, the service's own, anything unexpected)
 * leaves as a `Status`, so kubectl prints `Error from server (Forbidden): …` with the service's words.
 */
@Catch()
export class KubeStatusFilter implements ExceptionFilter {
  private readonly logger = new Logger('KubernetesApi');

  catch(exception: unknown, host: ArgumentsHost): void {
    const http = host.switchToHttp();
    const request = http.getRequest<FastifyRequest>();
    const reply = http.getResponse<FastifyReply>();
    const { body, headers } = toErrorResponse(exception, String(request.id), this.logger);
    const message = Array.isArray(body.message) ? body.message.join('; ') : body.message;
    const details = exception instanceof KubeStatusException ? exception.details : undefined;
    if (reply.sent) return;
    void reply
      .status(body.statusCode)
      .headers(headers)
      .header('content-type', 'application/json')
      .send(JSON.stringify(kubeStatus(body.statusCode, message, details)));
  }
}
