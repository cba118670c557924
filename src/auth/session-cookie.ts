import type { FastifyReply, FastifyRequest } from 'fastify';

export const SESSION_COOKIE = 'cas_session';
/**
 * The name over https. A browser keeps a `__Host-` cookie only when it is Secure, has Path=/ and no
 * Domain: no sibling subdomain and no plain-http page can set or shadow it.
 */
export const SECURE_SESSION_COOKIE = `__Host-${SESSION_COOKIE}`;

/**
 * The session cookie every login sets (password or single sign-on): HttpOnly, SameSite=Lax; over
 * https (directly, or as a trusted proxy's X-Forwarded-Proto says: `request.protocol` follows
 * CAS_TRUST_PROXY) Secure and `__Host-` prefixed.
 */
export function setSessionCookie(
  request: FastifyRequest,
  reply: FastifyReply,
  token: string,
  maxAgeSeconds: number,
): void {
  const secure = request.protocol === 'https';
  reply.setCookie(secure ? SECURE_SESSION_COOKIE : SESSION_COOKIE, token, {
    path: '/',
    httpOnly: true,
    sameSite: 'lax',
    secure,
    maxAge: maxAgeSeconds,
  });
}

/** Clears the session cookie; over https both names (a cookie set over http before may still be there). */
export function clearSessionCookie(request: FastifyRequest, reply: FastifyReply): void {
  if (request.protocol === 'https') reply.clearCookie(SECURE_SESSION_COOKIE, { path: '/', secure: true });
  reply.clearCookie(SESSION_COOKIE, { path: '/' });
}

/** The session token a request's cookies carry, under either name (the `__Host-` one first). */
export function sessionCookieOf(request: FastifyRequest): string | undefined {
  return request.cookies?.[SECURE_SESSION_COOKIE] || request.cookies?.[SESSION_COOKIE] || undefined;
}
