import { applyDecorators } from '@nestjs/common';
import { ApiBadRequestResponse, ApiConflictResponse, ApiNotFoundResponse, ApiResponse } from '@nestjs/swagger';
import { ErrorResponseDto } from './error-response.dto.js';

/** Documents the service's error responses a route can give, all with the one error body. */
export function ApiErrors(...codes: Array<400 | 404 | 409 | 413 | 429>) {
  const descriptions: Record<number, string> = {
    400: 'Invalid input; `message` lists each problem',
    404: 'Not found',
    409: 'Conflicts with the current state',
    413: 'Request body too large',
    429: 'Too many attempts; see Retry-After',
  };
  return applyDecorators(
    ...codes.map((code) => {
      const options = { description: descriptions[code], type: ErrorResponseDto };
      if (code === 400) return ApiBadRequestResponse(options);
      if (code === 404) return ApiNotFoundResponse(options);
      if (code === 409) return ApiConflictResponse(options);
      return ApiResponse({ status: code, ...options });
    }),
  );
}
