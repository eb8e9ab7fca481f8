/** The feeds: legal states, postconditions, payload validation. */
import { describe, expect, it } from 'vitest';
import { LoopMachine } from '../../src/brain/loop-machine.js';
import { InvalidFeedError } from '../../src/errors.js';
import type { AssistantMessage, Message, StateName, ToolMessage } from '../../src/schemas.js';
import {
  ALL_STATES,
  NON_TERMINAL,
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
  notAvailable,
  snap,
  sys,
  toolMsg,
  toolReply,
  user,
} from '../support/brain.js';

const others = (legal: StateName[]) => (Object.keys(ALL_STATES) as StateName[]).filter((s) => !legal.includes(s));

describe('acceptInput', () => {
  it('on a fresh machine puts the user message in pending and stays in Start', () => {
    const m = new LoopMachine({ history: [sys()] });
    m.acceptInput(user('hello'));
    expect(m.state()).toEqual({ type: 'Start' });
    expect(m.history()).toEqual([sys()]);
    expect(m.fullHistory()).toEqual([sys(), user('hello')]);
  });

  it('clears pending and pending tools and resets the run counters, from AwaitingTools', () => {
    const m = inAwaitingTools();
    m.steer(user('also this'));
    expect(ctx(m).turnsTaken).toBe(1);
    const history = m.history();
    m.acceptInput(user('new run'));
    expect(m.state()).toEqual({ type: 'Start' });
    expect(m.history()).toEqual(history);
    expect(m.fullHistory()).toEqual([...history, user('new run')]);
    const c = ctx(m);
    expect(c.pending).toEqual([user('new run')]);
    expect(c.pendingTools).toEqual([]);
    expect(c.turnsTaken).toBe(0);
    expect(c.steering).toEqual([]);
    expect(m.turnsTaken()).toBe(0);
  });

  it('resets totalToolCalls', () => {
    const m = inAwaitingTools();
    m.toolResults([toolMsg('c1')]);
    expect(m.totalToolCalls()).toBe(1);
    m.acceptInput(user('again'));
    expect(m.totalToolCalls()).toBe(0);
  });

  it('resets the deferred-compaction latch', () => {
    const m = machineWith({ state: 'Start', pending: [user('q')], deferredCompaction: true, contextTokens: 900 });
    m.acceptInput(user('again'));
    expect(ctx(m).deferredCompaction).toBe(false);
    expect(m.nextStep({ contextWindow: 1000 })).toEqual({ type: 'Compact', reason: 'ThresholdExceeded' });
  });

  it('from AwaitingCompaction clears the compaction reason', () => {
    const m = inAwaitingCompaction('ThresholdExceeded');
    m.acceptInput(user('again'));
    expect(m.state()).toEqual({ type: 'Start' });
    expect(ctx(m).compactionReason).toBeNull();
  });

  it('from AwaitingModel goes back to Start', () => {
    const m = inAwaitingModel();
    m.acceptInput(user('again'));
    expect(m.state()).toEqual({ type: 'Start' });
    expect(m.nextStep()).toEqual({ type: 'CallLLM', turn: 1 });
  });

  it('keeps the cancelled flag', () => {
    const m = inStart();
    m.cancel();
    m.acceptInput(user('again'));
    expect(m.isCancelled()).toBe(true);
    expect(m.nextStep()).toEqual({ type: 'Done', outcome: { type: 'Cancelled' } });
  });

  it('is illegal in Terminal', () => {
    const m = inTerminal();
    expectIllegal(m, 'acceptInput', 'Terminal', () => m.acceptInput(user('x')));
  });

  for (const bad of [asst('x'), sys('x'), toolMsg('c1'), { role: 'user' }, { role: 'robot', content: 'x' }]) {
    it(`rejects ${JSON.stringify(bad)} with InvalidFeedError`, () => {
      const m = inStart();
      expectInvalid(m, 'acceptInput', () => m.acceptInput(bad as never));
    });
  }
});

describe('modelResponse', () => {
  it('without tool calls completes the run with the reply text', () => {
    const m = inAwaitingModel();
    const before = m.fullHistory();
    m.modelResponse(asst('the answer'), 1234, ['read']);
    expect(m.state()).toEqual({ type: 'Terminal', outcome: { type: 'Completed', finalText: 'the answer' } });
    expect(m.fullHistory()).toEqual([...before, asst('the answer')]);
    expect(m.contextTokens()).toBe(1234);
    expect(m.turnsTaken()).toBe(1);
    expect(m.isTerminal()).toBe(true);
  });

  it('with an empty toolCalls array also completes', () => {
    const m = inAwaitingModel();
    m.modelResponse(asst('done', []), 10, ['read']);
    expect(m.state()).toEqual({ type: 'Terminal', outcome: { type: 'Completed', finalText: 'done' } });
  });

  it('with known tool calls goes to AwaitingTools{turn} with real pending calls', () => {
    const m = inAwaitingModel();
    const before = m.fullHistory();
    const reply = asst('working', [call('a', 'read', { p: 1 }), call('b', 'write', { p: 2 })]);
    m.modelResponse(reply, 777, ['read', 'write']);
    expect(m.state()).toEqual({ type: 'AwaitingTools', turn: 1 });
    expect(m.fullHistory()).toEqual([...before, reply]);
    expect(m.contextTokens()).toBe(777);
    expect(m.turnsTaken()).toBe(1);
    const pt = ctx(m).pendingTools as Array<Record<string, unknown>>;
    expect(pt).toEqual([{ call: call('a', 'read', { p: 1 }) }, { call: call('b', 'write', { p: 2 }) }]);
    for (const p of pt) expect(p.preAnswered).toBeUndefined();
  });

  it('pre-answers an unknown tool with the exact error text, keeping call order', () => {
    const m = inAwaitingModel();
    m.modelResponse(asst('', [call('a', 'ghost'), call('b', 'read'), call('c', 'Read')]), 10, ['read']);
    expect(ctx(m).pendingTools).toEqual([
      {
        call: call('a', 'ghost'),
        preAnswered: {
          role: 'tool',
          toolCallId: 'a',
          toolName: 'ghost',
          content: "tool 'ghost' is not available",
          isError: true,
        },
      },
      { call: call('b', 'read') },
      { call: call('c', 'Read'), preAnswered: notAvailable('c', 'Read') },
    ]);
  });

  it('with no available tools every call is pre-answered', () => {
    const m = inAwaitingModel();
    m.modelResponse(asst('', [call('a', 'read')]), 10, []);
    expect(ctx(m).pendingTools).toEqual([{ call: call('a', 'read'), preAnswered: notAvailable('a', 'read') }]);
    expect(m.state().type).toBe('AwaitingTools');
  });

  it('counts turns across rounds', () => {
    const m = inAwaitingTools();
    m.toolResults([toolMsg('c1')]);
    m.nextStep();
    m.modelResponse(asst('', [call('c2')]), 10, ['read']);
    expect(m.turnsTaken()).toBe(2);
    expect(m.state()).toEqual({ type: 'AwaitingTools', turn: 2 });
  });

  it('rejects duplicate tool-call ids in one reply', () => {
    const m = inAwaitingModel();
    expectInvalid(m, 'modelResponse', () =>
      m.modelResponse(asst('', [call('a', 'read'), call('a', 'write')]), 10, ['read', 'write']),
    );
  });

  it('rejects a reply that is not an assistant message', () => {
    const m = inAwaitingModel();
    expectInvalid(m, 'modelResponse', () => m.modelResponse(user('x') as unknown as AssistantMessage, 10, []));
  });

  it('rejects availableTools that is not a list of names', () => {
    const m = inAwaitingModel();
    expectInvalid(m, 'modelResponse', () => m.modelResponse(asst('x', [call('a')]), 10, undefined as never));
    expectInvalid(m, 'modelResponse', () => m.modelResponse(asst('x', [call('a')]), 10, [42] as never));
  });

  it('rejects a negative or fractional token estimate', () => {
    const m = inAwaitingModel();
    expectInvalid(m, 'modelResponse', () => m.modelResponse(asst('x'), -1, []));
    expectInvalid(m, 'modelResponse', () => m.modelResponse(asst('x'), 1.5, []));
  });

  for (const s of others(['AwaitingModel'])) {
    it(`is illegal in ${s}`, () => {
      const m = ALL_STATES[s]();
      expectIllegal(m, 'modelResponse', s, () => m.modelResponse(asst('x'), 10, []));
    });
  }
});

describe('toolResults', () => {
  function twoCalls(): { m: LoopMachine; reply: AssistantMessage } {
    const m = inAwaitingModel();
    const reply = asst('', [call('a', 'read'), call('b', 'ghost'), call('c', 'write')]);
    m.modelResponse(reply, 10, ['read', 'write']);
    return { m, reply };
  }
  const ra = toolMsg('a', 'read', 'A');
  const rb = notAvailable('b', 'ghost');
  const rc = toolMsg('c', 'write', 'C');

  it('appends results after the reply, clears pending calls, counts them, goes to Start', () => {
    const { m, reply } = twoCalls();
    const before = m.fullHistory();
    m.toolResults([ra, rb, rc]);
    expect(m.state()).toEqual({ type: 'Start' });
    expect(m.fullHistory()).toEqual([...before, ra, rb, rc]);
    expect(m.fullHistory().at(-4)).toEqual(reply);
    expect(ctx(m).pendingTools).toEqual([]);
    expect(m.totalToolCalls()).toBe(3);
    expect(m.nextStep()).toEqual({ type: 'CallLLM', turn: 2 });
  });

  it('orders results by the pending calls whatever order they are given in', () => {
    const { m } = twoCalls();
    const before = m.fullHistory();
    m.toolResults([rc, ra, rb]);
    expect(m.fullHistory()).toEqual([...before, ra, rb, rc]);
  });

  it('totalToolCalls accumulates across rounds', () => {
    const { m } = twoCalls();
    m.toolResults([ra, rb, rc]);
    m.nextStep();
    m.modelResponse(asst('', [call('d')]), 10, ['read']);
    m.toolResults([toolMsg('d')]);
    expect(m.totalToolCalls()).toBe(4);
  });

  it('rejects a missing result (including the pre-answered one)', () => {
    const { m } = twoCalls();
    expectInvalid(m, 'toolResults', () => m.toolResults([ra, rc]));
    expectInvalid(m, 'toolResults', () => m.toolResults([ra, rb]));
    expectInvalid(m, 'toolResults', () => m.toolResults([]));
  });

  it('rejects an extra result', () => {
    const { m } = twoCalls();
    expectInvalid(m, 'toolResults', () => m.toolResults([ra, rb, rc, toolMsg('zzz')]));
  });

  it('rejects a duplicate result', () => {
    const { m } = twoCalls();
    expectInvalid(m, 'toolResults', () => m.toolResults([ra, rb, rc, ra]));
    expectInvalid(m, 'toolResults', () => m.toolResults([ra, ra, rc]));
  });

  it('rejects a message that is not a tool result', () => {
    const { m } = twoCalls();
    expectInvalid(m, 'toolResults', () => m.toolResults([ra, rb, user('c') as unknown as ToolMessage]));
  });

  for (const s of others(['AwaitingTools'])) {
    it(`is illegal in ${s}`, () => {
      const m = ALL_STATES[s]();
      expectIllegal(m, 'toolResults', s, () => m.toolResults([toolMsg('c1')]));
    });
  }
});

describe('inject', () => {
  for (const s of NON_TERMINAL.filter((state) => state !== 'AwaitingTools')) {
    it(`in ${s} appends to pending without touching the estimate or the state`, () => {
      const m = ALL_STATES[s]();
      m.setContextTokens(321);
      const state = m.state();
      const history = m.history();
      const full = m.fullHistory();
      m.inject(sys('extra'));
      expect(m.fullHistory()).toEqual([...full, sys('extra')]);
      expect(m.history()).toEqual(history);
      expect(m.contextTokens()).toBe(321);
      expect(m.state()).toEqual(state);
    });
  }

  it('is illegal in Terminal', () => {
    const m = inTerminal();
    expectIllegal(m, 'inject', 'Terminal', () => m.inject(user('x')));
  });

  it('rejects a malformed message', () => {
    const m = inStart();
    expectInvalid(m, 'inject', () => m.inject({ role: 'user' } as unknown as Message));
  });

  it('is illegal in AwaitingTools: nothing may come between the calls and their results; the message names the call and its position', () => {
    const m = inAwaitingTools();
    const e = expectIllegal(m, 'inject', 'AwaitingTools', () => m.inject(sys('extra')));
    expect(e.message).toContain("tool call 'c1' of the reply at position 2 awaits its result");
  });

  it('refuses a tool result, which would answer no open call, naming the id and where it would go', () => {
    const m = inStart();
    const e = expectInvalid(m, 'inject', () => m.inject(toolMsg('nobody-called-me')));
    expect(e.message).toContain("tool result for 'nobody-called-me' (position 2) answers no open tool call");
  });

  it('refuses an assistant message that opens tool calls nothing would dispatch', () => {
    const m = inStart();
    const e = expectInvalid(m, 'inject', () => m.inject(asst('', [call('q')])));
    expect(e.message).toContain("'q' at position 2");
  });
});

describe('setContextTokens', () => {
  for (const s of NON_TERMINAL) {
    it(`in ${s} changes only the estimate`, () => {
      const m = ALL_STATES[s]();
      const before = snap(m) as Record<string, unknown>;
      m.setContextTokens(4242);
      expect(m.contextTokens()).toBe(4242);
      expect(snap(m)).toEqual({ ...before, contextTokens: 4242 });
    });
  }

  it('is illegal in Terminal', () => {
    const m = inTerminal();
    expectIllegal(m, 'setContextTokens', 'Terminal', () => m.setContextTokens(5));
  });

  it('rejects negative and fractional counts', () => {
    const m = inStart();
    expectInvalid(m, 'setContextTokens', () => m.setContextTokens(-1));
    expectInvalid(m, 'setContextTokens', () => m.setContextTokens(2.5));
  });
});

describe('cancel', () => {
  for (const s of NON_TERMINAL) {
    it(`in ${s} only sets the flag`, () => {
      const m = ALL_STATES[s]();
      const before = snap(m) as Record<string, unknown>;
      expect(m.isCancelled()).toBe(false);
      m.cancel();
      expect(m.isCancelled()).toBe(true);
      expect(snap(m)).toEqual({ ...before, cancelled: true });
    });
  }

  it('is illegal in Terminal', () => {
    const m = inTerminal();
    expectIllegal(m, 'cancel', 'Terminal', () => m.cancel());
  });
});

describe('fail', () => {
  const error = { type: 'ModelError', message: 'HTTP 500' };

  for (const s of NON_TERMINAL) {
    it(`in ${s} goes to Terminal(Failed) at once`, () => {
      const m = ALL_STATES[s]();
      const full = m.fullHistory();
      m.fail(error);
      expect(m.state()).toEqual({ type: 'Terminal', outcome: { type: 'Failed', error } });
      expect(m.isTerminal()).toBe(true);
      expect(m.fullHistory()).toEqual(full);
      expect(m.nextStep()).toEqual({ type: 'Done', outcome: { type: 'Failed', error } });
    });
  }

  it('the failure survives toJSON / restore', () => {
    const m = inAwaitingTools();
    m.fail(error);
    const r = LoopMachine.restore(snap(m));
    expect(r.state()).toEqual({ type: 'Terminal', outcome: { type: 'Failed', error } });
    expect(r.nextStep()).toEqual({ type: 'Done', outcome: { type: 'Failed', error } });
  });

  it('is illegal in Terminal', () => {
    const m = inTerminal();
    expectIllegal(m, 'fail', 'Terminal', () => m.fail(error));
  });

  it('rejects an error without a type', () => {
    const m = inStart();
    expectInvalid(m, 'fail', () => m.fail({ message: 'x' } as unknown as typeof error));
  });
});

describe('reads', () => {
  it('fullHistory is exactly history followed by pending', () => {
    const m = inAwaitingTools();
    const c = ctx(m);
    expect(m.history()).toEqual(c.history);
    expect(m.fullHistory()).toEqual([...(c.history as Message[]), ...(c.pending as Message[])]);
  });

  it('the reads match the context', () => {
    const m = inAwaitingTools();
    m.setContextTokens(55);
    expect(m.turnsTaken()).toBe(1);
    expect(m.totalToolCalls()).toBe(0);
    expect(m.contextTokens()).toBe(55);
    expect(m.isCancelled()).toBe(false);
    expect(m.isTerminal()).toBe(false);
  });

  it('lastCoherentLen stops before an unanswered tool call', () => {
    const m = inAwaitingTools(); // full = [sys, user, toolReply]
    expect(m.fullHistory().at(-1)).toEqual(toolReply);
    expect(m.lastCoherentLen()).toBe(m.fullHistory().length - 1);
    m.toolResults([toolMsg('c1')]);
    expect(m.lastCoherentLen()).toBe(m.fullHistory().length);
  });
});

describe('constructor', () => {
  it('starts with the given coherent history', () => {
    const h: Message[] = [sys(), user('a'), asst('', [call('x')]), toolMsg('x'), asst('b')];
    const m = new LoopMachine({ history: h });
    expect(m.history()).toEqual(h);
    expect(m.fullHistory()).toEqual(h);
    expect(m.state()).toEqual({ type: 'Start' });
    expect(m.nextStep()).toEqual({ type: 'CallLLM', turn: 1 });
  });

  it('rejects a history with an unanswered tool call', () => {
    expect(() => new LoopMachine({ history: [user('a'), asst('', [call('x')])] })).toThrow(InvalidFeedError);
  });
});
