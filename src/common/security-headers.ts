import helmet, { type HelmetOptions } from 'helmet';

/**
 * Helmet's headers for these options, worked out once. They depend on nothing in the request, so
 * the hot path only copies them: running helmet's middleware (as `@fastify/helmet` does) rebuilt
 * the whole Content-Security-Policy on every request.
 */
export function securityHeaders(options: Readonly<HelmetOptions>): Readonly<Record<string, string>> {
  const headers: Record<string, string> = {};
  const recorder = {
    setHeader(name: string, value: unknown) {
      headers[name.toLowerCase()] = String(value);
    },
    removeHeader(name: string) {
      delete headers[name.toLowerCase()];
    },
  };
  helmet(options)({} as never, recorder as never, (error?: unknown) => {
    if (error) throw error;
  });
  return Object.freeze(headers);
}
