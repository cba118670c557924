import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import {
  ArrayMaxSize,
  ArrayMinSize,
  ArrayUnique,
  IsArray,
  IsBoolean,
  IsIn,
  IsOptional,
  IsString,
  MaxLength,
  Matches,
} from 'class-validator';
import {
  ValidateDisplayName,
  ValidateHttpUrlOrEmpty,
  ValidatePage,
  ValidatePageSize,
  ValidatePassword,
  ValidateUsername,
} from '../../common/validation.js';
import { ROLE_NAME_PATTERN, type RoleName } from '../role.entity.js';

export class CreateUserDto {
  @ValidateUsername()
  username: string;

  @ValidatePassword()
  password: string;

  /** Display name; defaults to the username. */
  @ValidateDisplayName({ optional: true })
  name?: string;
}

export class UpdateUserDto {
  @ValidateDisplayName({ optional: true })
  name?: string;

  /** An http(s) URL of at most 2048 characters, or `""` to clear it. */
  @ValidateHttpUrlOrEmpty({ maxLength: 2048, example: 'https://example.com/me.png' })
  avatar_url?: string;
}

export class ResetPasswordDto {
  @ValidatePassword()
  password: string;
}

export class SetUserEnabledDto {
  @ApiProperty()
  @IsBoolean()
  enabled: boolean;
}

export class SetUserRolesDto {
  /** The complete set of roles the user should have, by name: `admin`, `viewer` or custom roles. */
  @ApiProperty({ type: [String], maxItems: 32, uniqueItems: true, example: ['viewer', 'shop-dev'] })
  @IsArray()
  @ArrayMinSize(0)
  @ArrayMaxSize(32)
  @ArrayUnique()
  @IsString({ each: true })
  @MaxLength(32, { each: true })
  @Matches(ROLE_NAME_PATTERN, { each: true, message: 'each of roles must be a role name' })
  roles: RoleName[];
}

export const USER_SORT_FIELDS = ['id', 'username', 'name', 'createdAt', 'lastLoginAt'] as const;
export type UserSortField = (typeof USER_SORT_FIELDS)[number];

export class ListUsersQueryDto {
  /** Page number, from 1. */
  @ValidatePage()
  page: number = 1;

  /** Users per page, 1–100. */
  @ValidatePageSize()
  size: number = 20;

  /** Case-insensitive substring of username or name; `%` and `_` match literally. */
  @ApiPropertyOptional({ maxLength: 128 })
  @IsOptional()
  @IsString()
  @MaxLength(128)
  search?: string;

  /** Only users having this role (a role name). */
  @ApiPropertyOptional({ maxLength: 32, pattern: ROLE_NAME_PATTERN.source })
  @IsOptional()
  @IsString()
  @MaxLength(32)
  @Matches(ROLE_NAME_PATTERN, { message: 'role must be a role name' })
  role?: RoleName;

  @ApiPropertyOptional({ enum: USER_SORT_FIELDS, default: 'id' })
  @IsOptional()
  @IsIn(USER_SORT_FIELDS)
  sortBy: UserSortField = 'id';

  /** Users who never logged in sort last on `lastLoginAt`, in either order. */
  @ApiPropertyOptional({ enum: ['asc', 'desc'], default: 'desc' })
  @IsOptional()
  @IsIn(['asc', 'desc'])
  sortOrder: 'asc' | 'desc' = 'desc';
}
