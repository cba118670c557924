import { ApiProperty } from '@nestjs/swagger';

export class RoleDto {
  @ApiProperty({ type: 'integer' })
  id: number;
  /** `admin`, `viewer`, or a custom role's name. */
  @ApiProperty({ example: 'viewer' })
  name: string;
  description?: string;
}

export class UserDto {
  @ApiProperty({ type: 'integer' })
  id: number;
  @ApiProperty({ example: 'alice' })
  username: string;
  /** The sign-in provider; `password` for password users. */
  @ApiProperty({ example: 'password' })
  provider: string;
  /** Display name. */
  @ApiProperty({ example: 'Alice Example' })
  name: string;
  /** Whether the user may sign in and use the service. */
  @ApiProperty()
  enabled: boolean;
  /** Time of the last successful login (ISO 8601 UTC), or null before the first. */
  @ApiProperty({ type: String, format: 'date-time', nullable: true })
  lastLoginAt: string | null;
  @ApiProperty({ type: [RoleDto] })
  roles: RoleDto[];
  @ApiProperty({ type: String, format: 'date-time' })
  createdAt: string;
}

/** A single user, with the fields the list leaves out. */
export class UserDetailDto extends UserDto {
  /** Avatar image URL, or null. */
  @ApiProperty({ type: String, nullable: true, example: 'https://example.com/alice.png' })
  avatar_url: string | null;
}

export class UserListDto {
  users: UserDto[];
  /** How many users match the filters, over all pages. */
  @ApiProperty({ type: 'integer', minimum: 0 })
  total: number;
  @ApiProperty({ type: 'integer', minimum: 1 })
  page: number;
  @ApiProperty({ type: 'integer', minimum: 1, maximum: 100 })
  size: number;
}
