import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import {
  ArrayMaxSize,
  ArrayMinSize,
  ArrayUnique,
  IsArray,
  IsDateString,
  IsOptional,
  IsString,
  Length,
  Matches,
  MaxLength,
} from 'class-validator';
import { ROLE_NAME_PATTERN } from '../../users/role.entity.js';

const ROLE_NAME_MESSAGE = 'must be a role name (1–32 lower-case letters, digits, dots, underscores or hyphens)';

export class CreateApiKeyDto {
  /** A unique name (ignoring case), 1–100 characters. */
  @ApiProperty({ minLength: 1, maxLength: 100, example: 'ci-deployer' })
  @IsString()
  @Length(1, 100)
  @Matches(/^[\x21-\x7e]([\x20-\x7e]*[\x21-\x7e])?$/, {
    message: 'name must be printable ASCII without leading or trailing spaces',
  })
  name: string;

  /** One role (the form older clients send); send this or `roles`, not both. */
  @ApiPropertyOptional({ maxLength: 32, pattern: ROLE_NAME_PATTERN.source, example: 'viewer' })
  @IsOptional()
  @IsString()
  @MaxLength(32)
  @Matches(ROLE_NAME_PATTERN, { message: `role ${ROLE_NAME_MESSAGE}` })
  role?: string;

  /**
   * The key's roles (1–32), each one its creator holds (an admin holds every role). The key acts with
   * those of them its owner still holds. Send this or `role`, not both.
   */
  @ApiPropertyOptional({ type: [String], minItems: 1, maxItems: 32, uniqueItems: true, example: ['viewer'] })
  @IsOptional()
  @IsArray()
  @ArrayMinSize(1)
  @ArrayMaxSize(32)
  @ArrayUnique()
  @IsString({ each: true })
  @MaxLength(32, { each: true })
  @Matches(ROLE_NAME_PATTERN, { each: true, message: `each of roles ${ROLE_NAME_MESSAGE}` })
  roles?: string[];

  /** When the key stops working (ISO 8601, in the future); none means it does not expire. */
  @ApiPropertyOptional({ type: String, format: 'date-time' })
  @IsOptional()
  @IsDateString({ strict: true })
  expiresAt?: string;
}

export class ApiKeyOwnerDto {
  @ApiProperty({ type: 'integer' })
  id: number;
  username: string;
}

export class ApiKeyDto {
  @ApiProperty({ type: 'integer' })
  id: number;
  name: string;
  /** The first of `roles` (kept for older clients): `admin`, else `viewer`, else the first custom role by name. */
  role: string;
  /** The key's roles. It acts with those its owner currently holds (an admin holds every role). */
  roles: string[];
  /** The user the key belongs to: disabling or deleting them stops the key at once. */
  owner: ApiKeyOwnerDto;
  /** The key's first characters, to tell keys apart. */
  prefix: string;
  @ApiProperty({ type: String, format: 'date-time' })
  createdAt: string;
  /** Username of the creator, or `apikey:<name>` when created with another key. */
  @ApiProperty({ type: String, nullable: true })
  createdBy: string | null;
  @ApiProperty({ type: String, format: 'date-time', nullable: true })
  lastUsedAt: string | null;
  @ApiProperty({ type: String, format: 'date-time', nullable: true })
  expiresAt: string | null;
}

export class CreatedApiKeyDto extends ApiKeyDto {
  /** The key itself, shown only in this response: send it as `Authorization: <key>` or `Authorization: Bearer <key>`. */
  key: string;
}
