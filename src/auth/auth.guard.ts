import {
  CanActivate,
  ExecutionContext,
  ForbiddenException,
  Injectable,
  Logger,
  UnauthorizedException,
} from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import { InjectRepository } from '@nestjs/typeorm';
import type { FastifyRequest } from 'fastify';
import { Repository } from 'typeorm';
import { UserEntity } from '../users/user.entity.js';
import { ACCESS_METADATA, type AccessRule } from './auth.decorators.js';
import { bootstrapCaller, type Caller } from './caller.js';
import { CredentialsService } from './credentials.service.js';
import { SESSION_COOKIE } from './session-cookie.js';

type RequestWithCaller = FastifyRequest & { caller?: Caller };

/** The credential presented: `Authorization: <key>`, `Authorization: Bearer <key|token>`, or the session cookie. */
export function presentedSecret(request: FastifyRequest): string | undefined {
  const header = request.headers.authorization?.trim();
  if (header) {
    const bearer = /^Bearer\s+(.+)$/i.exec(header);
    return bearer ? bearer[1].trim() : header;
  }
  const cookie = request.cookies?.[SESSION_COOKIE];
  return cookie || undefined;
}

/** The one global guard: every route is refused unless it declares `@Public()` or `@Authenticated()`. */
@Injectable()
export class AuthGuard implements CanActivate {
  private readonly logger = new Logger(AuthGuard.name);

  constructor(
    private readonly reflector: Reflector,
    private readonly credentials: CredentialsService,
    @InjectRepository(UserEntity) private readonly users: Repository<UserEntity>,
  ) {}

  async canActivate(context: ExecutionContext): Promise<boolean> {
    const rule = this.reflector.getAllAndOverride<AccessRule | undefined>(ACCESS_METADATA, [
      context.getHandler(),
      context.getClass(),
    ]);
    if (!rule) {
      this.logger.error(`${context.getClass().name}.${context.getHandler().name} declares no access rule; refused`);
      throw new ForbiddenException('this route is not available');
    }
    if (rule.public) return true;

    const request = context.switchToHttp().getRequest<RequestWithCaller>();
    const secret = presentedSecret(request);
    if (!secret) {
      if (rule.publicUntilFirstUser && (await this.users.count()) === 0) {
        request.caller = bootstrapCaller();
        return true;
      }
      throw new UnauthorizedException('authentication required');
    }
    const caller = await this.credentials.resolve(secret);
    request.caller = caller; // also on a 403: the audit row names who was refused
    if (rule.admin && !caller.isAdmin) throw new ForbiddenException('this route needs the admin role');
    if (!rule.withoutRole && caller.roles.length === 0) {
      throw new ForbiddenException('the caller has no role: ask an administrator for one');
    }
    return true;
  }
}
