import { applyDecorators } from '@nestjs/common';
import { ApiPropertyOptional } from '@nestjs/swagger';
import { Type } from 'class-transformer';
import { IsInt, IsOptional, Max, Min } from 'class-validator';

/** The largest page of a paged query or a search (docs/LISTS.md). */
export const MAX_PAGE_SIZE = 500;

/** An optional `size` query parameter: an integer from 1 to MAX_PAGE_SIZE (the route's default: 50). */
export function PageSize(): PropertyDecorator {
  return applyDecorators(
    ApiPropertyOptional({ type: 'integer', minimum: 1, maximum: MAX_PAGE_SIZE, example: 50 }),
    IsOptional(),
    Type(() => Number),
    IsInt(),
    Min(1),
    Max(MAX_PAGE_SIZE),
  );
}
