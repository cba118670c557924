import { BadRequestException, ConflictException, Injectable, NotFoundException } from '@nestjs/common';
import { InjectRepository } from '@nestjs/typeorm';
import { EntityManager, In, Repository, SelectQueryBuilder } from 'typeorm';
import { PasswordHasher } from '../auth/passwords.js';
import { SessionEntity } from '../auth/session.entity.js';
import { isUniqueViolation, Transactions } from '../database/transactions.js';
import type {
  CreateUserDto,
  ListUsersQueryDto,
  SetUserRolesDto,
  UpdateUserDto,
  UserSortField,
} from './dto/user-requests.dto.js';
import type { UserListDto } from './dto/user.dto.js';
import { ROLE_ADMIN, ROLE_VIEWER, RoleEntity, type RoleName } from './role.entity.js';
import { toUserResponse } from './user.mapper.js';
import { PROVIDER_PASSWORD, UserEntity } from './user.entity.js';

const SORT_COLUMNS: Record<UserSortField, string> = {
  id: 'u.id',
  username: 'u.username_key',
  name: 'LOWER(u.name)',
  createdAt: 'u.created_at',
  lastLoginAt: 'u.last_login_at',
};

/** Escapes LIKE wildcards so `%` and `_` in a search match themselves. */
function likePattern(search: string): string {
  return '%' + search.toLowerCase().replace(/[\\%_]/g, (c) => '\\' + c) + '%';
}

@Injectable()
export class UsersService {
  constructor(
    private readonly transactions: Transactions,
    private readonly passwords: PasswordHasher,
    @InjectRepository(UserEntity) private readonly users: Repository<UserEntity>,
    @InjectRepository(RoleEntity) private readonly roles: Repository<RoleEntity>,
  ) {}

  /** Creates the first user, with role admin; refused once any user exists, atomically across replicas. */
  async createSuperUser(dto: CreateUserDto): Promise<UserEntity> {
    this.checkPasswordPolicy(dto.username, dto.password);
    // A public route: refuse cheaply once bootstrapped, before spending a password hash on it.
    if ((await this.users.count()) > 0) throw new ConflictException('the super user already exists');
    const passwordHash = await this.passwords.hash(dto.password);
    return this.transactions.run(['users'], async (manager) => {
      if ((await manager.count(UserEntity)) > 0) throw new ConflictException('the super user already exists');
      return this.insertUser(manager, dto, passwordHash, [ROLE_ADMIN]);
    });
  }

  async createUser(dto: CreateUserDto): Promise<UserEntity> {
    this.checkPasswordPolicy(dto.username, dto.password);
    const passwordHash = await this.passwords.hash(dto.password);
    return this.transactions.run([], (manager) => this.insertUser(manager, dto, passwordHash, [ROLE_VIEWER]));
  }

  private async insertUser(manager: EntityManager, dto: CreateUserDto, passwordHash: string, roleNames: RoleName[]) {
    const user = manager.create(UserEntity, {
      username: dto.username,
      usernameKey: dto.username.toLowerCase(),
      provider: PROVIDER_PASSWORD,
      name: dto.name ?? dto.username,
      passwordHash,
      enabled: true,
      avatarUrl: null,
      lastLoginAt: null,
      roles: await manager.findBy(RoleEntity, { name: In(roleNames) }),
    });
    try {
      await manager.save(user);
    } catch (error) {
      if (isUniqueViolation(error)) throw new ConflictException(`username '${dto.username}' is already taken`);
      throw error;
    }
    return user;
  }

  async listUsers(query: ListUsersQueryDto): Promise<UserListDto> {
    const direction = query.sortOrder === 'asc' ? 'ASC' : 'DESC';
    const qb = this.users.createQueryBuilder('u');
    this.applyFilters(qb, query);
    if (query.sortBy === 'lastLoginAt') qb.addOrderBy('CASE WHEN u.last_login_at IS NULL THEN 1 ELSE 0 END', 'ASC');
    if (query.sortBy !== 'id') qb.addOrderBy(SORT_COLUMNS[query.sortBy] + this.textCollation(query.sortBy), direction);
    qb.addOrderBy('u.id', direction);
    const [users, total] = await qb
      .offset((query.page - 1) * query.size)
      .limit(query.size)
      .getManyAndCount();
    await this.attachRoles(users);
    return { users: users.map(toUserResponse), total, page: query.page, size: query.size };
  }

  /** Text sorts by code point of the lower-cased value on both databases (SQLite's BINARY; PostgreSQL's "C"). */
  private textCollation(sortBy: UserSortField): string {
    const isText = sortBy === 'username' || sortBy === 'name';
    return isText && this.users.manager.connection.options.type === 'postgres' ? ' COLLATE "C"' : '';
  }

  private applyFilters(qb: SelectQueryBuilder<UserEntity>, query: ListUsersQueryDto): void {
    if (query.search) {
      qb.andWhere("(LOWER(u.username) LIKE :pattern ESCAPE '\\' OR LOWER(u.name) LIKE :pattern ESCAPE '\\')", {
        pattern: likePattern(query.search),
      });
    }
    if (query.role) {
      qb.andWhere(
        'EXISTS (SELECT 1 FROM user_roles ur INNER JOIN roles r ON r.id = ur.role_id WHERE ur.user_id = u.id AND r.name = :role)',
        { role: query.role },
      );
    }
  }

  /** Loads the roles of a page of users in one query. */
  private async attachRoles(users: UserEntity[]): Promise<void> {
    if (users.length === 0) return;
    const withRoles = await this.users.find({
      where: { id: In(users.map((u) => u.id)) },
      relations: { roles: true },
      select: { id: true, roles: { id: true, name: true } },
    });
    const byId = new Map(withRoles.map((u) => [u.id, u.roles]));
    for (const user of users) user.roles = byId.get(user.id) ?? [];
  }

  async getUser(id: number, manager: EntityManager = this.users.manager): Promise<UserEntity> {
    const user = await manager.findOne(UserEntity, { where: { id }, relations: { roles: true } });
    if (!user) throw new NotFoundException(`user ${id} not found`);
    return user;
  }

  async updateUser(id: number, dto: UpdateUserDto): Promise<UserEntity> {
    const user = await this.getUser(id);
    if (dto.name !== undefined) user.name = dto.name;
    if (dto.avatar_url !== undefined) user.avatarUrl = dto.avatar_url === '' ? null : dto.avatar_url;
    await this.users.update({ id }, { name: user.name, avatarUrl: user.avatarUrl });
    return this.getUser(id);
  }

  async deleteUser(id: number): Promise<void> {
    await this.transactions.run(['users'], async (manager) => {
      const user = await this.getUser(id, manager);
      await this.assertNotLastAdmin(manager, user, 'delete');
      await manager.delete(SessionEntity, { userId: id });
      await manager.delete(UserEntity, { id });
    });
  }

  async resetPassword(id: number, password: string): Promise<void> {
    const user = await this.getUser(id);
    this.checkPasswordPolicy(user.username, password);
    const passwordHash = await this.passwords.hash(password);
    await this.transactions.run([], async (manager) => {
      await manager.update(UserEntity, { id }, { passwordHash });
      await manager.delete(SessionEntity, { userId: id });
    });
  }

  async setEnabled(id: number, enabled: boolean): Promise<void> {
    await this.transactions.run(['users'], async (manager) => {
      const user = await this.getUser(id, manager);
      if (!enabled) {
        await this.assertNotLastAdmin(manager, user, 'disable');
        await manager.delete(SessionEntity, { userId: id });
      }
      await manager.update(UserEntity, { id }, { enabled });
    });
  }

  async setRoles(id: number, dto: SetUserRolesDto): Promise<UserEntity> {
    return this.transactions.run(['users'], async (manager) => {
      const user = await this.getUser(id, manager);
      if (!dto.roles.includes(ROLE_ADMIN)) await this.assertNotLastAdmin(manager, user, 'remove the admin role from');
      user.roles = await manager.findBy(RoleEntity, { name: In(dto.roles) });
      await manager.save(user);
      return this.getUser(id, manager);
    });
  }

  listRoles(): Promise<RoleEntity[]> {
    return this.roles.find({ order: { id: 'ASC' } });
  }

  /** Must run inside a transaction holding the 'users' lock, so two admins cannot both be removed at once. */
  private async assertNotLastAdmin(manager: EntityManager, user: UserEntity, action: string): Promise<void> {
    const isEnabledAdmin = user.enabled && user.roles.some((r) => r.name === ROLE_ADMIN);
    if (!isEnabledAdmin) return;
    const otherAdmins = await manager
      .createQueryBuilder(UserEntity, 'u')
      .innerJoin('u.roles', 'r', 'r.name = :admin', { admin: ROLE_ADMIN })
      .where('u.enabled = :enabled', { enabled: true })
      .andWhere('u.id <> :id', { id: user.id })
      .getCount();
    if (otherAdmins === 0) throw new ConflictException(`cannot ${action} the last enabled admin`);
  }

  private checkPasswordPolicy(username: string, password: string): void {
    if (password.toLowerCase() === username.toLowerCase()) {
      throw new BadRequestException(['password must not be the same as the username']);
    }
  }
}
