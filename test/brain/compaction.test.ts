/** compactionResult / compactionNoop: the no-progress guard, the deferred latch, the coalescer. */
import { describe, expect, it } from 'vitest';
import { LoopMachine } from '../../src/brain/loop-machine.js';
import { coalesceAdjacentAssistants } from '../../src/brain/conversation.js';
import type { Message } from '../../src/schemas.js';
import {
  ALL_STATES,
  asst,
  call,
  ctx,
  expectIllegal,
  expectInvalid,
  snap,
  sys,
  toolMsg,
  user,
} from '../support/brain.js';

const W = { contextWindow: 1000 } as const;
const OLD: Message[] = [sys(), user('old'), asst('old answer')];
const RUN: Message[] = [user('q'), asst('', [call('c1')]), toolMsg('c1')];

/** AwaitingCompaction with history OLD and pending RUN; tokens 960 (emergency) or 850 (threshold) at window 1000. */
function compacting(reason: 'Emergency' | 'ThresholdExceeded'): LoopMachine {
  const m = new LoopMachine({ history: OLD });
  m.acceptInput(user('q'));
  expect(m.nextStep(W)).toEqual({ type: 'CallLLM', turn: 1 });
  m.modelResponse(asst('', [call('c1')]), 500, ['read']);
  m.toolResults([toolMsg('c1')]);
  m.setContextTokens(reason === 'Emergency' ? 960 : 850);
  expect(m.nextStep(W)).toEqual({ type: 'Compact', reason });
  expect(m.history()).toEqual(OLD);
  expect(m.fullHistory()).toEqual([...OLD, ...RUN]);
  return m;
}

const stalled = {
  type: 'Terminal',
  outcome: { type: 'Failed', error: { type: 'CompactionStalled', message: expect.any(String) } },
};

describe('compactionResult with progress', () => {
  it('replaces history wholesale, clears pending, adopts the estimate, goes to Start', () => {
    const m = compacting('Emergency');
    const compacted = [sys(), user('summary of everything')];
    m.compactionResult(compacted, 960, 300);
    expect(m.state()).toEqual({ type: 'Start' });
    expect(m.history()).toEqual(compacted);
    expect(m.fullHistory()).toEqual(compacted);
    expect(ctx(m).pending).toEqual([]);
    expect(m.contextTokens()).toBe(300);
    expect(ctx(m).compactionReason).toBeNull();
    expect(m.turnsTaken()).toBe(1);
    expect(m.nextStep(W)).toEqual({ type: 'CallLLM', turn: 2 });
  });

  it('works the same for a threshold pass', () => {
    const m = compacting('ThresholdExceeded');
    m.compactionResult([user('summary')], 850, 100);
    expect(m.history()).toEqual([user('summary')]);
    expect(m.fullHistory()).toEqual([user('summary')]);
    expect(m.contextTokens()).toBe(100);
    expect(m.state()).toEqual({ type: 'Start' });
  });

  it('after = before - 1 is progress', () => {
    const m = compacting('Emergency');
    m.compactionResult([user('s')], 960, 959);
    expect(m.state()).toEqual({ type: 'Start' });
    expect(m.history()).toEqual([user('s')]);
  });

  it('is a commit point: the compacted history stays if the run then fails', () => {
    const m = compacting('Emergency');
    m.compactionResult([user('summary')], 960, 100);
    m.fail({ type: 'ModelError', message: 'boom' });
    m.discardPending();
    expect(m.history()).toEqual([user('summary')]);
  });

  it('clears the deferred-compaction latch', () => {
    const m = compacting('ThresholdExceeded');
    m.compactionNoop(850, 850); // stall that still fits: latch
    expect(ctx(m).deferredCompaction).toBe(true);
    m.setContextTokens(960);
    expect(m.nextStep(W)).toEqual({ type: 'Compact', reason: 'Emergency' });
    m.compactionResult([user('summary')], 960, 850);
    expect(ctx(m).deferredCompaction).toBe(false);
    expect(m.nextStep(W)).toEqual({ type: 'Compact', reason: 'ThresholdExceeded' });
  });

  it('rejects a compacted conversation with an unanswered tool call', () => {
    const m = compacting('Emergency');
    expectInvalid(m, 'compactionResult', () => m.compactionResult([user('s'), asst('', [call('z')])], 960, 100));
  });

  it('rejects malformed messages and token counts', () => {
    const m = compacting('Emergency');
    expectInvalid(m, 'compactionResult', () =>
      m.compactionResult([{ role: 'robot', content: 'x' } as unknown as Message], 960, 100),
    );
    expectInvalid(m, 'compactionResult', () => m.compactionResult([user('s')], 960, -5));
  });
});

describe('the adjacent-assistant coalescer on adopted history', () => {
  const adopt = (compacted: Message[]): readonly Message[] => {
    const m = compacting('Emergency');
    m.compactionResult(compacted, 960, 100);
    return m.history();
  };

  it('merges a summary with a tail that opens with an assistant turn, keeping the second one’s tool calls', () => {
    expect(adopt([sys(), asst('summary'), asst('tail', [call('t1')]), toolMsg('t1'), user('go')])).toEqual([
      sys(),
      asst('summary\n\ntail', [call('t1')]),
      toolMsg('t1'),
      user('go'),
    ]);
  });

  it('merges two plain assistant messages into one without tool calls', () => {
    const h = adopt([user('u'), asst('a'), asst('b')]);
    expect(h).toEqual([user('u'), asst('a\n\nb')]);
    expect((h[1] as { toolCalls?: unknown }).toolCalls ?? []).toEqual([]);
  });

  it('skips empty contents when joining', () => {
    expect(adopt([user('u'), asst(''), asst('b')])).toEqual([user('u'), asst('b')]);
    expect(adopt([user('u'), asst('a'), asst('', [call('t')]), toolMsg('t')])).toEqual([
      user('u'),
      asst('a', [call('t')]),
      toolMsg('t'),
    ]);
  });

  it('folds a run of three', () => {
    expect(adopt([asst('a'), asst('b'), asst('c')])).toEqual([asst('a\n\nb\n\nc')]);
  });

  it('does not merge when the first assistant has tool calls', () => {
    const c: Message[] = [asst('a', [call('t')]), toolMsg('t'), asst('b'), asst('', [call('u')]), toolMsg('u')];
    // the first pair is separated by a tool result; only asst('b') + asst('', [u]) merge
    expect(adopt(c)).toEqual([asst('a', [call('t')]), toolMsg('t'), asst('b', [call('u')]), toolMsg('u')]);
  });

  it('does not merge into a first assistant that has tool calls, even when directly adjacent', () => {
    const c: Message[] = [user('u'), asst('a', [call('t')]), asst('b'), toolMsg('t')];
    expect(coalesceAdjacentAssistants(c)).toEqual(c);
    // Such a conversation never reaches the coalescer: a provider refuses a message between a call and its result.
    const m = compacting('Emergency');
    const e = expectInvalid(m, 'compactionResult', () => m.compactionResult(c, 960, 100));
    expect(e.message).toContain("assistant message at position 2 comes between tool call 't' (position 1) and its result");
  });

  it('does not merge assistants separated by another message', () => {
    const c: Message[] = [asst('a'), user('x'), asst('b')];
    expect(adopt(c)).toEqual(c);
  });
});

describe('compactionNoop with progress', () => {
  it('leaves both buffers untouched (pending survives), adopts the estimate, goes to Start', () => {
    const m = compacting('Emergency');
    m.compactionNoop(960, 500);
    expect(m.state()).toEqual({ type: 'Start' });
    expect(m.history()).toEqual(OLD);
    expect(m.fullHistory()).toEqual([...OLD, ...RUN]);
    expect(m.contextTokens()).toBe(500);
    expect(ctx(m).compactionReason).toBeNull();
    expect(m.nextStep(W)).toEqual({ type: 'CallLLM', turn: 2 });
  });
});

describe('the no-progress guard', () => {
  for (const feed of ['compactionResult', 'compactionNoop'] as const) {
    const run = (m: LoopMachine, before: number, after: number, policy?: Parameters<LoopMachine['compactionNoop']>[2]) =>
      feed === 'compactionResult'
        ? m.compactionResult([user('summary')], before, after, policy)
        : m.compactionNoop(before, after, policy);

    describe(feed, () => {
      it('emergency pass with after == before fails with CompactionStalled, buffers untouched', () => {
        const m = compacting('Emergency');
        run(m, 960, 960);
        expect(m.state()).toEqual(stalled);
        expect(m.history()).toEqual(OLD);
        expect(m.fullHistory()).toEqual([...OLD, ...RUN]);
        expect(m.nextStep()).toEqual({ type: 'Done', outcome: stalled.outcome });
      });

      it('emergency pass with after > before fails too, even if it would fit', () => {
        const m = compacting('Emergency');
        run(m, 100, 200);
        expect(m.state()).toEqual(stalled);
        expect(m.history()).toEqual(OLD);
      });

      it('threshold stall that still fits sets the latch, adopts the estimate, serves', () => {
        const m = compacting('ThresholdExceeded');
        run(m, 850, 850);
        expect(m.state()).toEqual({ type: 'Start' });
        expect(ctx(m).deferredCompaction).toBe(true);
        expect(m.contextTokens()).toBe(850);
        expect(m.history()).toEqual(OLD);
        expect(m.fullHistory()).toEqual([...OLD, ...RUN]);
        // the threshold line is now skipped: the model is called
        expect(m.nextStep(W)).toEqual({ type: 'CallLLM', turn: 2 });
      });

      it('threshold stall at 94.9% of the window defers; at exactly 95% it fails', () => {
        const a = compacting('ThresholdExceeded');
        run(a, 900, 949);
        expect(a.state()).toEqual({ type: 'Start' });
        expect(a.contextTokens()).toBe(949);
        expect(ctx(a).deferredCompaction).toBe(true);

        const b = compacting('ThresholdExceeded');
        run(b, 900, 950);
        expect(b.state()).toEqual(stalled);
        expect(b.fullHistory()).toEqual([...OLD, ...RUN]);
      });

      it('uses the policy passed to the latest nextStep by default (window 1000, not 200000)', () => {
        // with the default window 200000, 960 tokens would still fit and defer
        const m = compacting('ThresholdExceeded');
        run(m, 900, 960);
        expect(m.state()).toEqual(stalled);
      });

      it('an explicit policy wins', () => {
        const m = compacting('ThresholdExceeded');
        run(m, 900, 960, { contextWindow: 10_000 });
        expect(m.state()).toEqual({ type: 'Start' });
        expect(ctx(m).deferredCompaction).toBe(true);
      });

      it('window 0 always defers a threshold stall', () => {
        const m = compacting('ThresholdExceeded');
        run(m, 900, 5_000_000, { contextWindow: 0 });
        expect(m.state()).toEqual({ type: 'Start' });
        expect(ctx(m).deferredCompaction).toBe(true);
        expect(m.contextTokens()).toBe(5_000_000);
      });

      it('without any nextStep on this facade (restored), the default policy applies', () => {
        const r = LoopMachine.restore(snap(compacting('ThresholdExceeded')));
        // 960 < 95% of 200000: defers
        run(r, 900, 960);
        expect(r.state()).toEqual({ type: 'Start' });
        expect(ctx(r).deferredCompaction).toBe(true);
      });

      it('rejects a malformed policy with InvalidFeedError', () => {
        const m = compacting('ThresholdExceeded');
        expectInvalid(m, feed, () => run(m, 900, 100, { contextWindow: -5 }));
      });

      it('the emergency line still fires through the latch', () => {
        const m = compacting('ThresholdExceeded');
        run(m, 850, 850);
        m.setContextTokens(950);
        expect(m.nextStep(W)).toEqual({ type: 'Compact', reason: 'Emergency' });
      });

      for (const s of ['Start', 'AwaitingModel', 'AwaitingTools', 'Terminal'] as const) {
        it(`is illegal in ${s}`, () => {
          const m = ALL_STATES[s]();
          expectIllegal(m, feed, s, () => run(m, 900, 100));
        });
      }
    });
  }
});
