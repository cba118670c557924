import { ArgumentsHost, Catch, ExceptionFilter, HttpException, HttpStatus, Logger } from '@nestjs/common';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { STATUS_CODES } from 'node:http';

export interface ErrorBody {
  statusCode: number;
  error: string;
  message: string | string[];
  requestId: string;
}

export function errorBody(statusCode: number, message: string | string[], requestId: string): ErrorBody {
  return { statusCode, error: STATUS_CODES[statusCode] ?? 'Error', message, requestId };
}

/** Turns what a route threw into the service's error body; anything unexpected is logged and becomes a bare 500. */
export function toErrorResponse(
  exception: unknown,
  requestId: string,
  logger: Logger,
): { body: ErrorBody; headers: Record<string, string> } {
  const headers: Record<string, string> = {};
  if (exception instanceof HttpException) {
    const status = exception.getStatus();
    const response = exception.getResponse();
    let message: string | string[] = exception.message;
    if (typeof response === 'string') message = response;
    else if (response && typeof response === 'object') {
      const r = response as { message?: unknown; retryAfter?: unknown };
      if (typeof r.message === 'string' || Array.isArray(r.message)) message = r.message as string | string[];
      if (typeof r.retryAfter === 'number') headers['retry-after'] = String(r.retryAfter);
    }
    if (status >= 500) logger.error(`request ${requestId} failed: ${exception.message}`);
    return { body: errorBody(status, message, requestId), headers };
  }
  // Errors Fastify raises itself (bad JSON, body too large, unsupported media type) carry a 4xx statusCode.
  const fastifyError = exception as { statusCode?: unknown; message?: unknown; code?: unknown };
  if (typeof fastifyError?.statusCode === 'number' && fastifyError.statusCode >= 400 && fastifyError.statusCode < 500) {
    return { body: errorBody(fastifyError.statusCode, String(fastifyError.message), requestId), headers };
  }
  logger.error(
    `request ${requestId} failed unexpectedly`,
    exception instanceof Error ? exception.stack : String(exception),
  );
  return { body: errorBody(HttpStatus.INTERNAL_SERVER_ERROR, 'internal error', requestId), headers };
}

@Catch()
export class HttpErrorFilter implements ExceptionFilter {
  private readonly logger = new Logger('HttpError');

  catch(exception: unknown, host: ArgumentsHost): void {
    const http = host.switchToHttp();
    const request = http.getRequest<FastifyRequest>();
    const reply = http.getResponse<FastifyReply>();
    const { body, headers } = toErrorResponse(exception, String(request.id), this.logger);
    void reply.status(body.statusCode).headers(headers).send(body);
  }
}
