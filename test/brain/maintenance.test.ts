/** commitPending, discardPending, salvagePending, rewindTo, adoptPruned, coherentCut. */
import { describe, expect, it } from 'vitest';
import { LoopMachine } from '../../src/brain/loop-machine.js';
import { coherentCut } from '../../machines/loop.machine.js';
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
  sys,
  toolMsg,
  user,
} from '../support/brain.js';

const MID_RUN: Array<[string, () => LoopMachine]> = [
  ['AwaitingModel', inAwaitingModel],
  ['AwaitingTools', inAwaitingTools],
  ['AwaitingCompaction', () => inAwaitingCompaction()],
];

/** A Terminal(Failed) machine whose pending holds the given messages (history [sys]). */
function failedWith(pending: Message[]): LoopMachine {
  return machineWith({
    state: 'Terminal',
    history: [sys()],
    pending,
    outcome: { type: 'Failed', error: { type: 'X', message: 'y' } },
  });
}

describe('coherentCut', () => {
  const H: Message[] = [
    sys(), // 0
    user('a'), // 1
    asst('', [call('x'), call('y')]), // 2
    toolMsg('x'), // 3
    toolMsg('y'), // 4
    asst('b'), // 5
    user('c'), // 6
    asst('', [call('z')]), // 7
    toolMsg('z'), // 8
  ];

  it('is the full length of a coherent conversation', () => {
    expect(coherentCut(H, Infinity)).toBe(9);
    expect(coherentCut(H, 9)).toBe(9);
    expect(coherentCut(H, 100)).toBe(9);
  });

  it('is 0 for empty input or limit 0', () => {
    expect(coherentCut([], Infinity)).toBe(0);
    expect(coherentCut(H, 0)).toBe(0);
  });

  it('keeps a limit that falls on a boundary', () => {
    expect(coherentCut(H, 2)).toBe(2);
    expect(coherentCut(H, 5)).toBe(5);
    expect(coherentCut(H, 6)).toBe(6);
    expect(coherentCut(H, 7)).toBe(7);
  });

  it('snaps down to before an assistant whose calls are not all answered inside the limit', () => {
    expect(coherentCut(H, 3)).toBe(2);
    expect(coherentCut(H, 4)).toBe(2); // x answered, y not
    expect(coherentCut(H, 8)).toBe(7);
  });

  it('an unanswered call makes everything after it incoherent', () => {
    const m: Message[] = [user('a'), asst('', [call('q')]), user('b'), asst('c')];
    expect(coherentCut(m, Infinity)).toBe(1);
  });

  it('a result later in the list still answers the call', () => {
    const m: Message[] = [asst('', [call('q')]), user('interjection'), toolMsg('q')];
    expect(coherentCut(m, Infinity)).toBe(3);
    expect(coherentCut(m, 2)).toBe(0);
  });
});

describe('commitPending', () => {
  for (const [name, make] of [
    ['Start', inStart],
    ['Terminal', inTerminal],
  ] as const) {
    it(`in ${name} moves pending to the end of history`, () => {
      const m = make();
      const full = m.fullHistory();
      const state = m.state();
      m.commitPending();
      expect(m.history()).toEqual(full);
      expect(m.fullHistory()).toEqual(full);
      expect(ctx(m).pending).toEqual([]);
      expect(m.state()).toEqual(state);
    });
  }

  it('rejects an incoherent pending', () => {
    const m = failedWith([user('a'), asst('', [call('q')])]);
    expectInvalid(m, 'commitPending', () => m.commitPending());
  });


  for (const [name, make] of MID_RUN) {
    it(`is illegal in ${name}`, () => {
      const m = make();
      expectIllegal(m, 'commitPending', name as never, () => m.commitPending());
    });
  }
});

describe('discardPending', () => {
  for (const [name, make] of [
    ['Start', inStart],
    ['Terminal', inTerminal],
  ] as const) {
    it(`in ${name} throws pending away and keeps history`, () => {
      const m = make();
      const history = m.history();
      m.discardPending();
      expect(m.history()).toEqual(history);
      expect(m.fullHistory()).toEqual(history);
    });
  }

  it('works on an incoherent pending', () => {
    const m = failedWith([user('a'), asst('', [call('q')])]);
    m.discardPending();
    expect(m.fullHistory()).toEqual([sys()]);
  });

  for (const [name, make] of MID_RUN) {
    it(`is illegal in ${name}`, () => {
      const m = make();
      expectIllegal(m, 'discardPending', name as never, () => m.discardPending());
    });
  }
});

describe('salvagePending', () => {
  it('commits the longest coherent prefix and drops the unanswered tail', () => {
    const m = failedWith([user('a'), asst('', [call('x')]), toolMsg('x'), asst('', [call('y')])]);
    expect(m.salvagePending()).toEqual({ committed: 3, dropped: 1 });
    expect(m.history()).toEqual([sys(), user('a'), asst('', [call('x')]), toolMsg('x')]);
    expect(m.fullHistory()).toEqual(m.history());
  });

  it('an assistant with tool calls counts only with all of its results', () => {
    const m = failedWith([user('a'), asst('', [call('x'), call('y')]), toolMsg('x')]);
    expect(m.salvagePending()).toEqual({ committed: 1, dropped: 2 });
    expect(m.history()).toEqual([sys(), user('a')]);
  });

  it('commits everything when pending is coherent', () => {
    const m = inTerminal();
    const full = m.fullHistory();
    const n = full.length - m.history().length;
    expect(m.salvagePending()).toEqual({ committed: n, dropped: 0 });
    expect(m.history()).toEqual(full);
  });

  it('with nothing pending is {0, 0}', () => {
    const m = new LoopMachine({ history: [sys()] });
    expect(m.salvagePending()).toEqual({ committed: 0, dropped: 0 });
    expect(m.history()).toEqual([sys()]);
  });

  it('works in Start', () => {
    const m = inStart();
    expect(m.salvagePending()).toEqual({ committed: 1, dropped: 0 });
    expect(m.history()).toEqual([sys(), user('hello')]);
  });

  for (const [name, make] of MID_RUN) {
    it(`is illegal in ${name}`, () => {
      const m = make();
      expectIllegal(m, 'salvagePending', name as never, () => m.salvagePending());
    });
  }
});

describe('rewindTo', () => {
  const H: Message[] = [
    sys(), // 0
    user('a'), // 1
    asst('', [call('x')]), // 2
    toolMsg('x'), // 3
    asst('b'), // 4
    user('c'), // 5
    asst('d'), // 6
  ];
  const fresh = () => new LoopMachine({ history: H });

  it('drops history past len and returns how many were dropped', () => {
    const m = fresh();
    expect(m.rewindTo(5)).toBe(2);
    expect(m.history()).toEqual(H.slice(0, 5));
    expect(m.state()).toEqual({ type: 'Start' });
  });

  it('snaps the cut down with coherentCut (never between a call and its result)', () => {
    const m = fresh();
    expect(m.rewindTo(3)).toBe(5);
    expect(m.history()).toEqual(H.slice(0, 2));
  });

  it('len 0 drops everything', () => {
    const m = fresh();
    expect(m.rewindTo(0)).toBe(7);
    expect(m.history()).toEqual([]);
  });

  it('len at or beyond the length is 0 and changes no message', () => {
    const m = fresh();
    expect(m.rewindTo(7)).toBe(0);
    expect(m.rewindTo(1000)).toBe(0);
    expect(m.history()).toEqual(H);
  });

  it('clears the deferred-compaction latch and resets the estimate', () => {
    const m = machineWith({ state: 'Start', history: H, deferredCompaction: true, contextTokens: 900 });
    expect(m.nextStep({ contextWindow: 1000 })).toEqual({ type: 'CallLLM', turn: 1 }); // latched
    const r = machineWith({ state: 'Start', history: H, deferredCompaction: true, contextTokens: 900 });
    expect(r.rewindTo(5)).toBe(2);
    expect(ctx(r).deferredCompaction).toBe(false);
    expect(r.contextTokens()).toBe(0);
  });

  it('is legal in Terminal with nothing pending', () => {
    const m = inTerminal();
    m.commitPending();
    const h = m.history();
    expect(m.rewindTo(1)).toBe(h.length - 1);
    expect(m.history()).toEqual(h.slice(0, 1));
    expect(m.state().type).toBe('Terminal');
  });

  it('refuses while a turn is in flight (pending not empty), in Start and Terminal', () => {
    const s = inStart();
    const e = expectIllegal(s, 'rewindTo', 'Start', () => s.rewindTo(0));
    expect(e.message).toMatch(/turn (is )?in flight/);
    const t = inTerminal();
    expectIllegal(t, 'rewindTo', 'Terminal', () => t.rewindTo(0));
  });

  for (const [name, make] of MID_RUN) {
    it(`is illegal in ${name}`, () => {
      const m = make();
      expectIllegal(m, 'rewindTo', name as never, () => m.rewindTo(0));
    });
  }

  it('rejects a negative or non-integer len', () => {
    const m = fresh();
    expectInvalid(m, 'rewindTo', () => m.rewindTo(-1));
    expectInvalid(m, 'rewindTo', () => m.rewindTo(2.5));
    expectInvalid(m, 'rewindTo', () => m.rewindTo(Number.NaN));
  });
});

describe('adoptPruned', () => {
  /** AwaitingTools with history [sys, user('old'), asst('old answer')] and pending [user, asst(c1)]. */
  function setup(): LoopMachine {
    const m = new LoopMachine({ history: [sys(), user('old'), asst('old answer')] });
    m.acceptInput(user('q'));
    m.nextStep();
    m.modelResponse(asst('thinking', [call('c1')]), 100, ['read']);
    return m;
  }
  const pruned: Message[] = [
    sys('[pruned]'),
    user('[pruned]'),
    asst('[pruned]'),
    user('q (short)'),
    asst('', [call('c1', 'read', null)]),
  ];

  it('splits at the old history length into history and pending, no state change', () => {
    const m = setup();
    const before = ctx(m);
    m.adoptPruned(pruned);
    expect(m.history()).toEqual(pruned.slice(0, 3));
    expect(m.fullHistory()).toEqual(pruned);
    expect(ctx(m).pending).toEqual(pruned.slice(3));
    expect(m.state()).toEqual({ type: 'AwaitingTools', turn: 1 });
    const after = ctx(m);
    for (const k of ['pendingTools', 'turnsTaken', 'contextTokens', 'totalToolCalls', 'cancelled']) {
      expect(after[k]).toEqual(before[k]);
    }
    m.toolResults([toolMsg('c1')]);
    expect(m.fullHistory()).toEqual([...pruned, toolMsg('c1')]);
  });

  it('rejects a different length', () => {
    const m = setup();
    expectInvalid(m, 'adoptPruned', () => m.adoptPruned(pruned.slice(1)));
    expectInvalid(m, 'adoptPruned', () => m.adoptPruned([...pruned, user('extra')]));
  });

  it('rejects a different role at some position', () => {
    const m = setup();
    const bad = [...pruned];
    bad[3] = sys('q');
    expectInvalid(m, 'adoptPruned', () => m.adoptPruned(bad));
  });

  it('rejects different tool-call ids on an assistant message', () => {
    const m = setup();
    const bad = [...pruned];
    bad[4] = asst('', [call('c2')]);
    expectInvalid(m, 'adoptPruned', () => m.adoptPruned(bad));
    bad[4] = asst('');
    expectInvalid(m, 'adoptPruned', () => m.adoptPruned(bad));
  });

  it('rejects a different toolCallId on a tool result', () => {
    const m = new LoopMachine({ history: [user('a'), asst('', [call('x')]), toolMsg('x')] });
    expectInvalid(m, 'adoptPruned', () => m.adoptPruned([user('a'), asst('', [call('x')]), toolMsg('y')]));
    m.adoptPruned([user('A'), asst('', [call('x')]), toolMsg('x', 'read', '[elided]')]);
    expect(m.history()).toEqual([user('A'), asst('', [call('x')]), toolMsg('x', 'read', '[elided]')]);
  });

  it('is legal in Start and AwaitingCompaction', () => {
    const s = inStart();
    const fs = s.fullHistory().map((x) => ({ ...x, content: 'p' }) as Message);
    s.adoptPruned(fs);
    expect(s.fullHistory()).toEqual(fs);
    expect(s.state()).toEqual({ type: 'Start' });
    const c = inAwaitingCompaction();
    const fc = c.fullHistory().map((x) => ({ ...x, content: 'p' }) as Message);
    c.adoptPruned(fc);
    expect(c.fullHistory()).toEqual(fc);
    expect(c.state().type).toBe('AwaitingCompaction');
  });

  it('is illegal in Terminal', () => {
    const m = inTerminal();
    expectIllegal(m, 'adoptPruned', 'Terminal', () => m.adoptPruned(m.fullHistory()));
  });
});

describe('tool-call ids reused across turns (only duplicates within one reply are invalid)', () => {
  /** Terminal(Completed) after two tool rounds that both use the id 'call_0', as some providers do. */
  function reusingRun(): LoopMachine {
    const m = new LoopMachine({ history: [sys()] });
    m.acceptInput(user('q'));
    for (let t = 0; t < 2; t++) {
      m.nextStep();
      m.modelResponse(asst('', [call('call_0')]), 10, ['read']);
      m.toolResults([toolMsg('call_0', 'read', `r${t}`)]);
    }
    m.nextStep();
    m.modelResponse(asst('done'), 10, []);
    return m;
  }

  it('the pending run is coherent by coherentCut', () => {
    const m = reusingRun();
    expect(coherentCut(m.fullHistory(), Infinity)).toBe(m.fullHistory().length);
    expect(m.lastCoherentLen()).toBe(m.fullHistory().length);
  });

  it('commitPending commits it', () => {
    const m = reusingRun();
    const full = m.fullHistory();
    m.commitPending();
    expect(m.history()).toEqual(full);
  });

  it('commitPending and salvagePending agree on what is coherent', () => {
    const a = reusingRun();
    const b = reusingRun();
    const salvaged = b.salvagePending();
    let committed = true;
    try {
      a.commitPending();
    } catch {
      committed = false;
    }
    expect(committed).toBe(salvaged.dropped === 0);
  });

  it('a machine holding such a history survives toJSON / restore', () => {
    const m = reusingRun();
    m.salvagePending();
    const r = LoopMachine.restore(JSON.parse(JSON.stringify(m.toJSON())));
    expect(r.toJSON()).toEqual(m.toJSON());
  });

  it('the constructor accepts such a history', () => {
    const h: Message[] = [user('a'), asst('', [call('c')]), toolMsg('c'), asst('', [call('c')]), toolMsg('c'), asst('ok')];
    expect(new LoopMachine({ history: h }).history()).toEqual(h);
  });
});

describe('lastCoherentLen', () => {
  it('equals coherentCut(fullHistory(), Infinity) in each state', () => {
    for (const m of [inStart(), inAwaitingModel(), inAwaitingTools(), inAwaitingCompaction(), inTerminal()]) {
      expect(m.lastCoherentLen()).toBe(coherentCut(m.fullHistory(), Infinity));
    }
  });

  it('counts pending, not only history', () => {
    const m = inAwaitingTools(); // [sys] + [user, asst(c1)]
    expect(m.lastCoherentLen()).toBe(2);
    m.toolResults([toolMsg('c1')]);
    expect(m.lastCoherentLen()).toBe(4);
  });
});
