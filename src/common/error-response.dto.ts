import { ApiProperty } from '@nestjs/swagger';

/** The body of every error the service itself produces (errors a cluster returns pass through unchanged). */
export class ErrorResponseDto {
  /** The HTTP status code. */
  @ApiProperty({ type: 'integer', minimum: 400, maximum: 599 })
  statusCode: number;
  /** The HTTP reason phrase. */
  error: string;
  /** What went wrong; for validation errors, one string per problem, each naming the field. */
  @ApiProperty({ oneOf: [{ type: 'string' }, { type: 'array', items: { type: 'string' } }] })
  message: string | string[];
  /** The request's id, also sent in the `x-request-id` response header. */
  requestId: string;
}

/** `{success: true}` on routes that only report that they did it. */
export class SuccessResponseDto {
  success: boolean;
}
