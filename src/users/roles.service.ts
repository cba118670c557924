import { ConflictException, Injectable, NotFoundException } from '@nestjs/common';
import { InjectRepository } from '@nestjs/typeorm';
import { EntityManager, Repository } from 'typeorm';
import type { AccessRule } from '../access/rules.js';
import { ApiKeyEntity } from '../auth/api-key.entity.js';
import { isUniqueViolation, Transactions } from '../database/transactions.js';
import type { CreateRoleDto, RoleDetailDto, RoleRuleDto, UpdateRoleDto } from './dto/role.dto.js';
import { RoleEntity } from './role.entity.js';
import { UserEntity } from './user.entity.js';

/** How many holders a 409 names before it says "and N more". */
const HOLDERS_SHOWN = 20;

export function toRoleDetailResponse(role: RoleEntity): RoleDetailDto {
  return {
    id: role.id,
    name: role.name,
    description: role.description,
    builtin: role.builtin,
    rules: role.rules.map((r) => ({
      clusters: r.clusters,
      namespaces: r.namespaces,
      resources: r.resources,
      verbs: r.verbs,
    })),
  };
}

/** Plain rule objects, in the order the four lists are documented (nothing else from the body). */
function toRules(rules: RoleRuleDto[]): AccessRule[] {
  return rules.map((r) => ({ clusters: r.clusters, namespaces: r.namespaces, resources: r.resources, verbs: r.verbs }));
}

/**
 * Custom roles. Changes run under the 'users' lock, like role assignments, so a role cannot be
 * deleted while someone is being given it.
 */
@Injectable()
export class RolesService {
  constructor(
    private readonly transactions: Transactions,
    @InjectRepository(RoleEntity) private readonly roles: Repository<RoleEntity>,
  ) {}

  async listRoles(): Promise<RoleDetailDto[]> {
    return (await this.roles.find({ order: { id: 'ASC' } })).map(toRoleDetailResponse);
  }

  async getRole(id: number): Promise<RoleDetailDto> {
    return toRoleDetailResponse(await this.find(this.roles.manager, id));
  }

  async createRole(dto: CreateRoleDto): Promise<RoleDetailDto> {
    const role = this.roles.create({
      name: dto.name,
      description: dto.description ?? '',
      builtin: false,
      rules: toRules(dto.rules),
    });
    await this.transactions.run(['users'], (manager) => this.saveUnique(manager, role));
    return toRoleDetailResponse(role);
  }

  async updateRole(id: number, dto: UpdateRoleDto): Promise<RoleDetailDto> {
    return this.transactions.run(['users'], async (manager) => {
      const role = await this.find(manager, id);
      if (role.builtin) throw new ConflictException(`the built-in role '${role.name}' cannot be changed`);
      if (dto.name !== undefined) role.name = dto.name;
      if (dto.description !== undefined) role.description = dto.description;
      if (dto.rules !== undefined) role.rules = toRules(dto.rules);
      await this.saveUnique(manager, role);
      return toRoleDetailResponse(role);
    });
  }

  /** Refused (409) for built-in roles and for roles a user or an API key holds, naming them. */
  async deleteRole(id: number): Promise<void> {
    await this.transactions.run(['users'], async (manager) => {
      const role = await this.find(manager, id);
      if (role.builtin) throw new ConflictException(`the built-in role '${role.name}' cannot be deleted`);
      const users = await manager
        .createQueryBuilder(UserEntity, 'u')
        .innerJoin('u.roles', 'r', 'r.id = :id', { id })
        .select('u.username', 'name')
        .orderBy('u.username_key')
        .getRawMany<{ name: string }>();
      const keys = await manager
        .createQueryBuilder(ApiKeyEntity, 'k')
        .innerJoin('k.roles', 'r', 'r.id = :id', { id })
        .select('k.name', 'name')
        .orderBy('k.name_key')
        .getRawMany<{ name: string }>();
      if (users.length || keys.length) {
        const list = (label: string, rows: { name: string }[]) => {
          if (!rows.length) return [];
          const shown = rows.slice(0, HOLDERS_SHOWN).map((r) => r.name);
          const more = rows.length > HOLDERS_SHOWN ? ` and ${rows.length - HOLDERS_SHOWN} more` : '';
          return [`${label} ${shown.join(', ')}${more}`];
        };
        throw new ConflictException(
          `role '${role.name}' is in use by ${[...list('users', users), ...list('API keys', keys)].join('; ')}: take it from them first`,
        );
      }
      await manager.delete(RoleEntity, { id });
    });
  }

  private async find(manager: EntityManager, id: number): Promise<RoleEntity> {
    const role = await manager.findOne(RoleEntity, { where: { id } });
    if (!role) throw new NotFoundException(`role ${id} not found`);
    return role;
  }

  private async saveUnique(manager: EntityManager, role: RoleEntity): Promise<void> {
    try {
      await manager.save(RoleEntity, role);
    } catch (error) {
      if (isUniqueViolation(error)) throw new ConflictException(`a role named '${role.name}' already exists`);
      throw error;
    }
  }
}
