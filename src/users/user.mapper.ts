import type { UserEntity } from './user.entity.js';
import type { UserDetailDto, UserDto } from './dto/user.dto.js';

export function toUserResponse(user: UserEntity): UserDto {
  return {
    id: user.id,
    username: user.username,
    provider: user.provider,
    name: user.name,
    enabled: user.enabled,
    lastLoginAt: user.lastLoginAt ? user.lastLoginAt.toISOString() : null,
    roles: [...(user.roles ?? [])].sort((a, b) => a.id - b.id).map((r) => ({ id: r.id, name: r.name })),
    createdAt: user.createdAt.toISOString(),
  };
}

export function toUserDetailResponse(user: UserEntity): UserDetailDto {
  return { ...toUserResponse(user), avatar_url: user.avatarUrl ?? null };
}
