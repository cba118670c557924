import { DataSource, In } from 'typeorm';
import { hashPassword } from '../../src/auth/passwords.js';
import { RoleEntity, type RoleName } from '../../src/users/role.entity.js';
import { UserEntity } from '../../src/users/user.entity.js';
import type { TestApp } from './app.js';
import { request } from './http.js';

export const DEFAULT_PASSWORD = 'correct-horse-battery';
const hashes = new Map<string, Promise<string>>();

/** argon2 is slow on purpose; a test process hashes each distinct password once. */
export function cachedHash(password: string): Promise<string> {
  if (!hashes.has(password)) hashes.set(password, hashPassword(password));
  return hashes.get(password)!;
}

let counter = 0;

export interface CreatedUser {
  id: number;
  username: string;
  password: string;
}

/** Inserts a user directly (no HTTP, no per-user hashing cost). */
export async function createUser(
  t: TestApp | DataSource,
  options: {
    username?: string;
    name?: string;
    role?: RoleName | RoleName[];
    enabled?: boolean;
    password?: string;
  } = {},
): Promise<CreatedUser> {
  const dataSource = t instanceof DataSource ? t : t.dataSource;
  const username = options.username ?? `user${process.pid}x${++counter}`;
  const password = options.password ?? DEFAULT_PASSWORD;
  const roleNames = ([] as RoleName[]).concat(options.role ?? 'viewer');
  const user = dataSource.getRepository(UserEntity).create({
    username,
    usernameKey: username.toLowerCase(),
    name: options.name ?? username,
    provider: 'password',
    passwordHash: await cachedHash(password),
    enabled: options.enabled ?? true,
    avatarUrl: null,
    lastLoginAt: null,
    roles: await dataSource.getRepository(RoleEntity).findBy({ name: In(roleNames) }),
  });
  await dataSource.getRepository(UserEntity).save(user);
  return { id: user.id, username, password };
}

/** Logs in through the API and returns the session token. */
export async function login(t: TestApp, user: { username: string; password: string }): Promise<string> {
  const res = await request(t.app, 'POST', '/api/v1/auth/login', {
    body: { username: user.username, password: user.password },
  });
  if (res.status !== 200) throw new Error(`login of ${user.username} failed: ${res.status} ${res.text}`);
  return res.body.token;
}

/** A user with the role, logged in: its id and a session token. */
export async function signedIn(t: TestApp, role: RoleName | RoleName[] = 'admin', options: { username?: string } = {}) {
  const user = await createUser(t, { role, ...options });
  return { ...user, token: await login(t, user) };
}
