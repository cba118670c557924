import {
  HttpException,
  HttpStatus,
  Inject,
  Injectable,
  Logger,
  ServiceUnavailableException,
  UnauthorizedException,
} from '@nestjs/common';
import { setTimeout as sleep } from 'node:timers/promises';
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

/** Refusals that cost no password check: 429 (too many failures) and 503 (every check slot busy). */
const REFUSED_UNCHECKED = new Set<number>([HttpStatus.TOO_MANY_REQUESTS, HttpStatus.SERVICE_UNAVAILABLE]);
/** About what one argon2id check takes: how long such a refusal waits before it is sent. */
export const REFUSAL_DELAY_MS = 200;

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
    try {
      return await this.tryLogin(username, password, clientAddress);
    } catch (error) {
      // A login refused without a password check (too many failures, or every check slot busy) is
      // answered no sooner than a check would have been: otherwise a client that retries at once
      // turns the cheap refusal into a flood that takes the event loop from everyone else.
      if (error instanceof HttpException && REFUSED_UNCHECKED.has(error.getStatus())) await sleep(REFUSAL_DELAY_MS);
      throw error;
    }
  }

  private async tryLogin(username: string, password: string, clientAddress: string): Promise<LoginResult> {
    const keys = LoginThrottleService.keys(username, clientAddress);
    // A login that could not even wait for a password check is refused before it costs a database write.
    this.passwords.assertNotBusy();
    // Counted before the password is checked, so concurrent guesses cannot all slip under the limit.
    await this.throttle.reserve(keys);
    const user = await this.users
      .createQueryBuilder('u')
      .addSelect('u.passwordHash')
      .where('u.usernameKey = :key', { key: username.toLowerCase() })
      .getOne();
    let verified: boolean;
    try {
      // Unknown users (and single sign-on users, who have no hash) are verified against a throw-away
      // hash: same message, same time.
      verified = await this.passwords.verify(user?.passwordHash, password);
    } catch (error) {
      // Not verified at all (the service is busy): the attempt does not count.
      if (error instanceof ServiceUnavailableException) await this.throttle.release(keys, { clearUser: false });
      throw error;
    }
    const allowed = this.config.passwordLogin || user?.superUser === true;
    if (!verified || !user || !allowed) {
      throw new UnauthorizedException(this.config.passwordLogin ? BAD_LOGIN : BAD_LOGIN_SSO_ONLY);
    }
    if (!user.enabled) {
      // The same answer as a wrong password: a caller must not learn that the password was right.
      this.logger.log(`login refused: user '${user.username}' (${user.id}) is disabled`);
      throw new UnauthorizedException(this.config.passwordLogin ? BAD_LOGIN : BAD_LOGIN_SSO_ONLY);
    }
    await this.throttle.release(keys, { clearUser: true });
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
