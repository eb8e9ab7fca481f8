/**
 * Property-based tests: random sequences of feeds, chosen by a small model of which feed is legal in
 * which state, keep the brain's invariants at every point. properties.test.ts runs them at a size
 * for `test:fast` (30, 15 and 30 sequences of up to 60 feeds), properties.slow.test.ts at the size
 * CI holds them to (100, 50 and 100).
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { createActor } from 'xstate';
import { LoopMachine } from '../../src/brain/loop-machine.js';
import { loopSnapshotProblem } from '../../src/brain/loop-snapshot.js';
import { coherentCut, loopMachine, nextStep as pureNextStep } from '../../machines/loop.machine.js';
import {
  DEFAULT_POLICY,
  StepSchema,
  type Message,
  type PendingToolCall,
  type Policy,
  type StateName,
  type Step,
} from '../../src/schemas.js';
import {
  asst,
  call,
  expectIllegal,
  expectInvalid,
  providerValid,
  refCoherentCut,
  snap,
  sys,
  toolMsg,
  user,
} from '../support/brain.js';

const POLICIES: Array<Partial<Policy>> = [
  {},
  { contextWindow: 1000 },
  { contextWindow: 1000, autoCompact: false },
  { contextWindow: 1000, maxTurns: 3 },
  { contextWindow: 0 },
  { contextWindow: 1000, compactThreshold: 50 },
];
const full = (p: Partial<Policy>): Policy => ({ ...DEFAULT_POLICY, ...p });
const roundTrip = <T>(x: T): T => JSON.parse(JSON.stringify(x)) as T;

const STARTING_HISTORIES: Message[][] = [
  [],
  [sys()],
  [sys(), user('earlier'), asst('', [call('h1', 'read')]), toolMsg('h1', 'read', 'H'), asst('earlier answer')],
];

interface Op {
  k: number;
  a: number;
  b: number;
  c: number;
}
const opArb: fc.Arbitrary<Op> = fc.record({ k: fc.nat(9999), a: fc.nat(1000), b: fc.nat(1000), c: fc.nat(1000) });

const ctxOf = (m: LoopMachine) =>
  m.toJSON() as unknown as {
    state: StateName;
    history: Message[];
    pending: Message[];
    pendingTools: PendingToolCall[];
    steering: Message[];
    outcome: unknown;
    compactionReason: unknown;
    deferredCompaction: boolean;
  };

// ------------------------------------------------------------------ legality model

const NON_TERMINAL_FEEDS = ['acceptInput', 'inject', 'setContextTokens', 'cancel', 'fail', 'steer', 'adoptPruned'];
function isLegal(feed: string, state: StateName, pendingEmpty: boolean): boolean {
  if (NON_TERMINAL_FEEDS.includes(feed)) return state !== 'Terminal';
  switch (feed) {
    case 'modelResponse':
      return state === 'AwaitingModel';
    case 'toolResults':
      return state === 'AwaitingTools';
    case 'compactionResult':
    case 'compactionNoop':
      return state === 'AwaitingCompaction';
    case 'commitPending':
    case 'discardPending':
    case 'salvagePending':
      return state === 'Start' || state === 'Terminal';
    case 'rewindTo':
      return (state === 'Start' || state === 'Terminal') && pendingEmpty;
    default:
      throw new Error(feed);
  }
}
const PROBES: Record<string, (m: LoopMachine) => unknown> = {
  acceptInput: (m) => m.acceptInput(user('x')),
  modelResponse: (m) => m.modelResponse(asst('x'), 1, []),
  toolResults: (m) => m.toolResults([]),
  compactionResult: (m) => m.compactionResult([user('s')], 10, 1),
  compactionNoop: (m) => m.compactionNoop(10, 1),
  inject: (m) => m.inject(user('x')),
  setContextTokens: (m) => m.setContextTokens(1),
  cancel: (m) => m.cancel(),
  fail: (m) => m.fail({ type: 'X', message: 'y' }),
  steer: (m) => m.steer(user('x')),
  adoptPruned: (m) => m.adoptPruned(m.fullHistory()),
  commitPending: (m) => m.commitPending(),
  discardPending: (m) => m.discardPending(),
  salvagePending: (m) => m.salvagePending(),
  rewindTo: (m) => m.rewindTo(0),
};

// ------------------------------------------------------------------ the driver of random legal feeds

interface Action {
  name: string;
  weight: number;
  when: (m: LoopMachine) => boolean;
  /** Runs the feed and asserts the expected state afterwards. */
  run: (m: LoopMachine, op: Op, ids: { n: number }) => void;
}

const stateOf = (m: LoopMachine): StateName => m.state().type;
const nonTerminal = (m: LoopMachine) => stateOf(m) !== 'Terminal';
const stateAfterStep: Record<Step['type'], StateName> = {
  CallLLM: 'AwaitingModel',
  CallTools: 'AwaitingTools',
  Compact: 'AwaitingCompaction',
  Done: 'Terminal',
};

/** What the no-progress guard should do; returns the expected state. */
function expectedAfterCompaction(m: LoopMachine, before: number, after: number, policy: Partial<Policy>): StateName {
  if (after < before) return 'Start';
  const reason = ctxOf(m).compactionReason;
  const w = full(policy).contextWindow;
  if (reason === 'ThresholdExceeded' && (w === 0 || after * 100 < w * 95)) return 'Start';
  return 'Terminal';
}

function compactedFor(m: LoopMachine, op: Op, ids: { n: number }): Message[] {
  switch (op.a % 3) {
    case 0:
      return [user('summary')];
    case 1: {
      const id = `k${ids.n++}`;
      return [sys(), asst('summary'), asst('tail', [call(id, 'read')]), toolMsg(id, 'read', 'T')];
    }
    default:
      return m.fullHistory().slice(0, m.lastCoherentLen());
  }
}

interface RunOpts {
  injectInAwaitingTools: boolean;
  /** Tool-call ids unique within a reply but reused across replies (c0, c1, ... every time). */
  reuseIds?: boolean;
}

function makeActions(opts: RunOpts): Action[] {
  return [
    {
      name: 'nextStep',
      weight: 8,
      when: () => true,
      run: (m, op) => {
        const policy = POLICIES[op.c % POLICIES.length]!;
        const expected = LoopMachine.restore(snap(m)).nextStep(policy);
        const step = m.nextStep(policy);
        expect(step).toEqual(expected);
        expect(StepSchema.safeParse(step).success).toBe(true);
        expect(stateOf(m)).toBe(stateAfterStep[step.type]);
        const after = snap(m);
        expect(m.nextStep(policy)).toEqual(step); // repeatable
        expect(snap(m)).toEqual(after);
        if (step.type === 'CallTools') expect(step.calls).toEqual(ctxOf(m).pendingTools);
      },
    },
    {
      name: 'modelResponse',
      weight: 6,
      when: (m) => stateOf(m) === 'AwaitingModel',
      run: (m, op, ids) => {
        const names = ['read', 'write', 'ghost'];
        const calls = Array.from({ length: op.a % 4 }, (_, i) =>
          call(opts.reuseIds ? `c${i}` : `t${ids.n++}`, names[(op.b >> (2 * i)) % 3]!, { i }),
        );
        const steering = ctxOf(m).steering.length;
        m.modelResponse(asst(`r${op.b}`, calls.length ? calls : undefined), op.c % 1100, ['read', 'write']);
        expect(stateOf(m)).toBe(calls.length ? 'AwaitingTools' : steering ? 'Start' : 'Terminal');
        expect(m.contextTokens()).toBe(op.c % 1100);
      },
    },
    {
      name: 'toolResults',
      weight: 6,
      when: (m) => stateOf(m) === 'AwaitingTools',
      run: (m, op) => {
        const pt = ctxOf(m).pendingTools;
        const results = pt.map((p) => p.preAnswered ?? toolMsg(p.call.id, p.call.name, `out ${p.call.id}`));
        const r = op.a % results.length;
        const given = [...results.slice(r), ...results.slice(0, r)];
        const full0 = m.fullHistory();
        const total = m.totalToolCalls();
        m.toolResults(given);
        expect(stateOf(m)).toBe('Start');
        expect(m.fullHistory().slice(full0.length, full0.length + results.length)).toEqual(results);
        expect(m.totalToolCalls()).toBe(total + results.length);
      },
    },
    {
      name: 'compactionResult',
      weight: 3,
      when: (m) => stateOf(m) === 'AwaitingCompaction',
      run: (m, op, ids) => {
        const compacted = compactedFor(m, op, ids);
        const before = m.contextTokens();
        const after = op.b % 1100;
        const policy = POLICIES[op.c % POLICIES.length]!;
        const want = expectedAfterCompaction(m, before, after, policy);
        m.compactionResult(compacted, before, after, policy);
        expect(stateOf(m)).toBe(want);
      },
    },
    {
      name: 'compactionNoop',
      weight: 2,
      when: (m) => stateOf(m) === 'AwaitingCompaction',
      run: (m, op) => {
        const before = m.contextTokens();
        const after = op.b % 1100;
        const policy = POLICIES[op.c % POLICIES.length]!;
        const want = expectedAfterCompaction(m, before, after, policy);
        const h = m.history();
        m.compactionNoop(before, after, policy);
        expect(stateOf(m)).toBe(want);
        expect(m.history()).toEqual(h);
      },
    },
    {
      name: 'inject',
      weight: 1,
      when: (m) => nonTerminal(m) && (opts.injectInAwaitingTools || stateOf(m) !== 'AwaitingTools'),
      run: (m, op) => {
        const s = m.state();
        const message = op.a % 2 ? user(`inj${op.b}`) : sys(`inj${op.b}`);
        if (s.type === 'AwaitingTools') {
          // Between a call and its results a message would break the provider's order.
          expectIllegal(m, 'inject', 'AwaitingTools', () => m.inject(message));
          return;
        }
        m.inject(message);
        expect(m.state()).toEqual(s);
      },
    },
    {
      name: 'setContextTokens',
      weight: 2,
      when: nonTerminal,
      run: (m, op) => {
        m.setContextTokens(op.a % 1100);
        expect(m.contextTokens()).toBe(op.a % 1100);
      },
    },
    {
      name: 'steer',
      weight: 2,
      when: nonTerminal,
      run: (m, op) => {
        const s = m.state();
        m.steer(user(`steer${op.a}`));
        expect(m.state()).toEqual(s);
      },
    },
    {
      name: 'acceptInput',
      weight: 1,
      when: nonTerminal,
      run: (m, op) => {
        m.acceptInput(user(`in${op.a}`));
        expect(stateOf(m)).toBe('Start');
        expect(m.turnsTaken()).toBe(0);
      },
    },
    {
      name: 'cancel',
      weight: 0.3,
      when: nonTerminal,
      run: (m) => {
        m.cancel();
        expect(m.isCancelled()).toBe(true);
      },
    },
    {
      name: 'fail',
      weight: 0.3,
      when: nonTerminal,
      run: (m) => {
        m.fail({ type: 'X', message: 'boom' });
        expect(stateOf(m)).toBe('Terminal');
      },
    },
    {
      name: 'seal',
      weight: 0.3,
      when: () => true,
      run: (m, op) => {
        const wasTerminal = m.isTerminal();
        const before = snap(m);
        m.seal(`reason${op.a}`);
        if (wasTerminal) expect(snap(m)).toEqual(before);
        else expect(m.state()).toEqual({ type: 'Terminal', outcome: { type: 'Sealed', reason: `reason${op.a}` } });
      },
    },
    {
      name: 'adoptPruned',
      weight: 1,
      when: nonTerminal,
      run: (m) => {
        const hl = m.history().length;
        const pruned = m.fullHistory().map((x, i) => ({ ...x, content: `p${i}` }) as Message);
        const s = m.state();
        m.adoptPruned(pruned);
        expect(m.fullHistory()).toEqual(pruned);
        expect(m.history()).toEqual(pruned.slice(0, hl));
        expect(m.state()).toEqual(s);
      },
    },
    {
      name: 'commitPending',
      weight: 1,
      when: (m) => stateOf(m) === 'Start' || stateOf(m) === 'Terminal',
      run: (m) => {
        const f = m.fullHistory();
        if (refCoherentCut(ctxOf(m).pending, Infinity) === ctxOf(m).pending.length) {
          m.commitPending();
          expect(m.history()).toEqual(f);
        } else {
          expectInvalid(m, 'commitPending', () => m.commitPending());
        }
      },
    },
    {
      name: 'salvagePending',
      weight: 1,
      when: (m) => stateOf(m) === 'Start' || stateOf(m) === 'Terminal',
      run: (m) => {
        const { history, pending } = ctxOf(m);
        const keep = refCoherentCut(pending, Infinity);
        expect(m.salvagePending()).toEqual({ committed: keep, dropped: pending.length - keep });
        expect(m.fullHistory()).toEqual([...history, ...pending.slice(0, keep)]);
      },
    },
    {
      name: 'discardPending',
      weight: 0.5,
      when: (m) => stateOf(m) === 'Start' || stateOf(m) === 'Terminal',
      run: (m) => {
        const h = m.history();
        m.discardPending();
        expect(m.fullHistory()).toEqual(h);
      },
    },
    {
      name: 'rewindTo',
      weight: 1,
      when: (m) => stateOf(m) === 'Start' || stateOf(m) === 'Terminal',
      run: (m, op) => {
        const h = m.history();
        const len = op.a % (h.length + 2);
        if (ctxOf(m).pending.length > 0) {
          expectIllegal(m, 'rewindTo', stateOf(m), () => m.rewindTo(len));
          return;
        }
        const cut = len >= h.length ? h.length : refCoherentCut(h, len);
        expect(m.rewindTo(len)).toBe(h.length - cut);
        expect(m.history()).toEqual(h.slice(0, cut));
      },
    },
    {
      name: 'illegal feed',
      weight: 1,
      when: () => true,
      run: (m, op) => {
        const s = stateOf(m);
        const empty = ctxOf(m).pending.length === 0;
        const illegal = Object.keys(PROBES).filter((f) => !isLegal(f, s, empty));
        if (illegal.length === 0) return;
        const feed = illegal[op.a % illegal.length]!;
        expectIllegal(m, feed, s, () => PROBES[feed]!(m));
      },
    },
  ];
}

function pick(actions: Action[], m: LoopMachine, k: number): Action {
  const ok = actions.filter((a) => a.when(m));
  const total = ok.reduce((s, a) => s + a.weight, 0);
  let x = (k / 10000) * total;
  for (const a of ok) {
    if (x < a.weight) return a;
    x -= a.weight;
  }
  return ok[ok.length - 1]!;
}

// ------------------------------------------------------------------ invariants

function checkInvariants(m: LoopMachine): void {
  const c = ctxOf(m);
  const fh = m.fullHistory();
  // fullHistory is exactly history + pending
  expect(m.history()).toEqual(c.history);
  expect(fh).toEqual([...c.history, ...c.pending]);
  // committed history never holds an unanswered tool call
  expect(refCoherentCut(c.history, Infinity)).toBe(c.history.length);
  expect(coherentCut(c.history, Infinity)).toBe(c.history.length);
  // whenever the state is Start, the whole conversation is coherent
  if (c.state === 'Start') {
    expect(coherentCut(fh, Infinity)).toBe(fh.length);
    expect(refCoherentCut(fh, Infinity)).toBe(fh.length);
    expect(providerValid(fh), JSON.stringify(fh)).toBe(true);
  }
  expect(providerValid(c.history), JSON.stringify(c.history)).toBe(true);
  // the one snapshot validation accepts every snapshot the machine makes
  expect(loopSnapshotProblem(m.toJSON())).toBeNull();
  expect(loopSnapshotProblem(m.actor.getPersistedSnapshot())).toBeNull();
  // reads agree with the persisted form
  expect(m.lastCoherentLen()).toBe(refCoherentCut(fh, Infinity));
  expect(m.isTerminal()).toBe(c.state === 'Terminal');
  expect(c.outcome !== null).toBe(c.state === 'Terminal');
  if (c.state !== 'Terminal') {
    // a compaction reason only while compacting; pending calls only while awaiting tools
    expect(c.compactionReason !== null).toBe(c.state === 'AwaitingCompaction');
    expect(c.pendingTools.length > 0).toBe(c.state === 'AwaitingTools');
  }
  if (c.state === 'AwaitingTools') {
    // the pending calls are exactly the unanswered calls of the last assistant message
    const last = [...c.pending].reverse().find((x) => x.role === 'assistant');
    expect(c.pendingTools.map((p) => p.call)).toEqual(last && last.role === 'assistant' ? last.toolCalls : []);
  }

  // round trips: toJSON -> restore gives the same JSON and the same decisions (fresh restore each time)
  const saved = snap(m);
  expect(LoopMachine.restore(saved).toJSON()).toEqual(m.toJSON());
  const persisted = roundTrip(m.actor.getPersistedSnapshot());
  for (const p of [POLICIES[1]!, POLICIES[3]!]) {
    const original = pureNextStep(m.actor.getSnapshot(), full(p));
    const r = LoopMachine.restore(saved);
    const d = r.nextStep(p);
    expect(d).toEqual(original);
    expect(r.nextStep(p)).toEqual(d);
    const actor = createActor(loopMachine, { input: {}, snapshot: persisted as never }).start();
    expect(pureNextStep(actor.getSnapshot(), full(p))).toEqual(original);
    actor.stop();
  }
  // asking the pure query changed nothing
  expect(snap(m)).toEqual(saved);
}

function runOps(history: Message[], ops: Op[], opts: RunOpts): void {
  const actions = makeActions(opts);
  const m = new LoopMachine({ history });
  const ids = { n: 0 };
  checkInvariants(m);
  for (const op of ops) {
    const a = pick(actions, m, op.k);
    a.run(m, op, ids);
    checkInvariants(m);
  }
}

// ------------------------------------------------------------------ properties

/** The three feed-sequence properties, `runs` random sequences each, as a describe block. */
export function describeFeedSequences(runs: { plain: number; inject: number; reuse: number }): void {
  describe('random legal feed sequences', () => {
    it('keep coherence, provider shape, repeatable decisions and exact round trips', () => {
      fc.assert(
        fc.property(fc.constantFrom(...STARTING_HISTORIES), fc.array(opArb, { maxLength: 60, size: 'max' }), (history, ops) => {
          runOps(history, ops, { injectInAwaitingTools: false });
        }),
        { numRuns: runs.plain },
      );
    });

    it('keep coherence and provider shape when injects are tried between a tool call and its results (refused)', () => {
      fc.assert(
        fc.property(fc.constantFrom(...STARTING_HISTORIES), fc.array(opArb, { maxLength: 60, size: 'max' }), (history, ops) => {
          runOps(history, ops, { injectInAwaitingTools: true });
        }),
        { numRuns: runs.inject },
      );
    });

    it('keep the same invariants when providers reuse tool-call ids across replies', () => {
      fc.assert(
        fc.property(fc.constantFrom(...STARTING_HISTORIES), fc.array(opArb, { maxLength: 60, size: 'max' }), (history, ops) => {
          runOps(history, ops, { injectInAwaitingTools: false, reuseIds: true });
        }),
        { numRuns: runs.reuse },
      );
    });
  });
}
