import { Inject, Injectable, Logger, ServiceUnavailableException, UnauthorizedException } from '@nestjs/common';
import { InjectRepository } from '@nestjs/typeorm';
import { LessThan, Repository } from 'typeorm';
import { APP_CONFIG, type AppConfig } from '../config/config.js';
import { UsersService } from '../users/users.service.js';
import { UserEntity } from '../users/user.entity.js';
import { LoginThrottleService } from './login-throttle.service.js';
import { PasswordHasher } from './passwords.js';
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
  private readonly logger = new Logger(AuthService.name);

  constructor(
    @Inject(APP_CONFIG) private readonly config: AppConfig,
    private readonly throttle: LoginThrottleService,
    private readonly passwords: PasswordHasher,
    private readonly usersService: UsersService,
    @InjectRepository(UserEntity) private readonly users: Repository<UserEntity>,
    @InjectRepository(SessionEntity) private readonly sessions: Repository<SessionEntity>,
  ) {}

  async login(username: string, password: string, clientAddress: string): Promise<LoginResult> {
    const keys = LoginThrottleService.keys(username, clientAddress);
    // Counted before the password is checked, so concurrent guesses cannot all slip under the limit.
    await this.throttle.reserve(keys);
    const user = await this.users
      .createQueryBuilder('u')
      .addSelect('u.passwordHash')
      .where('u.usernameKey = :key', { key: username.toLowerCase() })
      .getOne();
    let verified: boolean;
    try {
      // Unknown users are verified against a throw-away hash: same message, same time.
      verified = await this.passwords.verify(user?.passwordHash, password);
    } catch (error) {
      // Not verified at all (the service is busy): the attempt does not count.
      if (error instanceof ServiceUnavailableException) await this.throttle.release(keys, { clearUser: false });
      throw error;
    }
    if (!verified || !user) throw new UnauthorizedException(BAD_LOGIN);
    if (!user.enabled) {
      // The same answer as a wrong password: a caller must not learn that the password was right.
      this.logger.log(`login refused: user '${user.username}' (${user.id}) is disabled`);
      throw new UnauthorizedException(BAD_LOGIN);
    }
    await this.throttle.release(keys, { clearUser: true });

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
