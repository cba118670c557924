import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { IsOptional, IsString, MaxLength } from 'class-validator';

export class AuthProviderDto {
  /** `password`, or the provider id used in `/auth/oidc/<id>/…`. */
  id: string;
  @ApiProperty({ enum: ['password', 'oidc'] })
  type: 'password' | 'oidc';
  /** What a login page shows on the button. */
  displayName: string;
  /** Where a browser starts signing in (`null` for password: POST /api/v1/auth/login). */
  @ApiProperty({ type: String, nullable: true, example: '/api/v1/auth/oidc/corp/login' })
  loginUrl: string | null;
}

export class OidcLoginQueryDto {
  /** A path of this service to return to after signing in (`/dashboard`); anything else means `/`. */
  @ApiPropertyOptional({ maxLength: 2048, example: '/' })
  @IsOptional()
  @IsString()
  @MaxLength(2048)
  redirect?: string;
}

/** The provider's answer (OpenID Connect authorization response), as the browser brings it back. */
export class OidcCallbackQueryDto {
  @ApiPropertyOptional({ maxLength: 4096 })
  @IsOptional()
  @IsString()
  @MaxLength(4096)
  code?: string;

  @ApiPropertyOptional({ maxLength: 1024 })
  @IsOptional()
  @IsString()
  @MaxLength(1024)
  state?: string;

  /** The issuer (RFC 9207), checked when the provider announces it sends it. */
  @ApiPropertyOptional({ maxLength: 2048 })
  @IsOptional()
  @IsString()
  @MaxLength(2048)
  iss?: string;

  /** Sent by Keycloak; not used. */
  @ApiPropertyOptional({ maxLength: 1024 })
  @IsOptional()
  @IsString()
  @MaxLength(1024)
  session_state?: string;

  @ApiPropertyOptional({ maxLength: 256 })
  @IsOptional()
  @IsString()
  @MaxLength(256)
  error?: string;

  @ApiPropertyOptional({ maxLength: 2048 })
  @IsOptional()
  @IsString()
  @MaxLength(2048)
  error_description?: string;

  @ApiPropertyOptional({ maxLength: 2048 })
  @IsOptional()
  @IsString()
  @MaxLength(2048)
  error_uri?: string;
}
