import { describe, expect, it } from 'vitest';
import { evaluateExpression } from '../../src/tools/arithmetic.js';
import { ExpressionError } from '../../src/tools/errors.js';

describe('evaluateExpression', () => {
  it.each([
    ['1 + 2 * 3', 7],
    ['(1 + 2) * 3', 9],
    ['10 - 4 - 3', 3],
    ['100 / 10 / 5', 2],
    ['7 % 3', 1],
    ['-7 % 3', -1],
    ['2 ^ 10', 1024],
    ['2 ** 10', 1024],
    ['2 ^ 3 ^ 2', 512],
    ['-2 ^ 2', -4],
    ['(-2) ^ 2', 4],
    ['2 ^ -1', 0.5],
    ['--3', 3],
    ['-(4 - 10)', 6],
    ['+5', 5],
    ['3 * -2', -6],
    ['1.5 + .5 + 4.', 6],
    ['1e3 + 2.5E-1', 1000.25],
    ['0.1 + 0.2', 0.3],
    ['  ( ( 42 ) )  ', 42],
    ['(1200 + 345) / 3', 515],
    ['2 * 3 ^ 2', 18],
  ])('%s = %s', (expression, expected) => {
    expect(evaluateExpression(expression)).toBe(expected);
  });

  it.each([
    ['', 'unexpected end of expression'],
    ['1 +', 'unexpected end of expression'],
    ['(1 + 2', 'missing ")" at position 6'],
    ['1 + 2)', 'unexpected ")" at position 5'],
    ['2 (3)', 'unexpected "(" at position 2'],
    ['1 / 0', 'division by zero at position 2'],
    ['5 % (2 - 2)', 'remainder by zero at position 2'],
    ['10 ^ 400', 'the result is not a finite number'],
    ['(-8) ^ 0.5', 'the result is not a finite number'],
    ['Math.PI', 'unexpected "M" at position 0'],
    ['process.exit()', 'unexpected "p" at position 0'],
    ['1 +* 2', 'unexpected "*" at position 3'],
  ])('%j is refused: %s', (expression, message) => {
    let caught: unknown;
    try {
      evaluateExpression(expression);
    } catch (error) {
      caught = error;
    }
    expect(caught).toBeInstanceOf(ExpressionError);
    expect((caught as Error).message).toBe(message);
  });
});
