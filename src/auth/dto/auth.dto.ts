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

export class CurrentUserDto {
  /** `user` for a signed-in user, `apiKey` for an API key. */
  @ApiProperty({ enum: ['user', 'apiKey'] })
  kind: 'user' | 'apiKey';
  /** The user, when `kind` is `user`. */
  user?: UserDetailDto;
  /** The API key, when `kind` is `apiKey`. */
  apiKey?: { id: number; name: string };
  /** Role names of the caller. */
  roles: string[];
}
