import { applyDecorators, BadRequestException, Injectable, PipeTransform } from '@nestjs/common';
import { ApiParam } from '@nestjs/swagger';

/** Parses an `:id` path parameter: a positive integer that fits a database integer. */
@Injectable()
export class ParseIdPipe implements PipeTransform<string | number, number> {
  // The global ValidationPipe may already have turned the segment into a number (NaN for 'abc').
  transform(value: string | number): number {
    const text = String(value);
    if (!/^[1-9]\d{0,9}$/.test(text) || Number(text) > 2_147_483_647) {
      throw new BadRequestException([`id must be a positive integer, got '${text.slice(0, 40)}'`]);
    }
    return Number(text);
  }
}

/** Documents the `:id` path parameter that `ParseIdPipe` accepts: put it on every route with `@Param('id', ParseIdPipe)`. */
export function ApiIdParam(description = 'The id') {
  return applyDecorators(
    ApiParam({ name: 'id', description, schema: { type: 'integer', minimum: 1, maximum: 2_147_483_647 } }),
  );
}
