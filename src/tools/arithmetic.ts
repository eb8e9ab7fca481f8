import { ExpressionError } from './errors.js';

/** Numbers: `12`, `3.5`, `.5`, `4.`, `1e-3`. Sticky, so it matches exactly at the cursor. */
const NUMBER = /(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?/y;

/**
 * Evaluates an arithmetic expression: + - * / % ^ (also `**`, which models trained on Python
 * write), parentheses, unary minus and plus, decimals. A hand-written recursive-descent parser, so
 * no text ever reaches eval or Function. Precedence as in mathematics: `^` binds tighter than unary
 * minus (`-2^2` is -4) and is right-associative (`2^3^2` is 512); `%` is the remainder, with the
 * sign of the dividend, as in JavaScript.
 *
 * Throws ExpressionError for a syntax error (with its position), a division by zero, or a result
 * that is not a finite number.
 */
export function evaluateExpression(source: string): number {
  let pos = 0;

  const peek = (): string | undefined => {
    while (pos < source.length && /\s/.test(source[pos]!)) pos++;
    return source[pos];
  };
  const unexpected = (): ExpressionError => {
    const found = peek();
    return found === undefined
      ? new ExpressionError('unexpected end of expression')
      : new ExpressionError(`unexpected "${found}"`, pos);
  };

  function sum(): number {
    let value = product();
    for (;;) {
      const op = peek();
      if (op !== '+' && op !== '-') return value;
      pos++;
      const right = product();
      value = op === '+' ? value + right : value - right;
    }
  }

  function product(): number {
    let value = unary();
    for (;;) {
      const op = peek();
      if (op !== '*' && op !== '/' && op !== '%') return value;
      const at = pos++;
      const right = unary();
      if (op !== '*' && right === 0) throw new ExpressionError(op === '/' ? 'division by zero' : 'remainder by zero', at);
      value = op === '*' ? value * right : op === '/' ? value / right : value % right;
    }
  }

  function unary(): number {
    const op = peek();
    if (op === '-' || op === '+') {
      pos++;
      const operand = unary();
      return op === '-' ? -operand : operand;
    }
    return power();
  }

  function power(): number {
    const base = primary();
    const op = peek();
    if (op === '^' || source.startsWith('**', pos)) {
      pos += op === '^' ? 1 : 2;
      // The exponent may carry its own sign: 2^-1.
      return base ** unary();
    }
    return base;
  }

  function primary(): number {
    const next = peek();
    if (next === '(') {
      pos++;
      const value = sum();
      if (peek() !== ')') throw peek() === undefined ? new ExpressionError('missing ")"', pos) : unexpected();
      pos++;
      return value;
    }
    NUMBER.lastIndex = pos;
    const match = NUMBER.exec(source);
    if (!match) throw unexpected();
    pos += match[0].length;
    return Number(match[0]);
  }

  const value = sum();
  if (peek() !== undefined) throw unexpected();
  if (!Number.isFinite(value)) throw new ExpressionError('the result is not a finite number');
  // 15 significant digits drop binary noise (0.1 + 0.2 gives 0.3, not 0.30000000000000004).
  return Number(value.toPrecision(15));
}
