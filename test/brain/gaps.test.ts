/**
 * The gaps mutation testing found in the brain's tests (issue 10, "Tests the brain still
 * lacks"): rewindTo at or past the end, id reuse and orphan results in conversations from
 * outside, which error wins, and what each refusal's message names.
 */
import { describe, expect, it } from 'vitest';
import { IllegalFeedError, InvalidFeedError } from '../../src/errors.js';
import { LoopMachine } from '../../src/brain/loop-machine.js';
import type { Message } from '../../src/schemas.js';
import {
  asst,
  call,
  ctx,
  expectIllegal,
  expectInvalid,
  inAwaitingCompaction,
  inAwaitingModel,
  inAwaitingTools,
  inStart,
  inTerminal,
  machineWith,
  snap,
  sys,
  toolMsg,
  user,
} from '../support/brain.js';

const H: Message[] = [sys(), user('a'), asst('', [call('x')]), toolMsg('x'), asst('done')];

describe('rewindTo(len) at or past the end is Ok(0) and a true no-op (seed 001)', () => {
  for (const extra of [0, 1, 50]) {
    it(`len = length + ${extra}: nothing dropped, the estimate and the deferred-compaction latch untouched`, () => {
      const m = machineWith({ state: 'Start', history: H, pending: [], contextTokens: 900, deferredCompaction: true });
      const before = snap(m);
      expect(m.rewindTo(H.length + extra)).toBe(0);
      expect(snap(m)).toEqual(before);
      expect(m.contextTokens()).toBe(900);
      expect(ctx(m).deferredCompaction).toBe(true);
      // The latch still holds back a threshold pass (900 > 80% of 1000).
      expect(m.nextStep({ contextWindow: 1000 })).toEqual({ type: 'CallLLM', turn: 1 });
    });
  }

  it('while one below the end does drop, resetting both (the contrast the no-op is measured against)', () => {
    const m = machineWith({ state: 'Start', history: H, pending: [], contextTokens: 900, deferredCompaction: true });
    expect(m.rewindTo(H.length - 1)).toBe(1);
    expect(m.contextTokens()).toBe(0);
    expect(ctx(m).deferredCompaction).toBe(false);
  });
});

describe('conversations from outside: an id reused while open, a result that answers nothing', () => {
  const reusedAcross: Message[] = [user('u'), asst('', [call('x')]), asst('', [call('x')]), toolMsg('x'), toolMsg('x')];
  const reusedWithin: Message[] = [user('u'), asst('', [call('x'), call('x')]), toolMsg('x'), toolMsg('x')];
  const orphan: Message[] = [user('u'), asst('', [call('x')]), toolMsg('x'), toolMsg('y')];
  const cases: Array<[string, Message[], string]> = [
    ['an id reused in a later message while its call is open', reusedAcross, "tool call id 'x' at position 2 is used again while its call at position 1 is unanswered"],
    ['an id used twice in one message', reusedWithin, "tool call id 'x' at position 1 is used again while an earlier call in this message is unanswered"],
    ['a result that answers no open call', orphan, "tool result at position 3 answers no open tool call ('y')"],
  ];

  for (const [what, messages, says] of cases) {
    it(`starting history: ${what}`, () => {
      let error: unknown;
      try {
        new LoopMachine({ history: messages });
      } catch (e) {
        error = e;
      }
      expect(error).toBeInstanceOf(InvalidFeedError);
      expect((error as Error).message).toBe(`history: starting history is not coherent: ${says}`);
    });

    it(`compactionResult: ${what}`, () => {
      const m = inAwaitingCompaction('Emergency');
      const e = expectInvalid(m, 'compactionResult', () => m.compactionResult(messages, 960, 100));
      expect(e.message).toBe(`compactionResult: compacted conversation is not coherent: ${says}`);
    });
  }

  it('ids may repeat once the earlier call is answered (local models that always say call_0)', () => {
    const reusedLater: Message[] = [user('u'), asst('', [call('call_0')]), toolMsg('call_0'), asst('', [call('call_0')]), toolMsg('call_0')];
    expect(new LoopMachine({ history: reusedLater }).history()).toEqual(reusedLater);
    const m = inAwaitingCompaction('Emergency');
    m.compactionResult(reusedLater, 960, 100);
    expect(m.history()).toEqual(reusedLater);
  });
});

describe('which error wins: a state that refuses the feed beats a malformed argument', () => {
  const malformed = { role: 'robot', content: 7 } as never;
  const cases: Array<[string, () => LoopMachine, string, (m: LoopMachine) => unknown]> = [
    ['acceptInput in Terminal', inTerminal, 'acceptInput', (m) => m.acceptInput(malformed)],
    ['steer in Terminal', inTerminal, 'steer', (m) => m.steer(malformed)],
    ['inject in Terminal', inTerminal, 'inject', (m) => m.inject(malformed)],
    ['fail in Terminal', inTerminal, 'fail', (m) => m.fail(malformed)],
    ['adoptPruned in Terminal', inTerminal, 'adoptPruned', (m) => m.adoptPruned([malformed])],
    ['setContextTokens in Terminal', inTerminal, 'setContextTokens', (m) => m.setContextTokens(-1)],
    ['modelResponse in Start', inStart, 'modelResponse', (m) => m.modelResponse(malformed, -1, 'x' as never)],
    ['toolResults in AwaitingModel', inAwaitingModel, 'toolResults', (m) => m.toolResults([malformed])],
    ['compactionResult in AwaitingTools', inAwaitingTools, 'compactionResult', (m) => m.compactionResult([malformed], -1, Number.NaN)],
    ['compactionNoop in Start', inStart, 'compactionNoop', (m) => m.compactionNoop(-1, 0.5)],
    ['rewindTo in AwaitingModel', inAwaitingModel, 'rewindTo', (m) => m.rewindTo(-1)],
    ['commitPending in AwaitingTools', inAwaitingTools, 'commitPending', (m) => m.commitPending()],
  ];
  for (const [what, make, feed, attempt] of cases) {
    it(what, () => {
      const m = make();
      expectIllegal(m, feed, m.state().type, () => attempt(m));
    });
  }

  it('also when the state handles the feed but its condition refuses it: rewindTo(-1) with a turn in flight', () => {
    const m = inStart();
    const e = expectIllegal(m, 'rewindTo', 'Start', () => m.rewindTo(-1));
    expect(e.message).toBe('rewindTo is not allowed in state Start: a turn is in flight (pending is not empty)');
  });

  it('also when the state handles the feed but its condition refuses it: a malformed inject in AwaitingTools', () => {
    const m = inAwaitingTools();
    const e = expectIllegal(m, 'inject', 'AwaitingTools', () => m.inject(malformed));
    expect(e).toBeInstanceOf(IllegalFeedError);
    expect(e.message).toContain("tool call 'c1' of the reply at position 2 awaits its result");
  });
});

describe('what each kind of refusal names', () => {
  it('a feed the state does not handle: the feed and the state', () => {
    const m = inStart();
    expect(expectIllegal(m, 'toolResults', 'Start', () => m.toolResults([])).message).toBe('toolResults is not allowed in state Start');
  });

  it('toolResults: the result that answers no pending call, by its index and id', () => {
    const m = inAwaitingTools();
    const e = expectInvalid(m, 'toolResults', () => m.toolResults([toolMsg('c1'), toolMsg('zz')]));
    expect(e.message).toBe("toolResults: results[1] answers 'zz', which is not a pending tool call");
  });

  it('toolResults: a second result, by its index, the id and the call it answers', () => {
    const m = inAwaitingTools();
    const e = expectInvalid(m, 'toolResults', () => m.toolResults([toolMsg('c1'), toolMsg('c1')]));
    expect(e.message).toBe("toolResults: results[1] answers tool call 'c1' (call 0) a second time");
  });

  it('toolResults: the calls left without a result, by id, call index and the reply position', () => {
    const m = inAwaitingModel();
    m.modelResponse(asst('', [call('a'), call('b'), call('c'), call('d'), call('e')]), 10, ['read']);
    const e = expectInvalid(m, 'toolResults', () => m.toolResults([toolMsg('b')]));
    expect(e.message).toBe("toolResults: no result for pending tool call 'a' (call 0), 'c' (call 2), 'd' (call 3) and 1 more of the reply at position 2");
  });

  it('modelResponse: an id twice in one reply, by id and call index', () => {
    const m = inAwaitingModel();
    const e = expectInvalid(m, 'modelResponse', () => m.modelResponse(asst('', [call('a'), call('a')]), 10, []));
    expect(e.message).toBe("modelResponse: tool call id 'a' appears twice in one reply (call 1)");
  });

  it('compactionResult: a message between a call and its result, by role, position, call id', () => {
    const m = inAwaitingCompaction('Emergency');
    const e = expectInvalid(m, 'compactionResult', () => m.compactionResult([asst('', [call('x')]), user('hey'), toolMsg('x')], 960, 100));
    expect(e.message).toBe(
      "compactionResult: compacted conversation is not coherent: user message at position 1 comes between tool call 'x' (position 0) and its result",
    );
  });

  it('compactionResult: a call never answered, by id and position', () => {
    const m = inAwaitingCompaction('Emergency');
    const e = expectInvalid(m, 'compactionResult', () => m.compactionResult([user('u'), asst('', [call('x')])], 960, 100));
    expect(e.message).toBe("compactionResult: compacted conversation is not coherent: tool call 'x' at position 1 has no result");
  });

  it('compactionResult: a result given twice, by id and both positions', () => {
    const m = inAwaitingCompaction('Emergency');
    const e = expectInvalid(m, 'compactionResult', () => m.compactionResult([asst('', [call('x')]), toolMsg('x'), toolMsg('x')], 960, 100));
    expect(e.message).toBe("compactionResult: compacted conversation is not coherent: tool result at position 2 answers tool call 'x' (position 0) a second time");
  });

  it('commitPending: the unanswered call, by id and position', () => {
    const m = inAwaitingTools();
    m.fail({ type: 'X', message: 'x' });
    const e = expectInvalid(m, 'commitPending', () => m.commitPending());
    expect(e.message).toBe("commitPending: pending is not coherent (tool call 'c1' at position 1 has no result); use salvagePending");
  });

  it('adoptPruned: the message whose shape changed, by position', () => {
    const m = inAwaitingTools();
    const changed = m.fullHistory().map((x, i) => (i === 2 ? asst('', [call('other')]) : x));
    const e = expectInvalid(m, 'adoptPruned', () => m.adoptPruned(changed));
    expect(e.message).toBe('adoptPruned: message 2 changed role or tool-call ids (pruning may change contents only)');
  });

  it('a malformed argument: the field', () => {
    const m = inStart();
    const e = expectInvalid(m, 'inject', () => m.inject({ role: 'assistant', content: 'x', toolCalls: [{ id: '', name: 'n', args: 1 }] }));
    expect(e.message).toMatch(/^inject: malformed argument at toolCalls\.0\.id: /);
  });

  it('counts: the value', () => {
    const m = inStart();
    expect(expectInvalid(m, 'setContextTokens', () => m.setContextTokens(2 ** 53)).message).toBe(
      `setContextTokens: tokens must be a non-negative integer, got ${2 ** 53}`,
    );
  });
});
