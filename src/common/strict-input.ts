import {
  type ArgumentMetadata,
  BadRequestException,
  type CallHandler,
  type ExecutionContext,
  Injectable,
  type NestInterceptor,
  ValidationPipe,
} from '@nestjs/common';
import { ROUTE_ARGS_METADATA } from '@nestjs/common/constants.js';
import { RouteParamtypes } from '@nestjs/common/enums/route-paramtypes.enum.js';
import type { Observable } from 'rxjs';

/**
 * The global validation pipe. Path parameters are left as the router gave them: their own pipes
 * (ParseIdPipe) parse them strictly, where a generic `Number()` would have read `0x4` or ` 1` as an id.
 */
export class AppValidationPipe extends ValidationPipe {
  override transform(value: unknown, metadata: ArgumentMetadata): Promise<unknown> {
    if (metadata.type === 'param') return Promise.resolve(value);
    return super.transform(value, metadata);
  }
}

/** The query parameters a handler declares: `all` when it takes a whole query DTO (the pipe checks those). */
function declaredQuery(handler: object, controller: object): 'all' | Set<string> {
  const args = (Reflect.getMetadata(ROUTE_ARGS_METADATA, controller.constructor, (handler as { name: string }).name) ??
    {}) as Record<string, { data?: unknown }>;
  const names = new Set<string>();
  for (const [key, arg] of Object.entries(args)) {
    if (Number(key.split(':')[0]) !== RouteParamtypes.QUERY) continue;
    if (typeof arg.data !== 'string') return 'all';
    names.add(arg.data);
  }
  return names;
}

/**
 * An unknown query parameter is a 400 naming it on every route: routes with a query DTO get that
 * from the validation pipe (`forbidNonWhitelisted`), and this covers the routes that take none.
 */
@Injectable()
export class StrictQueryInterceptor implements NestInterceptor {
  private readonly cache = new WeakMap<object, 'all' | Set<string>>();

  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    if (context.getType() !== 'http') return next.handle();
    const handler = context.getHandler();
    let declared = this.cache.get(handler);
    if (!declared) {
      declared = declaredQuery(handler, context.getClass().prototype as object);
      this.cache.set(handler, declared);
    }
    if (declared !== 'all') {
      const query = (context.switchToHttp().getRequest<{ query?: Record<string, unknown> }>().query ?? {}) as object;
      const unknown = Object.keys(query).filter((name) => !(declared as Set<string>).has(name));
      if (unknown.length > 0) {
        throw new BadRequestException(
          unknown.slice(0, 20).map((name) => `query parameter '${name.slice(0, 64)}' is not accepted by this route`),
        );
      }
    }
    return next.handle();
  }
}
