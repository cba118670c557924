import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { Type } from 'class-transformer';
import {
  ArrayMaxSize,
  ArrayMinSize,
  ArrayUnique,
  IsBoolean,
  IsIn,
  IsInt,
  IsOptional,
  IsString,
  Max,
  MaxLength,
  Min,
} from 'class-validator';
import {
  ValidateDisplayName,
  ValidateHttpUrlOrEmpty,
  ValidatePassword,
  ValidateUsername,
} from '../../common/validation.js';
import { ROLE_NAMES, type RoleName } from '../role.entity.js';

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
  /** The complete set of roles the user should have. */
  @ApiProperty({ enum: ROLE_NAMES, isArray: true, example: ['admin'] })
  @ArrayMinSize(0)
  @ArrayMaxSize(ROLE_NAMES.length)
  @ArrayUnique()
  @IsIn(ROLE_NAMES, { each: true })
  roles: RoleName[];
}

export const USER_SORT_FIELDS = ['id', 'username', 'name', 'createdAt', 'lastLoginAt'] as const;
export type UserSortField = (typeof USER_SORT_FIELDS)[number];

export class ListUsersQueryDto {
  /** Page number, from 1. */
  @ApiPropertyOptional({ minimum: 1, default: 1 })
  @IsOptional()
  @Type(() => Number)
  @IsInt()
  @Min(1)
  @Max(1_000_000)
  page: number = 1;

  /** Users per page, 1–100. */
  @ApiPropertyOptional({ minimum: 1, maximum: 100, default: 20 })
  @IsOptional()
  @Type(() => Number)
  @IsInt()
  @Min(1)
  @Max(100)
  size: number = 20;

  /** Case-insensitive substring of username or name; `%` and `_` match literally. */
  @ApiPropertyOptional({ maxLength: 128 })
  @IsOptional()
  @IsString()
  @MaxLength(128)
  search?: string;

  /** Only users having this role. */
  @ApiPropertyOptional({ enum: ROLE_NAMES })
  @IsOptional()
  @IsIn(ROLE_NAMES)
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
