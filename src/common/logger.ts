import type { LoggerService } from '@nestjs/common';
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
  return pino({ level, redact: { paths: REDACTED_PATHS, censor: '[redacted]' } });
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
