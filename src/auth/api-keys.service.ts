import {
  BadRequestException,
  ConflictException,
  ForbiddenException,
  Inject,
  Injectable,
  NotFoundException,
} from '@nestjs/common';
import { InjectRepository } from '@nestjs/typeorm';
import { In, Repository } from 'typeorm';
import { APP_CONFIG, type AppConfig } from '../config/config.js';
import { isUniqueViolation, Transactions } from '../database/transactions.js';
import { ROLE_ADMIN, ROLE_VIEWER, RoleEntity } from '../users/role.entity.js';
import { ApiKeyEntity } from './api-key.entity.js';
import { type Caller, describeCaller } from '../access/caller.js';
import type { ApiKeyDto, CreateApiKeyDto, CreatedApiKeyDto } from './dto/api-key.dto.js';
import { API_KEY_DISPLAY_LENGTH, API_KEY_PREFIX, generateSecret, sha256Hex } from './tokens.js';

const RANK: Record<string, number> = { [ROLE_ADMIN]: 0, [ROLE_VIEWER]: 1 };

/** admin, viewer, then custom roles by name. */
function roleOrder(a: string, b: string): number {
  return (RANK[a] ?? 2) - (RANK[b] ?? 2) || (a < b ? -1 : a > b ? 1 : 0);
}

export function toApiKeyResponse(key: ApiKeyEntity): ApiKeyDto {
  const roles = key.roles.map((r) => r.name).sort(roleOrder);
  return {
    id: key.id,
    name: key.name,
    role: roles[0] ?? '',
    roles,
    owner: { id: key.owner.id, username: key.owner.username },
    prefix: key.prefix,
    createdAt: key.createdAt.toISOString(),
    createdBy: key.createdBy,
    lastUsedAt: key.lastUsedAt?.toISOString() ?? null,
    expiresAt: key.expiresAt?.toISOString() ?? null,
  };
}

/** API keys. Each belongs to a user; admins see all of them, a user sees and manages its own. */
@Injectable()
export class ApiKeysService {
  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly transactions: Transactions,
    @InjectRepository(ApiKeyEntity) private readonly keys: Repository<ApiKeyEntity>,
  ) {}

  /** All keys, or only those of one owner. */
  async listApiKeys(ownerId?: number): Promise<ApiKeyDto[]> {
    const keys = await this.keys.find({
      where: ownerId === undefined ? {} : { ownerId },
      relations: { roles: true, owner: true },
      order: { id: 'ASC' },
    });
    return keys.map(toApiKeyResponse);
  }

  /** One key (of this owner only, when given: another user's key is a 404 like a missing one). */
  async getApiKey(id: number, ownerId?: number): Promise<ApiKeyDto> {
    const key = await this.keys.findOne({
      where: ownerId === undefined ? { id } : { id, ownerId },
      relations: { roles: true, owner: true },
    });
    if (!key) throw new NotFoundException(`API key ${id} not found`);
    return toApiKeyResponse(key);
  }

  /**
   * A key for the caller's user (an API key caller creates one for its owner). Each role must exist
   * and be held by the caller: nobody hands out more than they have. A key made with a key never
   * outlives it (its expiry is capped at the creating key's), and a user owns at most
   * CAS_API_KEYS_PER_USER keys.
   */
  async createApiKey(dto: CreateApiKeyDto, caller: Caller): Promise<CreatedApiKeyDto> {
    if (dto.role !== undefined && dto.roles !== undefined)
      throw new BadRequestException(['send role or roles, not both']);
    const names = dto.roles ?? (dto.role !== undefined ? [dto.role] : []);
    if (names.length === 0) throw new BadRequestException(['roles must name at least one role']);
    let expiresAt = dto.expiresAt ? new Date(dto.expiresAt) : null;
    if (expiresAt && expiresAt.getTime() <= Date.now()) {
      throw new BadRequestException(['expiresAt must be in the future']);
    }
    if (caller.keyExpiresAt !== null && (expiresAt === null || expiresAt.getTime() > caller.keyExpiresAt)) {
      expiresAt = new Date(caller.keyExpiresAt);
    }
    if (caller.userId === null) throw new ForbiddenException('an API key needs a user to belong to');
    const ownerId = caller.userId;
    const key = generateSecret(API_KEY_PREFIX);
    const id = await this.transactions.run(['users'], async (manager) => {
      // Counted under the 'users' lock: concurrent creates on any replica cannot pass the limit together.
      const owned = await manager.countBy(ApiKeyEntity, { ownerId });
      if (owned >= this.config.apiKeysPerUser) {
        throw new ConflictException(
          `a user may own at most ${this.config.apiKeysPerUser} API keys (CAS_API_KEYS_PER_USER); delete one first`,
        );
      }
      const roles = await manager.findBy(RoleEntity, { name: In(names) });
      const unknown = names.filter((name) => !roles.some((r) => r.name === name));
      if (unknown.length) throw new BadRequestException(unknown.map((name) => `roles: no role named '${name}'`));
      const notHeld = caller.isAdmin ? [] : names.filter((name) => !caller.roles.includes(name));
      if (notHeld.length) {
        throw new ForbiddenException(
          `a key cannot get a role its creator does not hold: ${notHeld.map((n) => `'${n}'`).join(', ')}`,
        );
      }
      const entity = manager.create(ApiKeyEntity, {
        name: dto.name,
        nameKey: dto.name.toLowerCase(),
        ownerId,
        roles,
        prefix: key.slice(0, API_KEY_DISPLAY_LENGTH),
        keyHash: sha256Hex(key),
        createdBy: describeCaller(caller),
        lastUsedAt: null,
        expiresAt,
      });
      try {
        await manager.save(ApiKeyEntity, entity);
      } catch (error) {
        if (isUniqueViolation(error)) throw new ConflictException(`you already have an API key named '${dto.name}'`);
        throw error;
      }
      return entity.id;
    });
    const created = await this.keys.findOneOrFail({ where: { id }, relations: { roles: true, owner: true } });
    return { ...toApiKeyResponse(created), key };
  }

  /** Deletes a key (of this owner only, when given); it stops working at once. */
  async deleteApiKey(id: number, ownerId?: number): Promise<void> {
    const result = await this.keys.delete(ownerId === undefined ? { id } : { id, ownerId });
    if (!result.affected) throw new NotFoundException(`API key ${id} not found`);
  }
}
