// Content negotiation on `Accept` for the few routes that answer in more than one media type.
import { HttpException } from '@nestjs/common';

interface Range {
  type: string;
  subtype: string;
  q: number;
  index: number;
}

/** The media ranges of an `Accept` header (at most 64 of them are read); parameters other than `q` are ignored. */
function rangesOf(accept: string): Range[] {
  const ranges: Range[] = [];
  for (const [index, part] of accept.split(',').slice(0, 64).entries()) {
    const [media, ...params] = part.split(';');
    const [type, subtype] = media.trim().toLowerCase().split('/');
    if (!type || !subtype) continue;
    let q = 1;
    for (const param of params) {
      const [key, value] = param.split('=').map((s) => s.trim());
      if (key.toLowerCase() === 'q') q = Number(value);
    }
    if (Number.isFinite(q) && q >= 0 && q <= 1) ranges.push({ type, subtype, q, index });
  }
  return ranges;
}

/**
 * The media type to answer in, of those `offered` (the first is the default): the one the client rates
 * highest (`q`), a type named outright before one matched by a wildcard, then the client's order, then
 * the order offered. No `Accept` (or an empty one) means the default; null when the client accepts none.
 */
export function negotiate(accept: string | string[] | undefined, offered: readonly string[]): string | null {
  const header = Array.isArray(accept) ? accept.join(',') : (accept ?? '');
  if (header.trim() === '') return offered[0];
  const ranges = rangesOf(header);
  let best: { type: string; q: number; specific: number; index: number } | null = null;
  for (const type of offered) {
    const [main, sub] = type.split('/');
    // The most specific range that matches decides the type's q.
    let match: { q: number; specific: number; index: number } | null = null;
    for (const r of ranges) {
      const specific = r.type === main && r.subtype === sub ? 2 : r.type === main && r.subtype === '*' ? 1 : 0;
      if (specific === 0 && !(r.type === '*' && r.subtype === '*')) continue;
      if (!match || specific > match.specific) match = { q: r.q, specific, index: r.index };
    }
    if (!match || match.q === 0) continue;
    const better =
      !best ||
      match.q > best.q ||
      (match.q === best.q && match.specific > best.specific) ||
      (match.q === best.q && match.specific === best.specific && match.index < best.index);
    if (better) best = { type, ...match };
  }
  return best?.type ?? null;
}

/** 406 naming what the route can answer in. */
export function notAcceptable(offered: readonly string[]): HttpException {
  return new HttpException(
    `Accept names no media type this route answers in: send Accept: ${offered.join(' or ')} (or none, for ${offered[0]})`,
    406,
  );
}
