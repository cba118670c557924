import {
  BadRequestException,
  ConflictException,
  Injectable,
  NotFoundException,
  UnauthorizedException,
} from '@nestjs/common';
import { InjectRepository } from '@nestjs/typeorm';
import { EntityManager, In, Repository, SelectQueryBuilder } from 'typeorm';
import { ApiKeyEntity } from '../auth/api-key.entity.js';
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

/** A role of a listed user, as the list's statement gives it (json). */
interface RoleJson {
  id: number;
  name: RoleName;
}

const SORT_COLUMNS: Record<UserSortField, string> = {
  id: 'u.id',
  username: 'u.username_key',
  name: 'LOWER(u.name)',
  createdAt: 'u.created_at',
  lastLoginAt: 'u.last_login_at',
};

/** What a single sign-on provider says about the person signing in (already validated). */
export interface ExternalSignIn {
  /** `oidc:<id>`. */
  provider: string;
  /** The provider's stable `sub`. */
  subject: string;
  username: string;
  name: string;
  avatarUrl: string | null;
  /** Role names the person's groups map to; null when the provider does not manage roles. */
  roleNames: string[] | null;
}

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
  ) {}

  /** Creates the first user, with role admin; refused once any user exists, atomically across replicas. */
  async createSuperUser(dto: CreateUserDto): Promise<UserEntity> {
    this.checkPasswordPolicy(dto.username, dto.password);
    // A public route: refuse cheaply once bootstrapped, before spending a password hash on it.
    if ((await this.users.count()) > 0) throw new ConflictException('the super user already exists');
    const passwordHash = await this.passwords.hash(dto.password);
    return this.transactions.run(['users'], async (manager) => {
      if ((await manager.count(UserEntity)) > 0) throw new ConflictException('the super user already exists');
      return this.insertUser(manager, dto, passwordHash, [ROLE_ADMIN], true);
    });
  }

  async createUser(dto: CreateUserDto): Promise<UserEntity> {
    this.checkPasswordPolicy(dto.username, dto.password);
    const passwordHash = await this.passwords.hash(dto.password);
    return this.transactions.run([], (manager) => this.insertUser(manager, dto, passwordHash, [ROLE_VIEWER]));
  }

  private async insertUser(
    manager: EntityManager,
    dto: CreateUserDto,
    passwordHash: string,
    roleNames: RoleName[],
    superUser = false,
  ) {
    const user = manager.create(UserEntity, {
      username: dto.username,
      usernameKey: dto.username.toLowerCase(),
      provider: PROVIDER_PASSWORD,
      subject: null,
      superUser,
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

  /**
   * Creates or updates the user a single sign-on provider vouches for, found by (provider, subject):
   * username, name and avatar follow the provider, and so do the roles when the provider manages
   * them. A username held by another account (a password user, another provider's user) is a 409,
   * never a takeover; a disabled user is refused; the last enabled admin cannot lose the role.
   */
  async signInExternalUser(input: ExternalSignIn): Promise<UserEntity> {
    return this.transactions.run(['users'], async (manager) => {
      const roles =
        input.roleNames === null ? null : await manager.findBy(RoleEntity, { name: In(input.roleNames as RoleName[]) });
      const existing = await manager.findOne(UserEntity, {
        where: { provider: input.provider, subject: input.subject },
        relations: { roles: true },
      });
      let user: UserEntity;
      if (existing) {
        if (!existing.enabled) throw new UnauthorizedException('user is disabled');
        if (roles && !roles.some((r) => r.name === ROLE_ADMIN)) {
          await this.assertNotLastAdmin(
            manager,
            existing,
            'remove the admin role (no longer granted by the provider) from',
          );
        }
        user = existing;
        user.username = input.username;
        user.usernameKey = input.username.toLowerCase();
        user.name = input.name;
        user.avatarUrl = input.avatarUrl;
        if (roles) user.roles = roles;
      } else {
        user = manager.create(UserEntity, {
          username: input.username,
          usernameKey: input.username.toLowerCase(),
          provider: input.provider,
          subject: input.subject,
          superUser: false,
          name: input.name,
          passwordHash: null,
          enabled: true,
          avatarUrl: input.avatarUrl,
          lastLoginAt: null,
          roles: roles ?? [],
        });
      }
      try {
        await manager.save(user);
      } catch (error) {
        if (isUniqueViolation(error)) {
          throw new ConflictException(
            `the username '${input.username}' belongs to another account; an administrator must rename or remove that account first`,
          );
        }
        throw error;
      }
      return this.getUser(user.id, manager);
    });
  }

  async listUsers(query: ListUsersQueryDto): Promise<UserListDto> {
    const { users, total } = await this.listPage(query);
    // An unknown role matches no one: whether it exists is asked only when nothing matched.
    if (total === 0 && query.role && !(await this.users.manager.exists(RoleEntity, { where: { name: query.role } }))) {
      throw new BadRequestException([`role: no role named '${query.role}'`]);
    }
    return { users: users.map(toUserResponse), total, page: query.page, size: query.size };
  }

  /**
   * The page, its total and its users' roles in one statement. On PostgreSQL that is one round trip:
   * each query sent costs a write to the database's socket and a wake-up of its backend, on both sides
   * of the connection, and three statements a page (ids, rows, roles) cost more CPU in the service than
   * building and reading them did. On SQLite (in the process) it is one statement to build, run and
   * read instead of three.
   *
   * The page's ids come first (a subquery, a deferred join), then only their rows, by primary key.
   * Filtered, the ids and a window count of the matches come from one pass over the matches, sorting
   * ids and sort keys only (sorting whole rows copied every match into temporary tables: with 1,111
   * matches of 100,000, a fifth of the request on SQLite). Unfiltered, the ids are paged by the sort's
   * index, the offset skipped in the index, not by reading every row it skips; the total is, on
   * PostgreSQL, the one row `user_count`'s triggers keep (migration 1795410000000; COUNT(*) of 100,000
   * users cost more than the page), on SQLite COUNT(*).
   *
   * PostgreSQL reads those ids by an index-only scan of the sort's index (sort key, id; migrations
   * 1795353245680 and 1795400000000). An index-only scan reads a row only where its page is not marked
   * all-visible in the visibility map, which vacuum sets (autovacuum: after many inserts or updates).
   * Rows added in bulk, and pages where a row changed since (a login sets last_login_at), are read
   * until then; the page is right either way.
   */
  private async listPage(query: ListUsersQueryDto): Promise<{ users: UserEntity[]; total: number }> {
    const postgres = this.isPostgres();
    const filtered = Boolean(query.search || query.role);
    const byIndex = postgres && !filtered;
    const unfilteredTotal = postgres ? 'SELECT n FROM user_count' : 'SELECT COUNT(*) AS n FROM users';
    const rolesAsJson = postgres
      ? `COALESCE(json_agg(json_build_object('id', r.id, 'name', r.name)), '[]')`
      : `json_group_array(json_object('id', r.id, 'name', r.name))`;
    const { entities, raw } = await this.orderUsers(this.users.createQueryBuilder('u'), query, byIndex)
      .innerJoin(
        // `u` inside is its own scope: the subquery in FROM cannot see the outer `u`.
        (ids) => {
          const page = this.pageOf(
            this.orderUsers(this.matches(ids.select('u.id', 'id'), query), query, byIndex),
            query,
          );
          return filtered ? page.addSelect('COUNT(*) OVER ()', 'total') : page;
        },
        'page',
        'page.id = u.id',
      )
      .addSelect(filtered ? 'page.total' : `(${unfilteredTotal})`, 'total')
      .addSelect(
        `(SELECT ${rolesAsJson} FROM user_roles ur INNER JOIN roles r ON r.id = ur.role_id WHERE ur.user_id = u.id)`,
        'roles_json',
      )
      .getRawAndEntities<{ u_id: number; total: number | string; roles_json: string | RoleJson[] }>();
    const roles = new Map(
      // PostgreSQL parses json itself; SQLite answers its text.
      raw.map((row) => [
        Number(row.u_id),
        typeof row.roles_json === 'string' ? (JSON.parse(row.roles_json) as RoleJson[]) : row.roles_json,
      ]),
    );
    for (const user of entities) {
      user.roles = (roles.get(user.id) ?? []).map((role) => Object.assign(new RoleEntity(), role));
    }
    // Past the last page no row carries the total.
    if (raw.length > 0) return { users: entities, total: Number(raw[0].total) };
    const counted = filtered
      ? await this.matches(this.users.manager.createQueryBuilder().select('COUNT(*)', 'n'), query).getRawOne<{
          n: number | string;
        }>()
      : ((await this.users.query(unfilteredTotal)) as Array<{ n: number | string }>)[0];
    return { users: [], total: Number(counted?.n ?? 0) };
  }

  private pageOf<T extends SelectQueryBuilder<UserEntity>>(qb: T, query: ListUsersQueryDto): T {
    return qb.offset((query.page - 1) * query.size).limit(query.size);
  }

  /**
   * The list's order: the sort key, then id (equal keys keep one order from page to page); users who
   * never logged in come last in both directions. `byIndex` (PostgreSQL) says it as `NULLS LAST`, the
   * order the last-login indexes hold; otherwise a CASE puts them last, an order no index holds, so a
   * filtered list sorts its matches rather than walking an index through the rows that do not match.
   */
  private orderUsers<T extends SelectQueryBuilder<UserEntity>>(qb: T, query: ListUsersQueryDto, byIndex = false): T {
    const direction = query.sortOrder === 'asc' ? 'ASC' : 'DESC';
    const lastLogin = query.sortBy === 'lastLoginAt';
    if (lastLogin && !byIndex) qb.addOrderBy('CASE WHEN u.last_login_at IS NULL THEN 1 ELSE 0 END', 'ASC');
    if (query.sortBy !== 'id') {
      const nulls = lastLogin && byIndex ? 'NULLS LAST' : undefined;
      qb.addOrderBy(SORT_COLUMNS[query.sortBy] + this.textCollation(query.sortBy), direction, nulls);
    }
    return qb.addOrderBy('u.id', direction);
  }

  /** Text sorts by code point of the lower-cased value on both databases (SQLite's BINARY; PostgreSQL's "C"). */
  private textCollation(sortBy: UserSortField): string {
    const isText = sortBy === 'username' || sortBy === 'name';
    return isText && this.isPostgres() ? ' COLLATE "C"' : '';
  }

  private isPostgres(): boolean {
    return this.users.manager.connection.options.type === 'postgres';
  }

  /** `u`: the users the list's filters match (every user without a filter). */
  private matches<T extends SelectQueryBuilder<any>>(qb: T, query: ListUsersQueryDto): T {
    return this.isPostgres() ? this.matchesOnPostgres(qb, query) : this.matchesOnSqlite(qb, query);
  }

  /**
   * PostgreSQL: `u`, the users a filter matches, with the columns a sort needs. A search is two
   * conditions the trigram indexes serve one each (PostgreSQL plans an OR of them as a scan of the
   * whole table once a term matches more than a few rows); the usernames are matched on username_key,
   * stored lower-cased: no lower() of every row. The matches come straight from the two index scans
   * (their UNION), not as ids to look up again by primary key, which costs a second look-up per match.
   */
  private matchesOnPostgres<T extends SelectQueryBuilder<any>>(qb: T, query: ListUsersQueryDto): T {
    if (query.search) {
      const columns = 'id, username_key, name, created_at, last_login_at';
      qb.from(
        `(SELECT ${columns} FROM users WHERE username_key LIKE :pattern ESCAPE '\\'
           UNION SELECT ${columns} FROM users WHERE LOWER(name) LIKE :pattern ESCAPE '\\')`,
        'u',
      ).setParameter('pattern', likePattern(query.search));
    } else {
      qb.from(UserEntity, 'u');
    }
    if (query.role) this.roleFilter(qb, query.role);
    return qb;
  }

  /** SQLite: `u`, the users table, with the search and role conditions. */
  private matchesOnSqlite<T extends SelectQueryBuilder<any>>(qb: T, query: ListUsersQueryDto): T {
    qb.from(UserEntity, 'u');
    if (query.search) {
      qb.andWhere("(LOWER(u.username) LIKE :pattern ESCAPE '\\' OR LOWER(u.name) LIKE :pattern ESCAPE '\\')", {
        pattern: likePattern(query.search),
      });
      // The trigram index narrows the rows first (it needs 3 characters); LIKE above stays the rule.
      if ([...query.search].length >= 3) {
        qb.andWhere('u.id IN (SELECT rowid FROM users_search WHERE users_search MATCH :phrase)', {
          phrase: `"${query.search.replace(/"/g, '""')}"`,
        });
      }
    }
    if (query.role) this.roleFilter(qb, query.role);
    return qb;
  }

  /**
   * The role's id is looked up once (a scalar subquery), so each matching user costs one look-up in
   * user_roles' primary key rather than a join to roles by name. An unknown role's id is NULL: no one
   * matches.
   */
  private roleFilter(qb: SelectQueryBuilder<any>, role: string): void {
    qb.andWhere(
      'EXISTS (SELECT 1 FROM user_roles ur WHERE ur.user_id = u.id AND ur.role_id = (SELECT r.id FROM roles r WHERE r.name = :role))',
      { role },
    );
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
    if (user.provider !== PROVIDER_PASSWORD) {
      throw new ConflictException(`user '${user.username}' signs in with ${user.provider} and has no password here`);
    }
    this.checkPasswordPolicy(user.username, password);
    const passwordHash = await this.passwords.hash(password);
    await this.transactions.run([], async (manager) => {
      await manager.update(UserEntity, { id }, { passwordHash });
      // A reset is what follows a leaked password: whatever was signed in or minted with it goes too.
      await manager.delete(SessionEntity, { userId: id });
      await manager.delete(ApiKeyEntity, { ownerId: id });
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
      const roles = await manager.findBy(RoleEntity, { name: In(dto.roles) });
      const unknown = dto.roles.filter((name) => !roles.some((r) => r.name === name));
      if (unknown.length) throw new BadRequestException(unknown.map((name) => `roles: no role named '${name}'`));
      user.roles = roles;
      await manager.save(user);
      return this.getUser(id, manager);
    });
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
