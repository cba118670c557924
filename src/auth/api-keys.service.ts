import { BadRequestException, ConflictException, Injectable, NotFoundException } from '@nestjs/common';
import { InjectRepository } from '@nestjs/typeorm';
import { Repository } from 'typeorm';
import { isUniqueViolation } from '../database/transactions.js';
import { RoleEntity } from '../users/role.entity.js';
import { ApiKeyEntity } from './api-key.entity.js';
import { type Caller, describeCaller } from './caller.js';
import type { ApiKeyDto, CreateApiKeyDto, CreatedApiKeyDto } from './dto/api-key.dto.js';
import { API_KEY_DISPLAY_LENGTH, API_KEY_PREFIX, generateSecret, sha256Hex } from './tokens.js';

export function toApiKeyResponse(key: ApiKeyEntity): ApiKeyDto {
  return {
    id: key.id,
    name: key.name,
    role: key.role.name,
    prefix: key.prefix,
    createdAt: key.createdAt.toISOString(),
    createdBy: key.createdBy,
    lastUsedAt: key.lastUsedAt?.toISOString() ?? null,
    expiresAt: key.expiresAt?.toISOString() ?? null,
  };
}

@Injectable()
export class ApiKeysService {
  constructor(
    @InjectRepository(ApiKeyEntity) private readonly keys: Repository<ApiKeyEntity>,
    @InjectRepository(RoleEntity) private readonly roles: Repository<RoleEntity>,
  ) {}

  async listApiKeys(): Promise<ApiKeyDto[]> {
    return (await this.keys.find({ order: { id: 'ASC' } })).map(toApiKeyResponse);
  }

  async createApiKey(dto: CreateApiKeyDto, caller: Caller): Promise<CreatedApiKeyDto> {
    const expiresAt = dto.expiresAt ? new Date(dto.expiresAt) : null;
    if (expiresAt && expiresAt.getTime() <= Date.now())
      throw new BadRequestException(['expiresAt must be in the future']);
    const role = await this.roles.findOneByOrFail({ name: dto.role });
    const key = generateSecret(API_KEY_PREFIX);
    const entity = this.keys.create({
      name: dto.name,
      nameKey: dto.name.toLowerCase(),
      roleId: role.id,
      role,
      prefix: key.slice(0, API_KEY_DISPLAY_LENGTH),
      keyHash: sha256Hex(key),
      createdBy: describeCaller(caller),
      lastUsedAt: null,
      expiresAt,
    });
    try {
      await this.keys.save(entity);
    } catch (error) {
      if (isUniqueViolation(error)) throw new ConflictException(`an API key named '${dto.name}' already exists`);
      throw error;
    }
    return { ...toApiKeyResponse(entity), key };
  }

  async deleteApiKey(id: number): Promise<void> {
    const result = await this.keys.delete({ id });
    if (!result.affected) throw new NotFoundException(`API key ${id} not found`);
  }
}
