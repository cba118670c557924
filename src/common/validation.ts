import { applyDecorators } from '@nestjs/common';
import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { Type } from 'class-transformer';
import {
  IsInt,
  IsOptional,
  IsString,
  Length,
  Matches,
  Max,
  MaxLength,
  Min,
  MinLength,
  ValidateBy,
} from 'class-validator';

export const USERNAME_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._@-]*$/;

/** A username: 3–64 characters, letters, digits and `._@-`, starting with a letter or digit. */
export function ValidateUsername() {
  return applyDecorators(
    ApiProperty({ minLength: 3, maxLength: 64, pattern: USERNAME_PATTERN.source, example: 'alice' }),
    IsString(),
    Length(3, 64),
    Matches(USERNAME_PATTERN, {
      message: 'username may contain only letters, digits and . _ @ - and must start with a letter or digit',
    }),
  );
}

/** A password: 8–1024 characters (and not equal to the username; the service checks that). */
export function ValidatePassword() {
  return applyDecorators(
    ApiProperty({ minLength: 8, maxLength: 1024, format: 'password', writeOnly: true }),
    IsString(),
    MinLength(8),
    MaxLength(1024),
  );
}

/** A person's display name, 1–128 characters. */
export function ValidateDisplayName(options: { optional?: boolean } = {}) {
  const decorators = [IsString(), Length(1, 128)];
  if (options.optional) {
    return applyDecorators(ApiPropertyOptional({ minLength: 1, maxLength: 128 }), IsOptional(), ...decorators);
  }
  return applyDecorators(ApiProperty({ minLength: 1, maxLength: 128 }), ...decorators);
}

/**
 * Whether a value is an http(s) URL of at most `maxLength` characters. The length is checked
 * first and the URL is read by the WHATWG parser: no regular expression, so no input can make it
 * backtrack (a 100,000-character value costs what reading it costs).
 */
export function isHttpUrl(value: unknown, maxLength: number): boolean {
  if (typeof value !== 'string' || value.length > maxLength) return false;
  if (!/^https?:\/\//i.test(value) || /\s/.test(value)) return false;
  try {
    const url = new URL(value);
    return (url.protocol === 'http:' || url.protocol === 'https:') && url.hostname !== '';
  } catch {
    return false;
  }
}

/** An optional http(s) URL of at most `maxLength` characters, or `""` (which clears it). */
export function ValidateHttpUrlOrEmpty(options: { maxLength: number; example: string }) {
  return applyDecorators(
    // The pattern only documents the scheme for clients (a prefix: no backtracking); the service checks
    // the length first and then parses the URL (WHATWG URL), never with a regular expression.
    ApiPropertyOptional({
      maxLength: options.maxLength,
      pattern: '^$|^[Hh][Tt][Tt][Pp][Ss]?://',
      example: options.example,
    }),
    IsOptional(),
    ValidateBy({
      name: 'isHttpUrlOrEmpty',
      validator: {
        validate: (value: unknown) => value === '' || isHttpUrl(value, options.maxLength),
        defaultMessage: (args) =>
          `${args?.property} must be an http(s) URL of at most ${options.maxLength} characters, or ""`,
      },
    }),
  );
}

/** A paged list's `page` query parameter: an integer from 1 (default 1). */
export function ValidatePage() {
  return applyDecorators(
    ApiPropertyOptional({ type: 'integer', minimum: 1, maximum: 1_000_000, default: 1 }),
    IsOptional(),
    Type(() => Number),
    IsInt(),
    Min(1),
    Max(1_000_000),
  );
}

/** A paged list's `size` query parameter: 1–100 items a page (default 20). */
export function ValidatePageSize() {
  return applyDecorators(
    ApiPropertyOptional({ type: 'integer', minimum: 1, maximum: 100, default: 20 }),
    IsOptional(),
    Type(() => Number),
    IsInt(),
    Min(1),
    Max(100),
  );
}
