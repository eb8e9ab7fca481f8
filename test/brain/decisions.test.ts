/** The decision order of nextStep(policy): terminal, cancelled, turn limit, emergency, threshold, CallLLM. */
import { describe, expect, it } from 'vitest';
import { LoopMachine } from '../../src/brain/loop-machine.js';
import { nextStep as pureNextStep } from '../../machines/loop.machine.js';
import { DEFAULT_POLICY, StepSchema, type Policy } from '../../src/schemas.js';
import {
  asst,
  call,
  ctx,
  expectInvalid,
  inAwaitingCompaction,
  inAwaitingModel,
  inAwaitingTools,
  inStart,
  inTerminal,
  machineWith,
  snap,
  toolMsg,
  user,
} from '../support/brain.js';

const W = { contextWindow: 1000 } as const;

/** A Start machine with a user message, the given counters and estimate. */
function startWith(fields: { turnsTaken?: number; contextTokens?: number; deferredCompaction?: boolean }) {
  return machineWith({ state: 'Start', pending: [user('q')], ...fields });
}

describe('defaults', () => {
  it('DEFAULT_POLICY is maxTurns 200, window 200000, threshold 80, autoCompact on', () => {
    expect(DEFAULT_POLICY).toEqual({ maxTurns: 200, contextWindow: 200_000, compactThreshold: 80, autoCompact: true });
  });

  it('a fresh machine is in Start and asks for the model, turn 1', () => {
    const m = new LoopMachine();
    expect(m.state()).toEqual({ type: 'Start' });
    expect(m.nextStep()).toEqual({ type: 'CallLLM', turn: 1 });
    expect(m.state()).toEqual({ type: 'AwaitingModel', turn: 1 });
  });

  it('default maxTurns is 200: turnsTaken 199 calls turn 200, turnsTaken 200 is MaxTurnsExceeded', () => {
    expect(startWith({ turnsTaken: 199 }).nextStep()).toEqual({ type: 'CallLLM', turn: 200 });
    expect(startWith({ turnsTaken: 200 }).nextStep()).toEqual({ type: 'Done', outcome: { type: 'MaxTurnsExceeded' } });
  });

  it('default window 200000 with the emergency line at 190000 (inclusive)', () => {
    expect(startWith({ contextTokens: 190_000 }).nextStep({ autoCompact: false })).toEqual({
      type: 'Compact',
      reason: 'Emergency',
    });
    expect(startWith({ contextTokens: 189_999 }).nextStep({ autoCompact: false })).toEqual({ type: 'CallLLM', turn: 1 });
  });

  it('default threshold 80% of 200000 = 160000 is strict and on by default', () => {
    expect(startWith({ contextTokens: 160_000 }).nextStep()).toEqual({ type: 'CallLLM', turn: 1 });
    expect(startWith({ contextTokens: 160_001 }).nextStep()).toEqual({ type: 'Compact', reason: 'ThresholdExceeded' });
  });

  it('a partial policy fills the other fields with defaults', () => {
    // only the window is given: threshold 80 and autoCompact true still apply
    expect(startWith({ contextTokens: 801 }).nextStep({ contextWindow: 1000 })).toEqual({
      type: 'Compact',
      reason: 'ThresholdExceeded',
    });
    // only maxTurns is given: the default window still applies
    expect(startWith({ contextTokens: 801 }).nextStep({ maxTurns: 5 })).toEqual({ type: 'CallLLM', turn: 1 });
  });

  it('a malformed policy is rejected with InvalidFeedError and changes nothing', () => {
    const m = inStart();
    expectInvalid(m, 'nextStep', () => m.nextStep({ maxTurns: -1 }));
    expectInvalid(m, 'nextStep', () => m.nextStep({ compactThreshold: 150 }));
    expect(m.state()).toEqual({ type: 'Start' });
  });

  it('every answer is a valid Step', () => {
    for (const m of [inStart(), inAwaitingModel(), inAwaitingTools(), inAwaitingCompaction(), inTerminal()]) {
      expect(StepSchema.safeParse(m.nextStep()).success).toBe(true);
    }
  });
});

describe('turn limit', () => {
  it('turnsTaken == maxTurns is Done(MaxTurnsExceeded) and the machine becomes Terminal', () => {
    const m = startWith({ turnsTaken: 3 });
    expect(m.nextStep({ maxTurns: 3 })).toEqual({ type: 'Done', outcome: { type: 'MaxTurnsExceeded' } });
    expect(m.state()).toEqual({ type: 'Terminal', outcome: { type: 'MaxTurnsExceeded' } });
    expect(m.isTerminal()).toBe(true);
  });

  it('turnsTaken == maxTurns - 1 still calls the model with turn = maxTurns', () => {
    expect(startWith({ turnsTaken: 2 }).nextStep({ maxTurns: 3 })).toEqual({ type: 'CallLLM', turn: 3 });
  });

  it('turnsTaken > maxTurns (policy lowered mid-run) is MaxTurnsExceeded', () => {
    expect(startWith({ turnsTaken: 5 }).nextStep({ maxTurns: 2 })).toEqual({
      type: 'Done',
      outcome: { type: 'MaxTurnsExceeded' },
    });
  });

  it('maxTurns 0 stops a fresh run before any model call', () => {
    const m = inStart();
    expect(m.nextStep({ maxTurns: 0 })).toEqual({ type: 'Done', outcome: { type: 'MaxTurnsExceeded' } });
  });

  it('a run driven by feeds stops after exactly maxTurns model replies', () => {
    const m = inStart();
    const policy = { maxTurns: 2 };
    for (let t = 1; t <= 2; t++) {
      expect(m.nextStep(policy)).toEqual({ type: 'CallLLM', turn: t });
      m.modelResponse(asst('', [call(`c${t}`)]), 10, ['read']);
      expect(m.nextStep(policy)).toMatchObject({ type: 'CallTools', turn: t });
      m.toolResults([toolMsg(`c${t}`)]);
    }
    expect(m.turnsTaken()).toBe(2);
    expect(m.nextStep(policy)).toEqual({ type: 'Done', outcome: { type: 'MaxTurnsExceeded' } });
  });

  it('the turn limit is checked in AwaitingModel too', () => {
    const m = inAwaitingModel();
    expect(m.nextStep({ maxTurns: 0 })).toEqual({ type: 'Done', outcome: { type: 'MaxTurnsExceeded' } });
    expect(m.state().type).toBe('Terminal');
  });

  it('the turn limit is not checked in AwaitingTools: pending calls are still dispatched', () => {
    const m = inAwaitingTools(); // turnsTaken 1
    expect(m.nextStep({ maxTurns: 1 })).toMatchObject({ type: 'CallTools', turn: 1 });
    m.toolResults([toolMsg('c1')]);
    expect(m.nextStep({ maxTurns: 1 })).toEqual({ type: 'Done', outcome: { type: 'MaxTurnsExceeded' } });
  });

  it('the turn limit wins over the emergency line', () => {
    const m = startWith({ turnsTaken: 4, contextTokens: 1000 });
    expect(m.nextStep({ ...W, maxTurns: 4 })).toEqual({ type: 'Done', outcome: { type: 'MaxTurnsExceeded' } });
  });
});

describe('emergency line: tokens*100 >= window*95', () => {
  it('exactly 95% is an emergency', () => {
    expect(startWith({ contextTokens: 950 }).nextStep(W)).toEqual({ type: 'Compact', reason: 'Emergency' });
  });

  it('one token below 95% is not (with autoCompact off it serves)', () => {
    expect(startWith({ contextTokens: 949 }).nextStep({ ...W, autoCompact: false })).toEqual({
      type: 'CallLLM',
      turn: 1,
    });
  });

  it('is integer-exact with a window that does not divide evenly (95% of 1001 = 950.95)', () => {
    const p = { contextWindow: 1001, autoCompact: false };
    expect(startWith({ contextTokens: 951 }).nextStep(p)).toEqual({ type: 'Compact', reason: 'Emergency' });
    expect(startWith({ contextTokens: 950 }).nextStep(p)).toEqual({ type: 'CallLLM', turn: 1 });
  });

  it('fires even with autoCompact off', () => {
    expect(startWith({ contextTokens: 950 }).nextStep({ ...W, autoCompact: false })).toEqual({
      type: 'Compact',
      reason: 'Emergency',
    });
  });

  it('ignores compactThreshold (even 100)', () => {
    expect(startWith({ contextTokens: 990 }).nextStep({ ...W, compactThreshold: 100 })).toEqual({
      type: 'Compact',
      reason: 'Emergency',
    });
  });

  it('wins over the threshold line when both hold', () => {
    expect(startWith({ contextTokens: 960 }).nextStep({ ...W, compactThreshold: 50 })).toEqual({
      type: 'Compact',
      reason: 'Emergency',
    });
  });

  it('ignores the deferred-compaction latch', () => {
    expect(startWith({ contextTokens: 950, deferredCompaction: true }).nextStep(W)).toEqual({
      type: 'Compact',
      reason: 'Emergency',
    });
  });

  it('is checked in AwaitingModel as well', () => {
    const m = inAwaitingModel();
    m.setContextTokens(990);
    expect(m.nextStep(W)).toEqual({ type: 'Compact', reason: 'Emergency' });
    expect(m.state()).toEqual({ type: 'AwaitingCompaction', reason: 'Emergency' });
  });
});

describe('threshold line: autoCompact && tokens*100 > window*threshold', () => {
  it('exactly at the threshold serves normally (strict)', () => {
    expect(startWith({ contextTokens: 800 }).nextStep(W)).toEqual({ type: 'CallLLM', turn: 1 });
  });

  it('one token above the threshold compacts', () => {
    expect(startWith({ contextTokens: 801 }).nextStep(W)).toEqual({ type: 'Compact', reason: 'ThresholdExceeded' });
  });

  it('is integer-exact (80% of 1001 = 800.8)', () => {
    const p = { contextWindow: 1001 };
    expect(startWith({ contextTokens: 800 }).nextStep(p)).toEqual({ type: 'CallLLM', turn: 1 });
    expect(startWith({ contextTokens: 801 }).nextStep(p)).toEqual({ type: 'Compact', reason: 'ThresholdExceeded' });
  });

  it('follows compactThreshold', () => {
    const p = { ...W, compactThreshold: 50 };
    expect(startWith({ contextTokens: 500 }).nextStep(p)).toEqual({ type: 'CallLLM', turn: 1 });
    expect(startWith({ contextTokens: 501 }).nextStep(p)).toEqual({ type: 'Compact', reason: 'ThresholdExceeded' });
  });

  it('is off when autoCompact is false', () => {
    expect(startWith({ contextTokens: 900 }).nextStep({ ...W, autoCompact: false })).toEqual({
      type: 'CallLLM',
      turn: 1,
    });
  });

  it('is skipped while the deferred-compaction latch holds', () => {
    expect(startWith({ contextTokens: 900, deferredCompaction: true }).nextStep(W)).toEqual({
      type: 'CallLLM',
      turn: 1,
    });
  });
});

describe('contextWindow 0 disables both lines', () => {
  it('huge estimates still call the model', () => {
    const m = startWith({ contextTokens: 1_000_000_000 });
    expect(m.nextStep({ contextWindow: 0 })).toEqual({ type: 'CallLLM', turn: 1 });
  });

  it('even with a threshold of 0', () => {
    expect(startWith({ contextTokens: 5 }).nextStep({ contextWindow: 0, compactThreshold: 0 })).toEqual({
      type: 'CallLLM',
      turn: 1,
    });
  });

  it('with zero tokens and threshold 0 on a real window, 0 > 0 is false: serves', () => {
    expect(startWith({ contextTokens: 0 }).nextStep({ ...W, compactThreshold: 0 })).toEqual({ type: 'CallLLM', turn: 1 });
  });
});

describe('transitions made by a decision', () => {
  it('CallLLM moves Start to AwaitingModel{turn}', () => {
    const m = startWith({ turnsTaken: 4 });
    expect(m.nextStep()).toEqual({ type: 'CallLLM', turn: 5 });
    expect(m.state()).toEqual({ type: 'AwaitingModel', turn: 5 });
  });

  it('Compact moves to AwaitingCompaction, records the reason and the tokens before the pass', () => {
    const m = startWith({ contextTokens: 850 });
    expect(m.nextStep(W)).toEqual({ type: 'Compact', reason: 'ThresholdExceeded' });
    expect(m.state()).toEqual({ type: 'AwaitingCompaction', reason: 'ThresholdExceeded' });
    expect(ctx(m).compactionReason).toBe('ThresholdExceeded');
    expect(ctx(m).lastCompactionTokens).toBe(850);
  });

  it('an emergency Compact records reason Emergency', () => {
    const m = startWith({ contextTokens: 970 });
    m.nextStep(W);
    expect(ctx(m).compactionReason).toBe('Emergency');
    expect(ctx(m).lastCompactionTokens).toBe(970);
  });

  it('AwaitingCompaction repeats Compact(same reason) whatever the policy now says', () => {
    const m = inAwaitingCompaction('ThresholdExceeded');
    expect(m.nextStep({ contextWindow: 0 })).toEqual({ type: 'Compact', reason: 'ThresholdExceeded' });
    expect(m.nextStep({ contextWindow: 10, maxTurns: 0 })).toEqual({ type: 'Compact', reason: 'ThresholdExceeded' });
    const e = inAwaitingCompaction('Emergency');
    expect(e.nextStep({ autoCompact: false, contextWindow: 0 })).toEqual({ type: 'Compact', reason: 'Emergency' });
  });

  it('AwaitingTools answers CallTools(turn = turnsTaken, calls = pendingTools) whatever the estimate', () => {
    const m = inAwaitingTools();
    m.setContextTokens(999);
    const step = m.nextStep(W);
    expect(step).toEqual({ type: 'CallTools', turn: 1, calls: [{ call: call('c1', 'read', { path: 'a' }) }] });
    expect(step).toEqual({ type: 'CallTools', turn: m.turnsTaken(), calls: ctx(m).pendingTools });
    expect(m.state()).toEqual({ type: 'AwaitingTools', turn: 1 });
  });

  it('CallTools carries the pre-answered result of an unknown tool', () => {
    const m = inAwaitingModel();
    m.modelResponse(asst('', [call('a', 'read'), call('b', 'nope')]), 10, ['read']);
    expect(m.nextStep()).toEqual({
      type: 'CallTools',
      turn: 1,
      calls: [
        { call: call('a', 'read') },
        {
          call: call('b', 'nope'),
          preAnswered: {
            role: 'tool',
            toolCallId: 'b',
            toolName: 'nope',
            content: "tool 'nope' is not available",
            isError: true,
          },
        },
      ],
    });
  });

  it('CallLLM after a tool round has turn = turnsTaken + 1', () => {
    const m = inAwaitingTools();
    m.toolResults([toolMsg('c1')]);
    expect(m.nextStep()).toEqual({ type: 'CallLLM', turn: 2 });
  });
});

describe('terminal is forever', () => {
  it('Done(outcome) whatever the policy, every time', () => {
    const m = inTerminal();
    const done = { type: 'Done', outcome: { type: 'Completed', finalText: 'done' } };
    expect(m.nextStep()).toEqual(done);
    expect(m.nextStep({ maxTurns: 0 })).toEqual(done);
    expect(m.nextStep({ contextWindow: 1, autoCompact: true })).toEqual(done);
    expect(m.state()).toEqual({ type: 'Terminal', outcome: done.outcome });
  });

  it('MaxTurnsExceeded stays even when the limit is raised', () => {
    const m = startWith({ turnsTaken: 3 });
    m.nextStep({ maxTurns: 3 });
    expect(m.nextStep({ maxTurns: 1000 })).toEqual({ type: 'Done', outcome: { type: 'MaxTurnsExceeded' } });
  });

  it('terminal is checked before cancelled: a run that completed after cancel() stays Completed', () => {
    const m = inAwaitingModel();
    m.cancel();
    m.modelResponse(asst('finished anyway'), 10, []);
    expect(m.isCancelled()).toBe(true);
    expect(m.nextStep()).toEqual({ type: 'Done', outcome: { type: 'Completed', finalText: 'finished anyway' } });
    expect(m.state()).toEqual({ type: 'Terminal', outcome: { type: 'Completed', finalText: 'finished anyway' } });
  });
});

describe('cancelled', () => {
  it('cancel() in Start: next step is Done(Cancelled) and the machine becomes Terminal(Cancelled)', () => {
    const m = inStart();
    m.cancel();
    expect(m.state()).toEqual({ type: 'Start' });
    expect(m.nextStep()).toEqual({ type: 'Done', outcome: { type: 'Cancelled' } });
    expect(m.state()).toEqual({ type: 'Terminal', outcome: { type: 'Cancelled' } });
    expect(m.isTerminal()).toBe(true);
    expect(m.nextStep()).toEqual({ type: 'Done', outcome: { type: 'Cancelled' } });
  });

  it('cancelled wins over pending tool calls', () => {
    const m = inAwaitingTools();
    m.cancel();
    expect(m.nextStep()).toEqual({ type: 'Done', outcome: { type: 'Cancelled' } });
  });

  it('cancelled wins over a compaction in progress', () => {
    const m = inAwaitingCompaction();
    m.cancel();
    expect(m.nextStep()).toEqual({ type: 'Done', outcome: { type: 'Cancelled' } });
  });

  it('cancelled wins over the turn limit and the emergency line', () => {
    const m = startWith({ turnsTaken: 10, contextTokens: 999 });
    m.cancel();
    expect(m.nextStep({ ...W, maxTurns: 1 })).toEqual({ type: 'Done', outcome: { type: 'Cancelled' } });
  });

  it('cancelled in AwaitingModel ends the run at the next step', () => {
    const m = inAwaitingModel();
    m.cancel();
    expect(m.nextStep()).toEqual({ type: 'Done', outcome: { type: 'Cancelled' } });
  });
});

describe('asking is repeatable and records nothing beyond the transition', () => {
  const cases: Array<[string, () => LoopMachine, Partial<Policy>]> = [
    ['CallLLM', inStart, {}],
    ['Compact', () => startWith({ contextTokens: 850 }), W],
    ['CallTools', inAwaitingTools, {}],
    ['Done(MaxTurnsExceeded)', () => startWith({ turnsTaken: 2 }), { maxTurns: 2 }],
    [
      'Done(Cancelled)',
      () => {
        const m = inStart();
        m.cancel();
        return m;
      },
      {},
    ],
    ['Done(Completed)', inTerminal, {}],
  ];
  for (const [name, make, policy] of cases) {
    it(`${name}: the second answer equals the first and changes nothing`, () => {
      const m = make();
      const first = m.nextStep(policy);
      const after = snap(m);
      expect(m.nextStep(policy)).toEqual(first);
      expect(snap(m)).toEqual(after);
      expect(m.nextStep(policy)).toEqual(first);
    });
  }
});

describe('a returned step is a value, not a view into the machine', () => {
  it('mutating CallTools.calls does not change the pending calls', () => {
    const m = inAwaitingTools();
    const before = snap(m);
    const step = m.nextStep();
    if (step.type !== 'CallTools') throw new Error(step.type);
    step.calls.length = 0;
    expect(snap(m)).toEqual(before);
    expect(m.nextStep()).toMatchObject({ type: 'CallTools', calls: [{ call: call('c1', 'read', { path: 'a' }) }] });
  });

  it('mutating Done.outcome does not change the outcome', () => {
    const m = inTerminal();
    const step = m.nextStep();
    if (step.type !== 'Done' || step.outcome.type !== 'Completed') throw new Error(step.type);
    step.outcome.finalText = 'tampered';
    expect(m.state()).toEqual({ type: 'Terminal', outcome: { type: 'Completed', finalText: 'done' } });
  });
});

describe('the pure nextStep(snapshot, policy) of the machine module', () => {
  const full = (p: Partial<Policy> = {}): Policy => ({ ...DEFAULT_POLICY, ...p });

  it('answers like the facade without moving the actor', () => {
    const m = inStart();
    const before = snap(m);
    expect(pureNextStep(m.actor.getSnapshot(), full())).toEqual({ type: 'CallLLM', turn: 1 });
    expect(m.state()).toEqual({ type: 'Start' });
    expect(snap(m)).toEqual(before);
  });

  it('returns Done(Cancelled) for a cancelled machine without making it Terminal', () => {
    const m = inAwaitingTools();
    m.cancel();
    expect(pureNextStep(m.actor.getSnapshot(), full())).toEqual({ type: 'Done', outcome: { type: 'Cancelled' } });
    expect(m.state().type).toBe('AwaitingTools');
  });

  it('follows the same lines as the facade', () => {
    for (const [tokens, policy] of [
      [950, full(W)],
      [949, full({ ...W, autoCompact: false })],
      [801, full(W)],
      [800, full(W)],
      [5_000, full({ contextWindow: 0 })],
    ] as const) {
      const a = startWith({ contextTokens: tokens });
      const b = startWith({ contextTokens: tokens });
      expect(pureNextStep(a.actor.getSnapshot(), policy)).toEqual(b.nextStep(policy));
    }
  });

  it('answers CallTools, Compact and Done in the other states', () => {
    for (const m of [inAwaitingTools(), inAwaitingCompaction('ThresholdExceeded'), inTerminal()]) {
      const facadeAnswer = LoopMachine.restore(snap(m)).nextStep();
      expect(pureNextStep(m.actor.getSnapshot(), full())).toEqual(facadeAnswer);
    }
  });
});
