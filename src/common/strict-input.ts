import { type ArgumentMetadata, BadRequestException, type ExecutionContext, ValidationPipe } from '@nestjs/common';
import { ROUTE_ARGS_METADATA } from '@nestjs/common/constants.js';
import { RouteParamtypes } from '@nestjs/common/enums/route-paramtypes.enum.js';

/**
 * The global validation pipe. Path parameters are left as the router gave them: their own pipes
 * (ParseIdPipe) parse them strictly, where a generic `Number()` would have read `0x4` or ` 1` as an id.
 *
 * Most calls carry no query at all, and validating and transforming an empty query into a DTO always
 * gives the same answer: the first success is kept per DTO class and later ones get a copy of it,
 * without running class-transformer and class-validator again.
 */
export class AppValidationPipe extends ValidationPipe {
  private readonly emptyQueries = new WeakMap<object, object>();

  override async transform(value: unknown, metadata: ArgumentMetadata): Promise<unknown> {
    if (metadata.type === 'param') return value;
    const empty = metadata.type === 'query' && isEmptyObject(value) && typeof metadata.metatype === 'function';
    if (empty) {
      const known = this.emptyQueries.get(metadata.metatype!);
      if (known) return copyOf(known);
    }
    const result: unknown = await super.transform(value, metadata);
    // A copy is kept: the handler may change the object it was given.
    if (empty && result !== null && typeof result === 'object')
      this.emptyQueries.set(metadata.metatype!, copyOf(result));
    return result;
  }
}

/** The same class, with a copy of the own properties (deep when one is not a primitive). */
function copyOf(object: object): object {
  const own = { ...object } as Record<string, unknown>;
  const flat = Object.values(own).every((v) => v === null || (typeof v !== 'object' && typeof v !== 'function'));
  return Object.assign(
    Object.create(Object.getPrototypeOf(object) as object) as object,
    flat ? own : structuredClone(own),
  );
}

function isEmptyObject(value: unknown): boolean {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return false;
  for (const _key in value) return false;
  return true;
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
 * Run by the global guard once a call is allowed (a guard, not an interceptor: an interceptor would
 * put every call through an rxjs pipeline for nothing).
 */
export class UndeclaredQueryCheck {
  private readonly cache = new WeakMap<object, 'all' | Set<string>>();

  check(context: ExecutionContext): void {
    if (context.getType() !== 'http') return;
    const handler = context.getHandler();
    let declared = this.cache.get(handler);
    if (!declared) {
      declared = declaredQuery(handler, context.getClass().prototype as object);
      this.cache.set(handler, declared);
    }
    if (declared === 'all') return;
    const query = (context.switchToHttp().getRequest<{ query?: Record<string, unknown> }>().query ?? {}) as object;
    const unknown = Object.keys(query).filter((name) => !(declared as Set<string>).has(name));
    if (unknown.length > 0) {
      throw new BadRequestException(
        unknown.slice(0, 20).map((name) => `query parameter '${name.slice(0, 64)}' is not accepted by this route`),
      );
    }
  }
}
