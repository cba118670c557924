/**
 * The apiserver's label selector (k8s.io/apimachinery/pkg/labels, `labels.Parse`, as in v1.20): the same
 * lexer, grammar, key and value validation, and matching, so a selector the apiserver takes is taken
 * here with the same meaning, and one it refuses is refused here with the same message.
 *
 * Grammar: requirements separated by `,` (AND); each is `k`, `!k`, `k=v`, `k==v`, `k!=v`, `k in (a,b)`,
 * `k notin (a,b)`, `k>N` or `k<N`. Whitespace (space, tab, CR, LF) separates tokens and is otherwise
 * ignored. An empty selector matches everything.
 */

export type LabelOperator = 'exists' | '!' | '=' | '==' | '!=' | 'in' | 'notin' | 'gt' | 'lt';

export interface LabelRequirement {
  readonly key: string;
  readonly operator: LabelOperator;
  /** Sorted and without duplicates, as the apiserver keeps them. */
  readonly values: readonly string[];
}

export interface LabelSelector {
  /** Sorted by key; all must match (an empty list matches everything). */
  readonly requirements: readonly LabelRequirement[];
}

/** A selector the apiserver would refuse; the message is the apiserver's, fit for a 400. */
export class LabelSelectorError extends Error {
  override readonly name = 'LabelSelectorError';
}

// ---- lexer (labels.Lexer) ----

const enum Tok {
  Error,
  End,
  ClosedPar,
  Comma,
  DoesNotExist,
  DoubleEquals,
  Equals,
  GreaterThan,
  Identifier,
  In,
  LessThan,
  NotEquals,
  NotIn,
  OpenPar,
}

const literalTokens = new Map<string, Tok>([
  [')', Tok.ClosedPar],
  [',', Tok.Comma],
  ['!', Tok.DoesNotExist],
  ['==', Tok.DoubleEquals],
  ['=', Tok.Equals],
  ['>', Tok.GreaterThan],
  ['in', Tok.In],
  ['<', Tok.LessThan],
  ['!=', Tok.NotEquals],
  ['notin', Tok.NotIn],
  ['(', Tok.OpenPar],
]);

interface Scanned {
  tok: Tok;
  lit: string;
}

const isWhitespace = (ch: string) => ch === ' ' || ch === '\t' || ch === '\r' || ch === '\n';
const isSpecial = (ch: string) =>
  ch === '=' || ch === '!' || ch === '(' || ch === ')' || ch === ',' || ch === '>' || ch === '<';

function scan(text: string): Scanned[] {
  // As in Go, a NUL ends the input (the lexer reads 0 as its end).
  const nul = text.indexOf('\0');
  const s = nul === -1 ? text : text.slice(0, nul);
  const items: Scanned[] = [];
  let pos = 0;
  for (;;) {
    while (pos < s.length && isWhitespace(s[pos])) pos++;
    if (pos >= s.length) {
      items.push({ tok: Tok.End, lit: '' });
      return items;
    }
    if (isSpecial(s[pos])) {
      // Longest run of special symbols that is a token, one symbol of look-ahead (`!=`, `==`).
      let buffer = '';
      let last: Scanned | undefined;
      while (pos < s.length && isSpecial(s[pos])) {
        buffer += s[pos];
        const tok = literalTokens.get(buffer);
        if (tok !== undefined) {
          last = { tok, lit: buffer };
        } else if (last) {
          break;
        }
        pos++;
      }
      items.push(last ?? { tok: Tok.Error, lit: `error expected: keyword found '${buffer}'` });
    } else {
      const start = pos;
      while (pos < s.length && !isSpecial(s[pos]) && !isWhitespace(s[pos])) pos++;
      const lit = s.slice(start, pos);
      items.push({ tok: literalTokens.get(lit) ?? Tok.Identifier, lit });
    }
  }
}

// ---- validation (k8s.io/apimachinery/pkg/util/validation) ----

const qualifiedNameFmt = '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]';
const qualifiedName = new RegExp(`^${qualifiedNameFmt}$`);
const qualifiedNameMaxLength = 63;
const labelValue = new RegExp(`^(${qualifiedNameFmt})?$`);
const labelValueMaxLength = 63;
const dns1123Label = '[a-z0-9]([-a-z0-9]*[a-z0-9])?';
const dns1123Subdomain = new RegExp(`^${dns1123Label}(\\.${dns1123Label})*$`);
const dns1123SubdomainMaxLength = 253;

function qualifiedNameErrors(value: string): string[] {
  const errors: string[] = [];
  const parts = value.split('/');
  let name: string;
  if (parts.length === 1) {
    name = parts[0];
  } else if (parts.length === 2) {
    const prefix = parts[0];
    name = parts[1];
    if (prefix.length === 0) {
      errors.push('prefix part must be non-empty');
    } else {
      for (const msg of dns1123SubdomainErrors(prefix)) errors.push(`prefix part ${msg}`);
    }
  } else {
    return [
      "a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and end with " +
        "an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is " +
        `'${qualifiedNameFmt}') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')`,
    ];
  }
  if (name.length === 0) {
    errors.push('name part must be non-empty');
  } else if (name.length > qualifiedNameMaxLength) {
    errors.push(`name part must be no more than ${qualifiedNameMaxLength} characters`);
  }
  if (!qualifiedName.test(name)) {
    errors.push(
      "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an " +
        "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is " +
        `'${qualifiedNameFmt}')`,
    );
  }
  return errors;
}

function dns1123SubdomainErrors(value: string): string[] {
  const errors: string[] = [];
  if (value.length > dns1123SubdomainMaxLength) {
    errors.push(`must be no more than ${dns1123SubdomainMaxLength} characters`);
  }
  if (!dns1123Subdomain.test(value)) {
    errors.push(
      "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and " +
        "end with an alphanumeric character (e.g. 'example.com', regex used for validation is " +
        `'${dns1123Label}(\\.${dns1123Label})*')`,
    );
  }
  return errors;
}

function labelValueErrors(value: string): string[] {
  const errors: string[] = [];
  if (value.length > labelValueMaxLength) {
    errors.push(`must be no more than ${labelValueMaxLength} characters`);
  }
  if (!labelValue.test(value)) {
    errors.push(
      "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must " +
        "start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used " +
        `for validation is '(${qualifiedNameFmt})?')`,
    );
  }
  return errors;
}

/** Close to Go's %q for the ASCII a selector can hold. */
const goQuote = (s: string) => JSON.stringify(s);

function validateKey(key: string): void {
  const errors = qualifiedNameErrors(key);
  if (errors.length > 0) throw new LabelSelectorError(`invalid label key ${goQuote(key)}: ${errors.join('; ')}`);
}

const int64Min = -(2n ** 63n);
const int64Max = 2n ** 63n - 1n;

/** Go's strconv.ParseInt(s, 10, 64): an optional sign and decimal digits, within int64. */
function parseInt64(s: string): bigint | undefined {
  if (!/^[+-]?[0-9]+$/.test(s)) return undefined;
  const n = BigInt(s);
  return n < int64Min || n > int64Max ? undefined : n;
}

/** labels.NewRequirement: the checks every requirement passes, in the apiserver's order. */
function newRequirement(key: string, operator: LabelOperator, values: string[]): LabelRequirement {
  validateKey(key);
  switch (operator) {
    case 'in':
    case 'notin':
      if (values.length === 0) throw new LabelSelectorError("for 'in', 'notin' operators, values set can't be empty");
      break;
    case '=':
    case '==':
    case '!=':
      if (values.length !== 1) throw new LabelSelectorError('exact-match compatibility requires one single value');
      break;
    case 'exists':
    case '!':
      if (values.length !== 0) throw new LabelSelectorError('values set must be empty for exists and does not exist');
      break;
    case 'gt':
    case 'lt':
      if (values.length !== 1) {
        throw new LabelSelectorError("for 'Gt', 'Lt' operators, exactly one value is required");
      }
      if (parseInt64(values[0]) === undefined) {
        throw new LabelSelectorError("for 'Gt', 'Lt' operators, the value must be an integer");
      }
      break;
  }
  for (const value of values) {
    const errors = labelValueErrors(value);
    if (errors.length > 0) {
      throw new LabelSelectorError(
        `invalid label value: ${goQuote(value)}: at key: ${goQuote(key)}: ${errors.join('; ')}`,
      );
    }
  }
  return { key, operator, values };
}

// ---- parser (labels.Parser) ----

const enum Context {
  KeyAndOperator,
  Values,
}

class Parser {
  private position = 0;

  constructor(private readonly items: Scanned[]) {}

  lookahead(context: Context): Scanned {
    return this.inContext(this.items[this.position], context);
  }

  consume(context: Context): Scanned {
    return this.inContext(this.items[this.position++], context);
  }

  /** In a value position `in` and `notin` are plain identifiers. */
  private inContext(item: Scanned, context: Context): Scanned {
    if (context === Context.Values && (item.tok === Tok.In || item.tok === Tok.NotIn)) {
      return { tok: Tok.Identifier, lit: item.lit };
    }
    return item;
  }

  parse(): LabelRequirement[] {
    const requirements: LabelRequirement[] = [];
    for (;;) {
      const { tok, lit } = this.lookahead(Context.Values);
      switch (tok) {
        case Tok.Identifier:
        case Tok.DoesNotExist: {
          try {
            requirements.push(this.parseRequirement());
          } catch (error) {
            throw new LabelSelectorError(`unable to parse requirement: ${(error as Error).message}`);
          }
          const next = this.consume(Context.Values);
          if (next.tok === Tok.End) return requirements;
          if (next.tok !== Tok.Comma)
            throw new LabelSelectorError(`found '${next.lit}', expected: ',' or 'end of string'`);
          const after = this.lookahead(Context.Values);
          if (after.tok !== Tok.Identifier && after.tok !== Tok.DoesNotExist) {
            throw new LabelSelectorError(`found '${after.lit}', expected: identifier after ','`);
          }
          break;
        }
        case Tok.End:
          return requirements;
        default:
          throw new LabelSelectorError(`found '${lit}', expected: !, identifier, or 'end of string'`);
      }
    }
  }

  private parseRequirement(): LabelRequirement {
    const { key, operator: inferred } = this.parseKeyAndInferOperator();
    if (inferred) return newRequirement(key, inferred, []);
    const operator = this.parseOperator();
    const values = operator === 'in' || operator === 'notin' ? this.parseValues() : this.parseExactValue();
    return newRequirement(key, operator, [...values].sort());
  }

  private parseKeyAndInferOperator(): { key: string; operator?: LabelOperator } {
    let operator: LabelOperator | undefined;
    let item = this.consume(Context.Values);
    if (item.tok === Tok.DoesNotExist) {
      operator = '!';
      item = this.consume(Context.Values);
    }
    if (item.tok !== Tok.Identifier) throw new LabelSelectorError(`found '${item.lit}', expected: identifier`);
    validateKey(item.lit);
    const next = this.lookahead(Context.Values).tok;
    if ((next === Tok.End || next === Tok.Comma) && operator === undefined) operator = 'exists';
    return { key: item.lit, operator };
  }

  private parseOperator(): LabelOperator {
    const { tok, lit } = this.consume(Context.KeyAndOperator);
    switch (tok) {
      case Tok.In:
        return 'in';
      case Tok.Equals:
        return '=';
      case Tok.DoubleEquals:
        return '==';
      case Tok.GreaterThan:
        return 'gt';
      case Tok.LessThan:
        return 'lt';
      case Tok.NotIn:
        return 'notin';
      case Tok.NotEquals:
        return '!=';
      default:
        throw new LabelSelectorError(`found '${lit}', expected: '=', '!=', '==', 'in', notin'`);
    }
  }

  private parseValues(): Set<string> {
    const open = this.consume(Context.Values);
    if (open.tok !== Tok.OpenPar) throw new LabelSelectorError(`found '${open.lit}' expected: '('`);
    const { tok, lit } = this.lookahead(Context.Values);
    switch (tok) {
      case Tok.Identifier:
      case Tok.Comma: {
        const values = this.parseIdentifiersList();
        if (this.consume(Context.Values).tok !== Tok.ClosedPar) {
          throw new LabelSelectorError(`found '${lit}', expected: ')'`);
        }
        return values;
      }
      case Tok.ClosedPar:
        this.consume(Context.Values);
        return new Set(['']);
      default:
        throw new LabelSelectorError(`found '${lit}', expected: ',', ')' or identifier`);
    }
  }

  private parseIdentifiersList(): Set<string> {
    const values = new Set<string>();
    for (;;) {
      const { tok, lit } = this.consume(Context.Values);
      if (tok === Tok.Identifier) {
        values.add(lit);
        const next = this.lookahead(Context.Values);
        if (next.tok === Tok.Comma) continue;
        if (next.tok === Tok.ClosedPar) return values;
        throw new LabelSelectorError(`found '${next.lit}', expected: ',' or ')'`);
      } else if (tok === Tok.Comma) {
        if (values.size === 0) values.add(''); // "(,"
        const next = this.lookahead(Context.Values).tok;
        if (next === Tok.ClosedPar) {
          values.add(''); // ",)"
          return values;
        }
        if (next === Tok.Comma) {
          this.consume(Context.Values);
          values.add(''); // ",,"
        }
      } else {
        throw new LabelSelectorError(`found '${lit}', expected: ',', or identifier`);
      }
    }
  }

  private parseExactValue(): Set<string> {
    const next = this.lookahead(Context.Values).tok;
    if (next === Tok.End || next === Tok.Comma) return new Set(['']);
    const { tok, lit } = this.consume(Context.Values);
    if (tok === Tok.Identifier) return new Set([lit]);
    throw new LabelSelectorError(`found '${lit}', expected: identifier`);
  }
}

/** Parses a selector as the apiserver's `labels.Parse`; throws {@link LabelSelectorError} where it would fail. */
export function parseLabelSelector(text: string): LabelSelector {
  const requirements = new Parser(scan(text)).parse();
  requirements.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  return { requirements };
}

/** Whether labels (absent: none) satisfy every requirement, as the apiserver's `Selector.Matches`. */
export function matchesLabels(sel: LabelSelector, labels: Record<string, string> | undefined): boolean {
  for (const r of sel.requirements) {
    if (!requirementMatches(r, labels)) return false;
  }
  return true;
}

function requirementMatches(r: LabelRequirement, labels: Record<string, string> | undefined): boolean {
  const has = labels !== undefined && Object.prototype.hasOwnProperty.call(labels, r.key);
  const value = has ? labels[r.key] : undefined;
  switch (r.operator) {
    case 'in':
    case '=':
    case '==':
      return value !== undefined && r.values.includes(value);
    case 'notin':
    case '!=':
      return value === undefined || !r.values.includes(value);
    case 'exists':
      return has;
    case '!':
      return !has;
    case 'gt':
    case 'lt': {
      if (value === undefined) return false;
      const have = parseInt64(value);
      if (have === undefined) return false;
      const want = BigInt(r.values[0]);
      return r.operator === 'gt' ? have > want : have < want;
    }
  }
}
