import { describe, expect, it } from 'vitest';
import { countTextTokens, estimateMessageTokens } from '../src/tokens.js';

/**
 * The quadratic counting these tests guard against took 20 to 44 s on these inputs; linear
 * counting takes milliseconds. The bound sits far from both, so a shared, loaded machine (a
 * 128 KiB count once took 1.3 s in CI) does not fail it and the old bug still would.
 */
const STALL_MS = 5_000;

function timed<T>(fn: () => T): { value: T; ms: number } {
  const started = performance.now();
  const value = fn();
  return { value, ms: performance.now() - started };
}

describe('token estimation is linear, and no call stalls the event loop', () => {
  it.each([
    ["128K '='", '='.repeat(128 * 1024), 2048],
    ["128K '中'", '中'.repeat(128 * 1024), 128 * 1024],
  ])('%s is counted right without a stall (it took 20 s / 44 s)', (_, text, expected) => {
    const { value, ms } = timed(() => countTextTokens(text));
    expect(value).toBe(expected);
    expect(ms).toBeLessThan(STALL_MS);
  });

  it('a 64 KiB tool result of one repeated character is estimated without a stall', () => {
    const { value, ms } = timed(() =>
      estimateMessageTokens({ role: 'tool', toolCallId: 'c1', toolName: 'read_file', content: '='.repeat(64 * 1024) }),
    );
    expect(value).toBe(3 + 1024);
    expect(ms).toBeLessThan(STALL_MS);
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
    expect(ms).toBeLessThan(STALL_MS);
  });
});
