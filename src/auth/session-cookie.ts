import type { FastifyReply, FastifyRequest } from 'fastify';

export const SESSION_COOKIE = 'cas_session';

/** The session cookie every login sets (password or single sign-on): HttpOnly, SameSite=Lax, Secure over https. */
export function setSessionCookie(
  request: FastifyRequest,
  reply: FastifyReply,
  token: string,
  maxAgeSeconds: number,
): void {
  reply.setCookie(SESSION_COOKIE, token, {
    path: '/',
    httpOnly: true,
    sameSite: 'lax',
    secure: request.protocol === 'https',
    maxAge: maxAgeSeconds,
  });
}
