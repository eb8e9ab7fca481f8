/**
 * A stored text cut short for `sessions show` (a tool result, the last outcome), in process: the
 * cut never falls inside an escape it wrote (`\x9b` shown as `\x9…`) or between the two halves
 * of an emoji (a lone surrogate, then shown as `\ud83d`).
 */
import { describe, expect, it } from 'vitest';
import { preview } from '../../src/cli/transcript.js';

describe('a preview cut at its length', () => {
  it.each([
    ['an escape', `${'a'.repeat(8)}\u009b2J`, 10, `${'a'.repeat(8)}… [11 chars]`],
    ['a \\u escape', `${'a'.repeat(7)}\u202egnp`, 10, `${'a'.repeat(7)}… [11 chars]`],
    ['an emoji', `${'a'.repeat(9)}😀 and more`, 10, `${'a'.repeat(9)}… [20 chars]`],
  ])('is not cut inside %s', (_, text, max, shown) => {
    expect(preview(text, max)).toBe(shown);
  });

  it('keeps a whole escape that fits', () => {
    expect(preview(`ab\u001bcdefghijklmnop`, 8)).toBe('ab\\x1bcd… [17 chars]');
  });
});
