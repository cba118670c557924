import { type ArgumentMetadata, BadRequestException, type ExecutionContext, ValidationPipe } from '@nestjs/common';

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

/** What the HTTP edge puts in each route's config from the OpenAPI document. */
export interface RouteFacts {
  operationId?: string;
  /** Whether the operation declares any query parameter (then its query DTO validates the query). */
  acceptsQuery?: boolean;
  /** Whether the operation names its cluster in `x-cluster-name` (then also in `?cluster=`). */
  takesCluster?: boolean;
}

/**
 * An unknown query parameter is a 400 naming it on every route: routes with a query DTO get that
 * from the validation pipe (`forbidNonWhitelisted`), and this covers the routes that take none, as the
 * OpenAPI document declares them. Run by the global guard once a call is allowed (a guard, not an
 * interceptor: an interceptor would put every call through an rxjs pipeline for nothing).
 */
export function refuseUndeclaredQuery(context: ExecutionContext): void {
  if (context.getType() !== 'http') return;
  const request = context
    .switchToHttp()
    .getRequest<{ query?: Record<string, unknown>; routeOptions?: { config?: RouteFacts } }>();
  if (request.routeOptions?.config?.acceptsQuery) return;
  const unknown = Object.keys(request.query ?? {});
  if (unknown.length > 0) {
    throw new BadRequestException(
      unknown.slice(0, 20).map((name) => `query parameter '${name.slice(0, 64)}' is not accepted by this route`),
    );
  }
}
