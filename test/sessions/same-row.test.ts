/**
 * A durable session skips the write of a step whose row and log did not change, comparing the
 * row as data (`sameJson`) instead of serializing it twice per step. "Same" must mean what
 * `JSON.stringify` would write, and anything doubtful counts as a change.
 */
import { describe, expect, it } from 'vitest';
import { sameJson } from '../../src/json-value.js';

describe('sameJson', () => {
  it('is true for equal data whatever the key order, and absent equals undefined', () => {
    expect(sameJson({ a: 1, b: { c: [1, 'x', null, true] } }, { b: { c: [1, 'x', null, true] }, a: 1 })).toBe(true);
    expect(sameJson({ a: 1, gone: undefined }, { a: 1 })).toBe(true);
    expect(sameJson({ a: 1 }, { a: 1, gone: undefined })).toBe(true);
    expect(sameJson([], [])).toBe(true);
  });

  it('sees every change: a value, a key, a length, a type', () => {
    const row = { brain: { value: 'AwaitingModel', context: { turnsTaken: 3, outcome: null } }, runIndex: 1, usage: { inputTokens: 10 } };
    const changes: unknown[] = [
      { ...row, runIndex: 2 },
      { ...row, brain: { ...row.brain, context: { ...row.brain.context, turnsTaken: 4 } } },
      { ...row, brain: { ...row.brain, context: { ...row.brain.context, outcome: { type: 'Completed' } } } },
      { ...row, extra: 0 },
      { ...row, usage: [10] },
      { ...row, usage: { inputTokens: '10' } },
    ];
    for (const changed of changes) {
      expect(sameJson(row, changed)).toBe(false);
      expect(sameJson(changed, row)).toBe(false);
    }
    expect(sameJson([1, 2], [1, 2, 3])).toBe(false);
    expect(sameJson({ a: null }, { a: {} })).toBe(false);
  });

  it('counts what JSON would not keep as it is as different (never skips a change)', () => {
    expect(sameJson(Number.NaN, Number.NaN)).toBe(false);
    expect(sameJson([undefined], [undefined])).toBe(false);
    expect(sameJson(undefined, undefined)).toBe(false);
  });
});
