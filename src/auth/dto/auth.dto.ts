import { ApiProperty } from '@nestjs/swagger';
import { IsString, Length } from 'class-validator';
import { UserDetailDto } from '../../users/dto/user.dto.js';

export class LoginDto {
  @ApiProperty({ example: 'admin' })
  @IsString()
  @Length(1, 256)
  username: string;

  @ApiProperty({ format: 'password', writeOnly: true })
  @IsString()
  @Length(1, 1024)
  password: string;
}

export class LoginResponseDto {
  /** Session token: send it as `Authorization: Bearer <token>`; the same session is also set as an HttpOnly cookie. */
  token: string;
  /** When the session ends at the latest (it also ends after a period without use). */
  @ApiProperty({ type: String, format: 'date-time' })
  expiresAt: string;
  user: UserDetailDto;
}

/** The API key a request was made with. */
export class CurrentApiKeyInfoDto {
  @ApiProperty({ type: 'integer' })
  id: number;
  name: string;
}

/** `GET /auth/me` for a signed-in user. */
export class CurrentUserIsUserDto {
  @ApiProperty({ enum: ['user'] })
  kind: 'user';
  user: UserDetailDto;
  /** Role names of the caller. */
  roles: string[];
}

/** `GET /auth/me` for an API key. */
export class CurrentUserIsApiKeyDto {
  @ApiProperty({ enum: ['apiKey'] })
  kind: 'apiKey';
  apiKey: CurrentApiKeyInfoDto;
  /** Role names of the caller: the key's role. */
  roles: string[];
}

/** Who the caller is, told apart by `kind`. */
export type CurrentUserDto = CurrentUserIsUserDto | CurrentUserIsApiKeyDto;
