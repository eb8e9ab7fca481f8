import { describe, expect, it } from 'vitest';
import { countTextTokens, estimateMessageTokens } from '../../src/tokens.js';

function timed<T>(fn: () => T): { value: T; ms: number } {
  const started = performance.now();
  const value = fn();
  return { value, ms: performance.now() - started };
}

describe('token estimation is linear, and no call stalls the event loop', () => {
  it.each([
    ["128K '='", '='.repeat(128 * 1024), 2048],
    ["128K '中'", '中'.repeat(128 * 1024), 128 * 1024],
  ])('%s is counted right in well under a second (it took 20 s / 44 s)', (_, text, expected) => {
    const { value, ms } = timed(() => countTextTokens(text));
    expect(value).toBe(expected);
    expect(ms).toBeLessThan(1_000);
  });

  it('a 64 KiB tool result of one repeated character is estimated without a stall', () => {
    const { value, ms } = timed(() =>
      estimateMessageTokens({ role: 'tool', toolCallId: 'c1', toolName: 'read_file', content: '='.repeat(64 * 1024) }),
    );
    expect(value).toBe(3 + 1024);
    expect(ms).toBeLessThan(1_000);
  });

  it('50 MB of text is estimated at all (it did not finish in 10 minutes)', () => {
    const { value, ms } = timed(() => countTextTokens('a'.repeat(50_000_000)));
    expect(value).toBeGreaterThan(1_000_000);
    expect(ms).toBeLessThan(2_000);
  });

  it('100K random CJK characters, the tokenizer’s slowest text, are estimated in bounded time', () => {
    let text = '';
    for (let i = 0; i < 100_000; i++) text += String.fromCharCode(0x4e00 + ((i * 7919) % 20_000));
    const { value, ms } = timed(() => countTextTokens(text));
    expect(value).toBeGreaterThan(100_000);
    expect(ms).toBeLessThan(1_000);
  });
});
