/**
 * The syntax of the apiserver's field selectors (k8s.io/apimachinery/pkg/fields `ParseSelector`, v1.20):
 * terms `field=value`, `field==value`, `field!=value` joined by `,`; `\`, `,` and `=` escaped by a
 * backslash in values. Which fields a type may be selected by is the caller's business.
 */

export interface FieldTerm {
  field: string;
  value: string;
  /** `!=` */
  negated: boolean;
}

export class FieldSelectorError extends Error {
  override readonly name = 'FieldSelectorError';
}

/** The terms of a selector in the apiserver's order (sorted by their bytes as written), or FieldSelectorError. */
export function parseFieldTerms(text: string): FieldTerm[] {
  const terms: FieldTerm[] = [];
  const parts = splitTerms(text).sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b)));
  for (const part of parts) {
    if (part === '') continue;
    const split = splitTerm(part);
    if (!split) throw new FieldSelectorError(`invalid selector: '${text}'; can't understand '${part}'`);
    const [field, op, raw] = split;
    terms.push({ field, value: unescapeValue(raw), negated: op === '!=' });
  }
  return terms;
}

/** The value a selector requires `field` to equal (fields.Selector.RequiresExactMatch): its first `=`/`==` term. */
export function requiredValue(terms: readonly FieldTerm[], field: string): string | undefined {
  return terms.find((term) => !term.negated && term.field === field)?.value;
}

/** Splits on commas not escaped by a backslash (the backslashes stay, for unescapeValue). */
function splitTerms(text: string): string[] {
  if (text === '') return [];
  const terms: string[] = [];
  let start = 0;
  let escaped = false;
  for (let i = 0; i < text.length; i++) {
    if (escaped) escaped = false;
    else if (text[i] === '\\') escaped = true;
    else if (text[i] === ',') {
      terms.push(text.slice(start, i));
      start = i + 1;
    }
  }
  terms.push(text.slice(start));
  return terms;
}

/** The first operator (`!=`, `==`, `=`) splits a term: the field knows no escapes. */
function splitTerm(term: string): [string, string, string] | undefined {
  for (let i = 0; i < term.length; i++) {
    for (const op of ['!=', '==', '=']) {
      if (term.startsWith(op, i)) return [term.slice(0, i), op, term.slice(i + op.length)];
    }
  }
  return undefined;
}

function unescapeValue(value: string): string {
  if (!/[\\,=]/.test(value)) return value;
  let out = '';
  let slash = false;
  for (const c of value) {
    if (slash) {
      if (c !== '\\' && c !== ',' && c !== '=') {
        throw new FieldSelectorError(`invalid field selector: invalid escape sequence: \\${c}`);
      }
      out += c;
      slash = false;
    } else if (c === '\\') slash = true;
    else if (c === ',' || c === '=') {
      throw new FieldSelectorError(`invalid field selector: unescaped character in value: ${c}`);
    } else out += c;
  }
  if (slash) throw new FieldSelectorError('invalid field selector: invalid escape sequence: \\');
  return out;
}
