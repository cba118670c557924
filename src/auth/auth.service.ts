import { Inject, Injectable, UnauthorizedException } from '@nestjs/common';
import { InjectRepository } from '@nestjs/typeorm';
import { LessThan, Repository } from 'typeorm';
import { APP_CONFIG, type AppConfig } from '../config/config.js';
import { UsersService } from '../users/users.service.js';
import { UserEntity } from '../users/user.entity.js';
import { LoginThrottleService } from './login-throttle.service.js';
import { verifyPassword } from './passwords.js';
import { SessionEntity } from './session.entity.js';
import { generateSecret, SESSION_TOKEN_PREFIX, sha256Hex } from './tokens.js';

const BAD_LOGIN = 'invalid username or password';

export interface LoginResult {
  token: string;
  expiresAt: Date;
  user: UserEntity;
}

@Injectable()
export class AuthService {
  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly throttle: LoginThrottleService,
    private readonly usersService: UsersService,
    @InjectRepository(UserEntity) private readonly users: Repository<UserEntity>,
    @InjectRepository(SessionEntity) private readonly sessions: Repository<SessionEntity>,
  ) {}

  async login(username: string, password: string, clientAddress: string): Promise<LoginResult> {
    const keys = LoginThrottleService.keys(username, clientAddress);
    await this.throttle.assertAllowed(keys);
    const user = await this.users
      .createQueryBuilder('u')
      .addSelect('u.passwordHash')
      .where('u.usernameKey = :key', { key: username.toLowerCase() })
      .getOne();
    // Unknown users are verified against a throw-away hash: same message, same time.
    if (!(await verifyPassword(user?.passwordHash, password)) || !user) {
      await this.throttle.recordFailure(keys);
      throw new UnauthorizedException(BAD_LOGIN);
    }
    if (!user.enabled) throw new UnauthorizedException('user is disabled');
    await this.throttle.clearUser(keys);

    const token = generateSecret(SESSION_TOKEN_PREFIX);
    const now = new Date();
    const expiresAt = new Date(now.getTime() + this.config.session.maxSeconds * 1000);
    await this.sessions.insert({ tokenHash: sha256Hex(token), userId: user.id, lastSeenAt: now, expiresAt });
    // Sessions past their absolute expiry that nobody presents again would otherwise stay forever.
    await this.sessions.delete({ expiresAt: LessThan(now) });
    await this.users.update({ id: user.id }, { lastLoginAt: now });
    return { token, expiresAt, user: await this.usersService.getUser(user.id) };
  }

  async logout(sessionId: number): Promise<void> {
    await this.sessions.delete({ id: sessionId });
  }
}
