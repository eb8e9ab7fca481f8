/**
 * Tests generated from the brain's chart (machines/loop.machine.ts) with XState's `xstate/graph`:
 * the shortest path to every state of a bounded abstraction of the brain (its state, and the
 * context facts its guards read), then one more path for each transition of the chart those paths
 * do not take. Each path becomes a test that feeds its events, built from the snapshot it is at
 * (a tool result answers the calls pending there), to the statechart, the pure `reduceLoop` and
 * the `LoopMachine` facade: the three agree at every step, reach the state the graph says, and
 * keep the brain's invariants. The states and transitions covered are printed, and must be all.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { createActor } from 'xstate';
import { getShortestPaths } from 'xstate/graph';
import { coherentCut, decide, loopGuards, loopMachine, loopTransitions, reduceLoop, type LoopSnapshot } from '../../machines/loop.machine.js';
import type { LoopEvent } from '../../src/brain/loop-events.js';
import { LoopMachine } from '../../src/brain/loop-machine.js';
import { loopSnapshotProblem } from '../../src/brain/loop-snapshot.js';
import { IllegalFeedError, InvalidFeedError } from '../../src/errors.js';
import { DEFAULT_POLICY, type LoopContext, type Message, type Policy, type StateName } from '../../src/schemas.js';
import { asst, call, providerValid, refCoherentCut, sys, toolMsg, user } from '../support/brain.js';

/** Paths at most (one per transition and per outcome): keeps a change to the abstraction from exploding the suite. */
const MAX_PATHS = 150;

/**
 * Transitions no path can take, and why. `inject` is one of the feeds every running state shares;
 * in AwaitingTools calls always await their results (an invariant checked on every step below) and
 * an injected message would come between them, so the feed is refused there with its reason
 * (IllegalFeedError) and its transition never fires: the state keeps it so the refusal is precise.
 */
const NEVER_TAKEN = new Map([['AwaitingTools inject #0', 'calls always await their results in AwaitingTools: inject is refused there (feedIllegality)']]);

const policy = (overrides: Partial<Policy>): Policy => ({ ...DEFAULT_POLICY, contextWindow: 1000, maxTurns: 3, ...overrides });

/**
 * The sample events, by label, each built from the snapshot it is sent in. The labels are what
 * the graph is drawn over (its event serialization), so a path is a list of labels and replays
 * from any snapshot the abstraction takes for the same.
 */
const SAMPLES: Record<string, (context: LoopContext) => LoopEvent> = {
  next: () => ({ type: 'next', policy: policy({}) }),
  'next(maxTurns 1)': () => ({ type: 'next', policy: policy({ maxTurns: 1 }) }),
  acceptInput: () => ({ type: 'acceptInput', message: user('hello') }),
  'modelResponse(tool call)': () => ({ type: 'modelResponse', response: asst('let me look', [call('c1', 'read', { path: 'a' })]), contextTokens: 100, availableTools: ['read'] }),
  'modelResponse(unknown tool)': () => ({ type: 'modelResponse', response: asst('', [call('c2', 'ghost')]), contextTokens: 100, availableTools: ['read'] }),
  'modelResponse(text)': () => ({ type: 'modelResponse', response: asst('done'), contextTokens: 100, availableTools: ['read'] }),
  'modelResponse(text, length)': () => ({ type: 'modelResponse', response: asst('cut'), contextTokens: 100, availableTools: [], finishReason: 'length' }),
  toolResults: (context) => ({ type: 'toolResults', messages: context.pendingTools.map((pending) => pending.preAnswered ?? toolMsg(pending.call.id, pending.call.name, 'out')) }),
  'compactionResult(progress)': () => ({ type: 'compactionResult', compacted: [sys(), user('summary')], before: 960, after: 100, contextWindow: 1000 }),
  'compactionResult(stall)': () => ({ type: 'compactionResult', compacted: [sys(), user('summary')], before: 850, after: 850, contextWindow: 1000 }),
  'compactionNoop(progress)': () => ({ type: 'compactionNoop', before: 960, after: 500, contextWindow: 1000 }),
  'compactionNoop(stall below the line)': () => ({ type: 'compactionNoop', before: 850, after: 850, contextWindow: 1000 }),
  'compactionNoop(stall at the line)': () => ({ type: 'compactionNoop', before: 960, after: 960, contextWindow: 1000 }),
  inject: () => ({ type: 'inject', message: sys('note') }),
  'setContextTokens(above threshold)': () => ({ type: 'setContextTokens', tokens: 850 }),
  'setContextTokens(emergency)': () => ({ type: 'setContextTokens', tokens: 960 }),
  cancel: () => ({ type: 'cancel' }),
  fail: () => ({ type: 'fail', error: { type: 'ToolCrashed', message: 'boom' } }),
  seal: () => ({ type: 'seal', reason: 'budget' }),
  steer: () => ({ type: 'steer', message: user('also this') }),
  commitPending: () => ({ type: 'commitPending' }),
  discardPending: () => ({ type: 'discardPending' }),
  salvagePending: () => ({ type: 'salvagePending' }),
  rewindTo: () => ({ type: 'rewindTo', len: 1 }),
  adoptPruned: (context) => ({ type: 'adoptPruned', messages: [...context.history, ...context.pending].map((message) => ({ ...message, content: 'pruned' }) as Message) }),
};
const LABELS = Object.keys(SAMPLES);
const labels = new WeakMap<LoopEvent, string>();
const eventsAt = (context: LoopContext): LoopEvent[] =>
  LABELS.map((label) => {
    const event = SAMPLES[label]!(context);
    labels.set(event, label);
    return event;
  });
const labelOf = (event: LoopEvent): string => labels.get(event) ?? event.type;

/** The abstraction: the state and the context facts the guards and feeds read, bounded. */
function abstractKey(value: StateName, context: LoopContext): string {
  const tokens = context.contextTokens >= 950 ? 'emergency' : context.contextTokens > 800 ? 'threshold' : 'low';
  return JSON.stringify([
    value,
    Math.min(context.turnsTaken, 1),
    context.pendingTools.map((pending) => `${pending.call.name}${pending.preAnswered ? '!' : ''}`),
    context.cancelled,
    context.steering.length > 0,
    context.deferredCompaction,
    context.compactionReason,
    context.pending.length > 0,
    refCoherentCut(context.pending, Infinity) === context.pending.length,
    tokens,
  ]);
}
const keyOf = (snapshot: LoopSnapshot) => abstractKey(snapshot.value, snapshot.context);

const traversal = { events: (snapshot: LoopSnapshot) => eventsAt(snapshot.context), serializeState: keyOf, serializeEvent: labelOf, limit: 2_000_000 };

// ---------------------------------------------------------------- which transition a step takes

/** Every transition of the chart, by id: `state event #n`, n its place among the event's candidates. */
const TRANSITIONS = new Map<string, string>();
for (const [state, byEvent] of Object.entries(loopTransitions)) {
  for (const [type, candidates] of Object.entries(byEvent)) {
    candidates!.forEach((candidate, i) => {
      const guards = candidate.guards.length ? ` [${candidate.guards.join(' && ')}]` : '';
      TRANSITIONS.set(`${state} ${type} #${i}`, `${state} --${type}${guards}--> ${candidate.target ?? state}`);
    });
  }
}

/** The transition the chart takes for this event here (first candidate whose guards hold), or null when it takes none. */
function transitionOf(value: StateName, context: LoopContext, event: LoopEvent): string | null {
  const candidates = loopTransitions[value][event.type] ?? [];
  const i = candidates.findIndex(({ guards }) => guards.every((guard) => loopGuards[guard]({ context, event })));
  return i < 0 ? null : `${value} ${event.type} #${i}`;
}

// ---------------------------------------------------------------- the paths

interface GraphPath {
  labels: string[];
  /** The abstract state the graph says each step reaches. */
  keys: string[];
}

/**
 * The shortest path (xstate/graph) to every abstract state; of these, and of each extended by one
 * event, the shortest that ends with each transition of the chart, and the shortest that ends in
 * each way a run can end: one path per transition and per outcome, not one per abstract state.
 */
function generatePaths(): { paths: GraphPath[]; explored: number } {
  const shortest = getShortestPaths(loopMachine, traversal);
  const chosen = new Map<string, GraphPath>();
  const offer = (goal: string, path: GraphPath) => {
    const known = chosen.get(goal);
    if (!known || path.labels.length < known.labels.length) chosen.set(goal, path);
  };
  for (const { state, steps } of shortest) {
    // The first step is the initial snapshot (XState's init event): it is not a feed.
    const feeds = steps.slice(1);
    const path = { labels: feeds.map((step) => labelOf(step.event)), keys: feeds.map((step) => keyOf(step.state)) };
    if (state.value === 'Terminal') offer(`ends ${JSON.stringify(state.context.outcome)}`, path);
    for (const label of LABELS) {
      const event = SAMPLES[label]!(state.context);
      const transition = transitionOf(state.value, state.context, event);
      if (!transition) continue;
      const next = reduceLoop(state.value, state.context, event)!;
      offer(transition, { labels: [...path.labels, label], keys: [...path.keys, abstractKey(next.value, next.context)] });
    }
  }
  return { paths: [...chosen.values()], explored: shortest.length };
}

const started = performance.now();
const { paths: PATHS, explored: EXPLORED } = generatePaths();
const generatedMs = performance.now() - started;

// ---------------------------------------------------------------- replaying a path three ways

const coveredStates = new Set<StateName>();
const coveredTransitions = new Set<string>();

/** The facade's call for an event (it validates, and throws where the chart takes nothing). */
function feedFacade(m: LoopMachine, event: LoopEvent): void {
  switch (event.type) {
    case 'next':
      return void m.nextStep(event.policy);
    case 'acceptInput':
      return m.acceptInput(event.message);
    case 'modelResponse':
      return m.modelResponse(event.response, event.contextTokens, event.availableTools, event.finishReason);
    case 'toolResults':
      return m.toolResults(event.messages);
    case 'compactionResult':
      return m.compactionResult(event.compacted, event.before, event.after, { contextWindow: event.contextWindow });
    case 'compactionNoop':
      return m.compactionNoop(event.before, event.after, { contextWindow: event.contextWindow });
    case 'inject':
      return m.inject(event.message);
    case 'setContextTokens':
      return m.setContextTokens(event.tokens);
    case 'cancel':
      return m.cancel();
    case 'fail':
      return m.fail(event.error);
    case 'seal':
      return m.seal(event.reason);
    case 'steer':
      return m.steer(event.message);
    case 'commitPending':
      return m.commitPending();
    case 'discardPending':
      return m.discardPending();
    case 'salvagePending':
      return void m.salvagePending();
    case 'rewindTo':
      return void m.rewindTo(event.len);
    case 'adoptPruned':
      return m.adoptPruned(event.messages);
  }
}

/** The brain's invariants on one snapshot (as test/brain/properties.test.ts holds them after random feeds). */
function checkInvariants(value: StateName, context: LoopContext): void {
  const whole = [...context.history, ...context.pending];
  // Committed history never holds an unanswered call and is always what a provider accepts.
  expect(coherentCut(context.history, Infinity)).toBe(context.history.length);
  expect(providerValid(context.history)).toBe(true);
  // At rest in Start the whole conversation is coherent.
  if (value === 'Start') expect(providerValid(whole)).toBe(true);
  expect(context.outcome !== null).toBe(value === 'Terminal');
  if (value !== 'Terminal') {
    expect(context.compactionReason !== null).toBe(value === 'AwaitingCompaction');
    expect(context.pendingTools.length > 0).toBe(value === 'AwaitingTools');
  }
  // Deciding is pure: asking twice answers the same and changes nothing.
  for (const p of [policy({}), policy({ maxTurns: 1 })]) expect(decide(value, context, p)).toBe(decide(value, context, p));
}

function replay(path: GraphPath): void {
  const actor = createActor(loopMachine, { input: {} }).start();
  const facade = new LoopMachine();
  let value: StateName = 'Start';
  let context: LoopContext = actor.getSnapshot().context;
  try {
    path.labels.forEach((label, i) => {
      const event = SAMPLES[label]!(context);
      const transition = transitionOf(value, context, event);
      if (transition) coveredTransitions.add(transition);
      // The pure reducer: null is "the chart takes no transition".
      const reduced = reduceLoop(value, context, event);
      actor.send(event);
      const chart = actor.getSnapshot();
      let refused: unknown;
      try {
        feedFacade(facade, event);
      } catch (error) {
        refused = error;
      }
      if (refused !== undefined) {
        // The facade refuses exactly what the chart does not take, with a typed error.
        expect(refused instanceof IllegalFeedError || refused instanceof InvalidFeedError, String(refused)).toBe(true);
        expect(transition, `${label} in ${value}: refused by the facade, taken by the chart`).toBeNull();
      }
      value = reduced?.value ?? value;
      context = reduced?.context ?? context;
      expect(chart.value, `step ${i + 1} (${label})`).toBe(value);
      expect(chart.context).toEqual(context);
      expect(facade.actor.getSnapshot().value).toBe(value);
      expect(facade.actor.getSnapshot().context).toEqual(context);
      expect(abstractKey(value, context), `step ${i + 1} (${label}) reaches the state the graph says`).toBe(path.keys[i]);
      expect(loopSnapshotProblem(facade.toJSON())).toBeNull();
      checkInvariants(value, context);
      coveredStates.add(value);
    });
  } finally {
    actor.stop();
    facade.actor.stop();
  }
}

describe('paths over the brain chart (xstate/graph)', () => {
  it('generates a bounded set of paths', () => {
    expect(PATHS.length).toBeGreaterThan(20);
    expect(PATHS.length).toBeLessThanOrEqual(MAX_PATHS);
  });

  describe.each(PATHS.map((path, i) => [`${i + 1}: ${path.labels.join(' → ') || '(the initial state)'}`, path] as const))('path %s', (_name, path) => {
    it('statechart, reducer and facade agree at every step and keep the invariants', () => replay(path));
  });

  afterAll(() => {
    const states = loopMachine.root.states;
    const missing = [...TRANSITIONS.keys()].filter((id) => !coveredTransitions.has(id));
    console.log(
      `brain chart paths: ${PATHS.length} paths chosen of the shortest paths to ${EXPLORED} abstract states (${generatedMs.toFixed(0)} ms); ` +
        `states covered ${coveredStates.size}/${Object.keys(states).length} (${[...coveredStates].join(', ')}); transitions covered ${coveredTransitions.size}/${TRANSITIONS.size}` +
        (missing.length ? `; not taken: ${missing.map((id) => `${TRANSITIONS.get(id)} (${NEVER_TAKEN.get(id) ?? 'no reason known'})`).join('; ')}` : ''),
    );
  });

  it('the paths, all run, cover every state and every transition of the chart but the ones that cannot fire', () => {
    // Runs last (vitest keeps the order of a file's tests): the sets are filled by the paths above.
    expect([...coveredStates].sort()).toEqual(Object.keys(loopMachine.root.states).sort());
    const missing = [...TRANSITIONS.keys()].filter((id) => !coveredTransitions.has(id));
    expect(missing).toEqual([...NEVER_TAKEN.keys()]);
  });
});
