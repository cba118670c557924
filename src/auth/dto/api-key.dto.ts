import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { IsDateString, IsIn, IsOptional, IsString, Length, Matches } from 'class-validator';
import { ROLE_NAMES, type RoleName } from '../../users/role.entity.js';

export class CreateApiKeyDto {
  /** A unique name (ignoring case), 1–100 characters. */
  @ApiProperty({ minLength: 1, maxLength: 100, example: 'ci-deployer' })
  @IsString()
  @Length(1, 100)
  @Matches(/^[\x21-\x7e]([\x20-\x7e]*[\x21-\x7e])?$/, {
    message: 'name must be printable ASCII without leading or trailing spaces',
  })
  name: string;

  @ApiProperty({ enum: ROLE_NAMES })
  @IsIn(ROLE_NAMES)
  role: RoleName;

  /** When the key stops working (ISO 8601, in the future); none means it does not expire. */
  @ApiPropertyOptional({ type: String, format: 'date-time' })
  @IsOptional()
  @IsDateString({ strict: true })
  expiresAt?: string;
}

export class ApiKeyDto {
  @ApiProperty({ type: 'integer' })
  id: number;
  name: string;
  @ApiProperty({ enum: ROLE_NAMES })
  role: string;
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
