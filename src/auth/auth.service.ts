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
/** With CAS_PASSWORD_LOGIN=false every refusal says the same, so it does not tell which account is the super user. */
const BAD_LOGIN_SSO_ONLY =
  'invalid username or password, or password login is turned off for this account: sign in with single sign-on';

export interface LoginResult {
  token: string;
  expiresAt: Date;
  user: UserEntity;
}

export interface StartedSession {
  token: string;
  expiresAt: Date;
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
    // Unknown users (and single sign-on users, who have no hash) are verified against a throw-away
    // hash: same message, same time.
    const verified = await verifyPassword(user?.passwordHash, password);
    const allowed = this.config.passwordLogin || user?.superUser === true;
    if (!verified || !user || !allowed) {
      await this.throttle.recordFailure(keys);
      throw new UnauthorizedException(this.config.passwordLogin ? BAD_LOGIN : BAD_LOGIN_SSO_ONLY);
    }
    if (!user.enabled) throw new UnauthorizedException('user is disabled');
    await this.throttle.clearUser(keys);
    const session = await this.startSession(user.id);
    return { ...session, user: await this.usersService.getUser(user.id) };
  }

  /**
   * Starts a session for a user who has just proven who they are (password or single sign-on):
   * the token is returned once, only its hash is stored, and `lastLoginAt` is set.
   */
  async startSession(userId: number): Promise<StartedSession> {
    const token = generateSecret(SESSION_TOKEN_PREFIX);
    const now = new Date();
    const expiresAt = new Date(now.getTime() + this.config.session.maxSeconds * 1000);
    await this.sessions.insert({ tokenHash: sha256Hex(token), userId, lastSeenAt: now, expiresAt });
    // Sessions past their absolute expiry that nobody presents again would otherwise stay forever.
    await this.sessions.delete({ expiresAt: LessThan(now) });
    await this.users.update({ id: userId }, { lastLoginAt: now });
    return { token, expiresAt };
  }

  async logout(sessionId: number): Promise<void> {
    await this.sessions.delete({ id: sessionId });
  }
}
