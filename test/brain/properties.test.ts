/**
 * The brain's properties at a size for `test:fast`: the feed sequences of feed-properties.ts
 * (properties.slow.test.ts runs them at full size), and coherentCut against its reference.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { coherentCut } from '../../machines/loop.machine.js';
import type { Message } from '../../src/schemas.js';
import { asst, call, refCoherentCut, sys, toolMsg, user } from '../support/brain.js';
import { describeFeedSequences } from './feed-properties.js';

describeFeedSequences({ plain: 30, inject: 15, reuse: 30 });

// ------------------------------------------------------------------ coherentCut against the reference

/**
 * Conversations as a provider could see them mid-flight: every call id is unique and every tool result
 * comes after its call (or answers no call at all); results may be missing, late or interleaved.
 */
type Tok = { kind: 'u' | 's' | 'a' } | { kind: 'call'; n: number } | { kind: 'result'; pick: number };
const tokArb: fc.Arbitrary<Tok> = fc.oneof(
  fc.constantFrom<Tok>({ kind: 'u' }, { kind: 's' }, { kind: 'a' }),
  fc.integer({ min: 1, max: 3 }).map((n): Tok => ({ kind: 'call', n })),
  fc.nat(20).map((pick): Tok => ({ kind: 'result', pick })),
);
const conversationArb: fc.Arbitrary<Message[]> = fc.array(tokArb, { maxLength: 16 }).map((toks) => {
  const out: Message[] = [];
  const open: string[] = [];
  let n = 0;
  for (const t of toks) {
    if (t.kind === 'u') out.push(user('u'));
    else if (t.kind === 's') out.push(sys('s'));
    else if (t.kind === 'a') out.push(asst('a'));
    else if (t.kind === 'call') {
      const ids = Array.from({ length: t.n }, () => `c${n++}`);
      open.push(...ids);
      out.push(asst('', ids.map((id) => call(id))));
    } else if (t.kind !== 'result') throw new Error('unreachable');
    else if (open.length === 0 || t.pick === 20) out.push(toolMsg('orphan'));
    else out.push(toolMsg(open.splice(t.pick % open.length, 1)[0]!));
  }
  return out;
});

describe('coherentCut', () => {
  it('equals the reference: the largest coherent prefix within the limit', () => {
    fc.assert(
      fc.property(conversationArb, fc.nat(20), (msgs, limit) => {
        const cut = coherentCut(msgs, limit);
        expect(cut).toBe(refCoherentCut(msgs, limit));
        expect(cut).toBeLessThanOrEqual(Math.min(limit, msgs.length));
        expect(coherentCut(msgs, Infinity)).toBe(refCoherentCut(msgs, Infinity));
      }),
      { numRuns: 500 },
    );
  });

  it('is monotone in the limit', () => {
    fc.assert(
      fc.property(conversationArb, fc.nat(20), fc.nat(20), (msgs, a, b) => {
        const [lo, hi] = a <= b ? [a, b] : [b, a];
        expect(coherentCut(msgs, lo)).toBeLessThanOrEqual(coherentCut(msgs, hi));
      }),
      { numRuns: 300 },
    );
  });
});
