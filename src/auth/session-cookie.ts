export const SESSION_COOKIE = 'cas_session';
