import type { LoggerService } from '@nestjs/common';
import {
  LogController,
  type FastifyBaseLogger,
  type FastifyInstance,
  type FastifyReply,
  type FastifyRequest,
} from 'fastify';
import { hostname } from 'node:os';
import { pino, type Logger as Pino } from 'pino';
import type { LogLevel } from '../config/config.js';

/** Everything that may carry a secret is replaced before a log line is written. */
export const REDACTED_PATHS = [
  'req.headers.authorization',
  'req.headers.cookie',
  'req.headers["x-api-key"]',
  'res.headers["set-cookie"]',
  '*.password',
  '*.config',
  '*.token',
  '*.key',
  '*.authorization',
];

export function createPino(level: LogLevel): Pino {
  const options = { level, redact: { paths: REDACTED_PATHS, censor: '[redacted]' } };
  return level === 'silent' ? pino(options) : pino(options, batchedStdout());
}

/** What the line of a completed request holds: never a header, a query or a body. */
export interface AccessLine {
  reqId: string;
  method: string;
  path: string;
  statusCode: number;
  ms: number;
}

/** Writes the line of a completed request (at `info`); null when the level leaves such lines out. */
export type AccessLog = ((line: AccessLine) => void) | null;

/**
 * The per-request line, in pino's format on the same output (`{"level":30,"time":…,"pid":…,"hostname":…,
 * …,"msg":"request"}`), written as one string: the line's fields are fixed, so the object pino would
 * build, walk and serialise for every request is left out.
 */
export function createAccessLog(level: LogLevel, out: { write(line: string): unknown } = batchedStdout()): AccessLog {
  const value = pino.levels.values[level] as number | undefined; // 'silent' has none
  if (value === undefined || value > pino.levels.values.info) return null;
  const origin = `,"pid":${process.pid},"hostname":${JSON.stringify(hostname())}`;
  return (line) => {
    out.write(
      `{"level":30,"time":${Date.now()}${origin},"reqId":${JSON.stringify(line.reqId)},"method":${JSON.stringify(line.method)},` +
        `"path":${JSON.stringify(line.path)},"statusCode":${line.statusCode},"ms":${line.ms},"msg":"request"}\n`,
    );
  };
}

let stdout: ReturnType<typeof pino.destination> | undefined;

/**
 * Standard output, written in pieces of about 4 KiB (or every half second when fewer lines come)
 * instead of one system call per line: under load the write cost more than the line. Still written
 * synchronously from the main thread, so lines of other writers (the audit mirror) never land inside
 * a piece; what is left is written at exit.
 */
function batchedStdout(): ReturnType<typeof pino.destination> {
  if (!stdout) {
    const destination = pino.destination({ dest: 1, sync: true, minLength: 4096, periodicFlush: 500 });
    process.once('exit', () => destination.flushSync());
    stdout = destination;
  }
  return stdout;
}

/** Routes Nest's `Logger` calls into the same pino instance as Fastify's request logs. */
export class PinoNestLogger implements LoggerService {
  constructor(private readonly pino: Pino) {}

  private write(level: 'info' | 'error' | 'warn' | 'debug' | 'trace', message: unknown, params: unknown[]) {
    const context = typeof params[params.length - 1] === 'string' ? (params.pop() as string) : undefined;
    const stack = params.find((p) => typeof p === 'string');
    this.pino[level](
      { context, ...(stack ? { stack } : {}) },
      typeof message === 'string' ? message : JSON.stringify(message),
    );
  }

  log(message: unknown, ...params: unknown[]) {
    this.write('info', message, params);
  }
  error(message: unknown, ...params: unknown[]) {
    this.write('error', message, params);
  }
  warn(message: unknown, ...params: unknown[]) {
    this.write('warn', message, params);
  }
  debug(message: unknown, ...params: unknown[]) {
    this.write('debug', message, params);
  }
  verbose(message: unknown, ...params: unknown[]) {
    this.write('trace', message, params);
  }
}

/**
 * One log line per request, when it completes (Fastify writes two: incoming and completed). The path
 * is logged without its query: a query may carry a one-time secret (an OpenID callback's code).
 */
export class OneLineLogController extends LogController {
  /** access: where the line of a request that completed goes (createAccessLog). */
  constructor(private readonly access: AccessLog) {
    super();
  }

  override incomingRequest(): void {}

  override requestCompleted(error: Error | null | undefined, request: FastifyRequest, reply: FastifyReply): void {
    const line = {
      reqId: String(request.id),
      method: request.method,
      path: request.url.split('?', 1)[0],
      statusCode: reply.statusCode,
      ms: Math.round(reply.elapsedTime),
    };
    if (error) reply.log.error({ ...line, err: error }, 'request errored');
    else this.access?.(line); // null: the level leaves the line out
  }
}

type LogMethod = 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace';

/**
 * A request's logger, made on first use. Fastify makes a child logger for every request (its id
 * bound), which pino builds at a real cost per request; most requests never log through
 * it (their one line goes to the access logger), so here the child is made only when something logs.
 * What it writes is the child's own output.
 */
class LazyRequestLogger {
  private made?: Pino;

  constructor(
    private readonly parent: Pino,
    private readonly bindings: Record<string, unknown>,
    private readonly options: object,
  ) {}

  private get logger(): Pino {
    return (this.made ??= this.parent.child(this.bindings, this.options));
  }

  get level(): string {
    return this.made?.level ?? this.parent.level;
  }
  set level(level: string) {
    this.logger.level = level;
  }

  isLevelEnabled(level: string): boolean {
    return (this.made ?? this.parent).isLevelEnabled(level);
  }

  child(bindings: Record<string, unknown>, options?: object): Pino {
    return this.logger.child(bindings, options);
  }

  fatal(...args: unknown[]): void {
    this.write('fatal', args);
  }
  error(...args: unknown[]): void {
    this.write('error', args);
  }
  warn(...args: unknown[]): void {
    this.write('warn', args);
  }
  info(...args: unknown[]): void {
    this.write('info', args);
  }
  debug(...args: unknown[]): void {
    this.write('debug', args);
  }
  trace(...args: unknown[]): void {
    this.write('trace', args);
  }
  silent(): void {}

  private write(method: LogMethod, args: unknown[]): void {
    // Below the level nothing is written: no child is made for it.
    if (!this.isLevelEnabled(method)) return;
    (this.logger[method] as (...a: unknown[]) => void)(...args);
  }
}

/** Fastify's `childLoggerFactory`: a request's logger is made when it first logs (LazyRequestLogger). */
export const lazyChildLogger: FastifyInstance['childLoggerFactory'] = (logger, bindings, options) =>
  new LazyRequestLogger(logger as Pino, bindings, options) as unknown as FastifyBaseLogger;
