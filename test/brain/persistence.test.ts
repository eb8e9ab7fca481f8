/** toJSON / LoopMachine.restore and XState's persisted snapshots: identical decisions after resume. */
import { describe, expect, it } from 'vitest';
import { createActor } from 'xstate';
import { LoopMachine } from '../../src/brain/loop-machine.js';
import { loopMachine, nextStep as pureNextStep } from '../../machines/loop.machine.js';
import { InvalidSnapshotError } from '../../src/errors.js';
import { DEFAULT_POLICY, LoopSnapshotSchema, type Policy, type Step } from '../../src/schemas.js';
import {
  asst,
  call,
  inAwaitingCompaction,
  inAwaitingModel,
  inAwaitingTools,
  inStart,
  inTerminal,
  notAvailable,
  snap,
  sys,
  toolMsg,
  user,
} from '../support/brain.js';

const P = { contextWindow: 1000 } as const;
const POLICIES: Array<Partial<Policy>> = [
  {},
  P,
  { ...P, autoCompact: false },
  { maxTurns: 1 },
  { contextWindow: 0 },
  { ...P, compactThreshold: 50, maxTurns: 2 },
];
const full = (p: Partial<Policy>): Policy => ({ ...DEFAULT_POLICY, ...p });
const roundTrip = <T>(x: T): T => JSON.parse(JSON.stringify(x)) as T;

/** A run that passes every state, the deferred latch, both compaction feeds and steering. */
type Action = (m: LoopMachine) => Step | void;
const SCRIPT: Action[] = [
  (m) => m.acceptInput(user('question')),
  (m) => m.nextStep(P), // CallLLM 1
  (m) => m.steer(user('steer')),
  (m) => m.modelResponse(asst('', [call('a', 'read'), call('b', 'ghost')]), 300, ['read']),
  (m) => m.nextStep(P), // CallTools
  (m) => m.toolResults([notAvailable('b', 'ghost'), toolMsg('a', 'read', 'A')]),
  (m) => m.setContextTokens(850),
  (m) => m.nextStep(P), // Compact(ThresholdExceeded)
  (m) => m.compactionNoop(850, 850, P), // stall that fits: latch
  (m) => m.nextStep(P), // CallLLM 2
  (m) => m.inject(sys('note')),
  (m) => m.modelResponse(asst('', [call('c', 'read')]), 960, ['read']),
  (m) => m.toolResults([toolMsg('c', 'read', 'C')]),
  (m) => m.nextStep(P), // Compact(Emergency)
  (m) => m.compactionResult([sys(), asst('summary'), asst('tail')], 960, 200, P),
  (m) => m.nextStep(P), // CallLLM 3
  (m) => m.modelResponse(asst('final'), 250, []),
  (m) => m.nextStep(P), // Done(Completed)
  (m) => m.commitPending(),
];

function runScript(upTo = SCRIPT.length): LoopMachine {
  const m = new LoopMachine({ history: [sys()] });
  for (const a of SCRIPT.slice(0, upTo)) a(m);
  return m;
}

describe('toJSON', () => {
  it('of a fresh machine is the versioned, plain initial state', () => {
    expect(new LoopMachine().toJSON()).toEqual({
      version: 1,
      state: 'Start',
      history: [],
      pending: [],
      pendingTools: [],
      turnsTaken: 0,
      contextTokens: 0,
      cancelled: false,
      lastCompactionTokens: null,
      deferredCompaction: false,
      totalToolCalls: 0,
      compactionReason: null,
      steering: [],
      outcome: null,
    });
  });

  it('never contains the policy', () => {
    const m = inStart();
    m.nextStep({ maxTurns: 7, contextWindow: 1234, compactThreshold: 42, autoCompact: false });
    const json = JSON.stringify(m.toJSON());
    for (const k of ['maxTurns', 'contextWindow', 'compactThreshold', 'autoCompact', '1234']) {
      expect(json).not.toContain(k);
    }
  });

  it('is plain JSON that matches the snapshot schema at every point of a run', () => {
    for (let k = 0; k <= SCRIPT.length; k++) {
      const j = runScript(k).toJSON();
      expect(roundTrip(j)).toEqual(j);
      const parsed = LoopSnapshotSchema.safeParse(j);
      expect(parsed.success, `point ${k}: ${parsed.error?.message}`).toBe(true);
    }
  });

  it('names the state', () => {
    expect(inStart().toJSON().state).toBe('Start');
    expect(inAwaitingModel().toJSON().state).toBe('AwaitingModel');
    expect(inAwaitingTools().toJSON().state).toBe('AwaitingTools');
    expect(inAwaitingCompaction().toJSON().state).toBe('AwaitingCompaction');
    expect(inTerminal().toJSON().state).toBe('Terminal');
  });
});

describe('LoopMachine.restore from toJSON', () => {
  it('at every point of a run: same JSON, same state, same decisions for every policy', () => {
    for (let k = 0; k <= SCRIPT.length; k++) {
      const m = runScript(k);
      const saved = snap(m);
      const r = LoopMachine.restore(saved);
      expect(r.toJSON(), `point ${k}`).toEqual(m.toJSON());
      expect(r.state()).toEqual(m.state());
      expect(r.fullHistory()).toEqual(m.fullHistory());
      expect(r.lastCoherentLen()).toBe(m.lastCoherentLen());
      for (const p of POLICIES) {
        const original = pureNextStep(m.actor.getSnapshot(), full(p));
        expect(LoopMachine.restore(saved).nextStep(p), `point ${k} policy ${JSON.stringify(p)}`).toEqual(original);
      }
    }
  });

  it('the original’s own next decision equals the restored machine’s', () => {
    const m = new LoopMachine({ history: [sys()] });
    for (const a of SCRIPT) {
      const restored = LoopMachine.restore(snap(m));
      const expected = a(restored);
      const got = a(m);
      expect(got).toEqual(expected);
      expect(restored.toJSON()).toEqual(m.toJSON());
    }
  });

  it('a run resumed from any point ends exactly like the uninterrupted one', () => {
    const end = runScript().toJSON();
    for (let k = 0; k <= SCRIPT.length; k++) {
      const r = LoopMachine.restore(snap(runScript(k)));
      for (const a of SCRIPT.slice(k)) a(r);
      expect(r.toJSON(), `resumed at ${k}`).toEqual(end);
    }
  });

  it('terminal outcomes survive: Completed, Cancelled, MaxTurnsExceeded, Sealed, Failed', () => {
    const make: Array<() => LoopMachine> = [
      inTerminal,
      () => {
        const m = inStart();
        m.cancel();
        m.nextStep();
        return m;
      },
      () => {
        const m = inStart();
        m.nextStep({ maxTurns: 0 });
        return m;
      },
      () => {
        const m = inAwaitingTools();
        m.seal('budget');
        return m;
      },
      () => {
        const m = inAwaitingCompaction();
        m.fail({ type: 'Boom', message: 'it broke' });
        return m;
      },
    ];
    for (const f of make) {
      const m = f();
      const r = LoopMachine.restore(snap(m));
      expect(r.isTerminal()).toBe(true);
      expect(r.state()).toEqual(m.state());
      expect(r.nextStep({ maxTurns: 1000 })).toEqual({ type: 'Done', outcome: (m.state() as { outcome: unknown }).outcome });
    }
  });

  it('a cancel flag survives and still decides', () => {
    const m = inAwaitingTools();
    m.cancel();
    const r = LoopMachine.restore(snap(m));
    expect(r.isCancelled()).toBe(true);
    expect(r.nextStep()).toEqual({ type: 'Done', outcome: { type: 'Cancelled' } });
  });

  it('the restored machine is live: feeds work and illegal feeds still throw', () => {
    const r = LoopMachine.restore(snap(inAwaitingTools()));
    expect(() => r.modelResponse(asst('x'), 1, [])).toThrow();
    r.toolResults([toolMsg('c1')]);
    expect(r.nextStep()).toEqual({ type: 'CallLLM', turn: 2 });
  });

  it('whatever salvagePending commits still restores (a failed turn with unanswered calls)', () => {
    const m = inAwaitingTools();
    m.fail({ type: 'X', message: 'tools crashed' });
    expect(m.salvagePending()).toEqual({ committed: 1, dropped: 1 });
    const r = LoopMachine.restore(snap(m));
    expect(r.toJSON()).toEqual(m.toJSON());
  });

  it('does not keep references into the input object', () => {
    const saved = snap(inAwaitingTools()) as { history: unknown[]; pending: unknown[] };
    const r = LoopMachine.restore(saved);
    const before = snap(r);
    saved.history.push(user('mutated'));
    saved.pending.length = 0;
    expect(snap(r)).toEqual(before);
  });
});

describe('LoopMachine.restore from XState’s persisted snapshot', () => {
  it('at every point of a run equals the toJSON restore', () => {
    for (let k = 0; k <= SCRIPT.length; k++) {
      const m = runScript(k);
      const persisted = roundTrip(m.actor.getPersistedSnapshot());
      const r = LoopMachine.restore(persisted);
      expect(r.toJSON(), `point ${k}`).toEqual(m.toJSON());
      expect(r.nextStep(P)).toEqual(LoopMachine.restore(snap(m)).nextStep(P));
    }
  });
});

describe('createActor(loopMachine, { snapshot }) from a persisted snapshot', () => {
  it('resumes with identical pure decisions at every point, terminal included', () => {
    for (let k = 0; k <= SCRIPT.length; k++) {
      const m = runScript(k);
      const actor = createActor(loopMachine, { input: {}, snapshot: roundTrip(m.actor.getPersistedSnapshot()) as never });
      actor.start();
      expect(actor.getSnapshot().value).toBe(m.toJSON().state);
      expect(actor.getSnapshot().context).toEqual(
        Object.fromEntries(Object.entries(m.toJSON()).filter(([key]) => key !== 'version' && key !== 'state')),
      );
      for (const p of POLICIES) {
        expect(pureNextStep(actor.getSnapshot(), full(p)), `point ${k}`).toEqual(
          pureNextStep(m.actor.getSnapshot(), full(p)),
        );
      }
      actor.stop();
    }
  });

  it('raw events on a restored actor continue the run exactly like the original actor', () => {
    const pol = full(P);
    const events = [
      { type: 'acceptInput', message: user('q') },
      { type: 'next', policy: pol },
      { type: 'modelResponse', response: asst('', [call('a', 'read')]), contextTokens: 900, availableTools: ['read'] },
      { type: 'next', policy: pol },
      { type: 'toolResults', messages: [toolMsg('a', 'read', 'A')] },
      { type: 'next', policy: pol }, // Compact(ThresholdExceeded)
      { type: 'compactionResult', compacted: [user('summary')], before: 900, after: 100, contextWindow: 1000 },
      { type: 'next', policy: pol },
      { type: 'modelResponse', response: asst('bye'), contextTokens: 120, availableTools: ['read'] },
      { type: 'next', policy: pol },
    ] as const;
    const original = createActor(loopMachine, { input: {} }).start();
    for (const e of events) original.send(e as never);
    const end = original.getSnapshot();
    expect(end.value).toBe('Terminal');
    expect(end.context.outcome).toEqual({ type: 'Completed', finalText: 'bye' });

    for (let k = 0; k <= events.length; k++) {
      const a = createActor(loopMachine, { input: {} }).start();
      for (const e of events.slice(0, k)) a.send(e as never);
      const b = createActor(loopMachine, { input: {}, snapshot: roundTrip(a.getPersistedSnapshot()) as never }).start();
      for (const e of events.slice(k)) b.send(e as never);
      expect(b.getSnapshot().value, `resumed at ${k}`).toBe(end.value);
      expect(b.getSnapshot().context, `resumed at ${k}`).toEqual(end.context);
      a.stop();
      b.stop();
    }
    original.stop();
  });
});

describe('restore rejects bad input with InvalidSnapshotError saying what is wrong', () => {
  const good = () => snap(inAwaitingTools()) as Record<string, unknown>;
  const rejects = (input: unknown, mentions?: RegExp) => {
    let err: unknown;
    try {
      LoopMachine.restore(input as never);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(InvalidSnapshotError);
    if (mentions) expect((err as Error).message).toMatch(mentions);
  };

  it('non-objects', () => {
    for (const x of [null, undefined, 42, 'snapshot', [], true]) rejects(x);
  });

  it('an unknown version', () => {
    rejects({ ...good(), version: 2 }, /version/);
  });

  it('a missing version', () => {
    const { version: _v, ...rest } = good();
    rejects(rest, /version/);
  });

  it('a missing field', () => {
    const { history: _h, ...rest } = good();
    rejects(rest, /history/);
  });

  it('a field of the wrong type', () => {
    rejects({ ...good(), turnsTaken: '3' }, /turnsTaken/);
    rejects({ ...good(), cancelled: 'no' }, /cancelled/);
    rejects({ ...good(), contextTokens: -1 }, /contextTokens/);
  });

  it('an unknown state name', () => {
    rejects({ ...good(), state: 'Sleeping' }, /state/);
  });

  it('a malformed message', () => {
    rejects({ ...good(), pending: [{ role: 'robot', content: 'x' }] }, /pending/);
  });

  it('Terminal without an outcome', () => {
    const t = snap(inTerminal()) as Record<string, unknown>;
    rejects({ ...t, outcome: null }, /outcome/);
  });

  it('a persisted XState snapshot with a broken context', () => {
    const p = roundTrip(inStart().actor.getPersistedSnapshot()) as unknown as { context: Record<string, unknown> };
    rejects({ ...p, context: { ...p.context, history: 'nope' } }, /history/);
  });
});
