// The tool-call environment's calculator: a small recursive-descent evaluator for arithmetic
// expressions (numbers, + - * / ^ or **, parentheses, unary minus). No eval, no names, no
// functions: the model's text is parsed, never run. Grammar, lowest precedence first:
//   expr  = term (('+' | '-') term)*
//   term  = unary (('*' | '/') unary)*
//   unary = ('-' | '+') unary | power           -2^2 is -(2^2), as in mathematics
//   power = atom (('^' | '**') unary)?          right-associative: 2^3^2 = 2^9
//   atom  = number | '(' expr ')'

export const MAX_EXPRESSION_LENGTH = 500;
const MAX_DEPTH = 64;

export class CalculatorError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'CalculatorError';
  }
}

type Token = { kind: 'number'; value: number; at: number } | { kind: 'op'; value: string; at: number };

function tokenize(text: string): Token[] {
  const tokens: Token[] = [];
  let i = 0;
  while (i < text.length) {
    const c = text[i]!;
    if (/\s/.test(c)) {
      i++;
      continue;
    }
    const number = /^(\d+\.?\d*|\.\d+)(e[+-]?\d+)?/i.exec(text.slice(i));
    if (number) {
      tokens.push({ kind: 'number', value: Number(number[0]), at: i });
      i += number[0].length;
      continue;
    }
    if (text.startsWith('**', i)) {
      tokens.push({ kind: 'op', value: '^', at: i });
      i += 2;
      continue;
    }
    if ('+-*/^()'.includes(c)) {
      tokens.push({ kind: 'op', value: c, at: i });
      i++;
      continue;
    }
    const hint = c === ',' ? ' (write 1000, not 1,000)' : '';
    throw new CalculatorError(`unexpected "${c}" at position ${i + 1}${hint}; allowed: numbers, + - * / ^ ( )`);
  }
  return tokens;
}

/** The value of an arithmetic expression; CalculatorError says what is wrong with a bad one. */
export function evaluate(expression: string): number {
  if (expression.length > MAX_EXPRESSION_LENGTH)
    throw new CalculatorError(`the expression is longer than ${MAX_EXPRESSION_LENGTH} characters`);
  const tokens = tokenize(expression);
  if (tokens.length === 0) throw new CalculatorError('the expression is empty');
  let pos = 0;
  let depth = 0;
  const peek = () => tokens[pos];
  const isOp = (value: string) => {
    const t = peek();
    return t?.kind === 'op' && t.value === value;
  };
  const where = () => {
    const t = peek();
    return t === undefined ? 'at the end' : `at position ${t.at + 1}`;
  };

  const expr = (): number => {
    let value = term();
    while (isOp('+') || isOp('-')) {
      const op = (tokens[pos++] as Token).value;
      const right = term();
      value = op === '+' ? value + right : value - right;
    }
    return value;
  };
  const term = (): number => {
    let value = unary();
    while (isOp('*') || isOp('/')) {
      const op = (tokens[pos++] as Token).value;
      const right = unary();
      if (op === '/' && right === 0) throw new CalculatorError('division by zero');
      value = op === '*' ? value * right : value / right;
    }
    return value;
  };
  const unary = (): number => {
    if (isOp('-') || isOp('+')) {
      const negative = (tokens[pos++] as Token).value === '-';
      const value = nested(unary);
      return negative ? -value : value;
    }
    return power();
  };
  const power = (): number => {
    const base = atom();
    if (!isOp('^')) return base;
    pos++;
    return base ** nested(unary);
  };
  const atom = (): number => {
    const t = peek();
    if (t?.kind === 'number') {
      pos++;
      return t.value;
    }
    if (isOp('(')) {
      pos++;
      const value = nested(expr);
      if (!isOp(')')) throw new CalculatorError(`missing ")" ${where()}`);
      pos++;
      return value;
    }
    throw new CalculatorError(`expected a number or "(" ${where()}`);
  };
  const nested = (f: () => number): number => {
    if (++depth > MAX_DEPTH) throw new CalculatorError(`the expression nests deeper than ${MAX_DEPTH} levels`);
    const value = f();
    depth--;
    return value;
  };

  const value = expr();
  if (pos < tokens.length) throw new CalculatorError(`unexpected "${(tokens[pos] as Token).value}" ${where()}`);
  if (!Number.isFinite(value)) throw new CalculatorError('the result is not a finite number');
  return value;
}

/** A result as the tool returns it: at most 12 significant digits, no trailing zeros, no "-0". */
export function formatNumber(value: number): string {
  if (Object.is(value, -0) || value === 0) return '0';
  const text = Number(value.toPrecision(12)).toString();
  return text;
}
