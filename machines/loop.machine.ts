import { and, assertEvent, assign, setup, type SnapshotFrom } from 'xstate';
import {
  coalesceAdjacentAssistants,
  coherentCut,
  unavailableToolResult,
} from '../src/brain/conversation.js';
import { feedProblem } from '../src/brain/feed-problems.js';
import { fieldsOf, logOf, loopContextOf, MessageLog, type LoopFields } from '../src/brain/message-log.js';
import type { LoopEvent } from '../src/brain/loop-events.js';
import type {
  CompactionReason,
  LoopContext,
  Message,
  Outcome,
  Policy,
  StateName,
  Step,
} from '../src/schemas.js';

/**
 * The brain: the seed's LoopMachine as a statechart. It holds the conversation, counts
 * turns, watches the context size and answers "what next?". No IO, no clock, no randomness:
 * the same snapshot and the same events give the same decisions in any process.
 */

type GuardArgs = { context: LoopContext; event: LoopEvent };

const policyOf = (event: LoopEvent): Policy => {
  assertEvent(event, 'next');
  return event.policy;
};

const EMERGENCY_PERCENT = 95;

/** Integer-exact: the emergency line is inclusive, and a window of 0 turns both lines off. */
const atEmergencyLine = (tokens: number, window: number) =>
  window > 0 && tokens * 100 >= window * EMERGENCY_PERCENT;

/**
 * The guards the decision order and the feeds are built from. `nextStep` calls these very
 * functions, so the picture in the inspector and the code path cannot drift apart.
 */
export const loopGuards = {
  cancelRequested: ({ context }: GuardArgs) => context.cancelled,
  turnLimitReached: ({ context, event }: GuardArgs) =>
    context.turnsTaken >= policyOf(event).maxTurns,
  atEmergencyLine: ({ context, event }: GuardArgs) =>
    atEmergencyLine(context.contextTokens, policyOf(event).contextWindow),
  aboveCompactThreshold: ({ context, event }: GuardArgs) => {
    const { autoCompact, contextWindow, compactThreshold } = policyOf(event);
    return (
      autoCompact &&
      !context.deferredCompaction &&
      contextWindow > 0 &&
      context.contextTokens * 100 > contextWindow * compactThreshold
    );
  },
  feedIsValid: ({ context, event }: GuardArgs) => feedProblem(context, event) === null,
  replyHasToolCalls: ({ event }: GuardArgs) => {
    assertEvent(event, 'modelResponse');
    return (event.response.toolCalls?.length ?? 0) > 0;
  },
  steeringQueued: ({ context }: GuardArgs) => context.steering.length > 0,
  compactionMadeNoProgress: ({ event }: GuardArgs) => {
    assertEvent(event, ['compactionResult', 'compactionNoop']);
    return event.after >= event.before;
  },
  /** A threshold pass that stalled while the payload still fits may serve instead of failing. */
  stallIsDeferrable: ({ context, event }: GuardArgs) => {
    assertEvent(event, ['compactionResult', 'compactionNoop']);
    return (
      context.compactionReason === 'ThresholdExceeded' &&
      !atEmergencyLine(event.after, event.contextWindow)
    );
  },
};

type GuardName = keyof typeof loopGuards;

interface Decision {
  /** The kind of step this entry yields, known without building the step. */
  type: Step['type'];
  /** The states in which this entry of the decision order is considered. */
  states: readonly StateName[];
  guard?: GuardName | undefined;
  /** Where the brain moves when this decision is taken; none means it stays. */
  target?: StateName | undefined;
  action?: 'concludeCancelled' | 'concludeMaxTurns' | 'beginEmergencyCompaction' | 'beginThresholdCompaction' | undefined;
  step: (context: LoopContext) => Step;
}

const RUNNING: readonly StateName[] = ['Start', 'AwaitingModel', 'AwaitingTools', 'AwaitingCompaction'];
const MODEL_SIDE: readonly StateName[] = ['Start', 'AwaitingModel'];

/** The decision order (seed 001: terminal, then cancelled, then the rest). First hit wins. */
export const decisionOrder: readonly Decision[] = [
  { type: 'Done', states: ['Terminal'], step: (context) => ({ type: 'Done', outcome: structuredClone(context.outcome!) }) },
  {
    type: 'Done',
    states: RUNNING,
    guard: 'cancelRequested',
    target: 'Terminal',
    action: 'concludeCancelled',
    step: () => ({ type: 'Done', outcome: { type: 'Cancelled' } }),
  },
  {
    type: 'CallTools',
    states: ['AwaitingTools'],
    // A copy: a driver editing the step it was handed must not edit the brain.
    step: (context) => ({ type: 'CallTools', turn: context.turnsTaken, calls: structuredClone(context.pendingTools) }),
  },
  {
    type: 'Compact',
    states: ['AwaitingCompaction'],
    step: (context) => ({ type: 'Compact', reason: context.compactionReason! }),
  },
  {
    type: 'Done',
    states: MODEL_SIDE,
    guard: 'turnLimitReached',
    target: 'Terminal',
    action: 'concludeMaxTurns',
    step: () => ({ type: 'Done', outcome: { type: 'MaxTurnsExceeded' } }),
  },
  {
    type: 'Compact',
    states: MODEL_SIDE,
    guard: 'atEmergencyLine',
    target: 'AwaitingCompaction',
    action: 'beginEmergencyCompaction',
    step: () => ({ type: 'Compact', reason: 'Emergency' }),
  },
  {
    type: 'Compact',
    states: MODEL_SIDE,
    guard: 'aboveCompactThreshold',
    target: 'AwaitingCompaction',
    action: 'beginThresholdCompaction',
    step: () => ({ type: 'Compact', reason: 'ThresholdExceeded' }),
  },
  {
    type: 'CallLLM',
    states: MODEL_SIDE,
    target: 'AwaitingModel',
    step: (context) => ({ type: 'CallLLM', turn: context.turnsTaken + 1 }),
  },
];

/** The first entry of the decision order that applies: what `next` decides, without deciding it. */
export function decide(state: StateName, context: LoopContext, policy: Policy): Decision {
  const args: GuardArgs = { context, event: { type: 'next', policy } };
  for (const decision of decisionOrder) {
    if (!decision.states.includes(state)) continue;
    if (decision.guard && !loopGuards[decision.guard](args)) continue;
    return decision;
  }
  throw new Error(`no decision applies in state ${state}`); // unreachable: every state has a fallback
}

/** The step the brain would take now. Pure: reads the snapshot, changes nothing. */
export function nextStep(snapshot: LoopSnapshot, policy: Policy): Step {
  return decide(snapshot.value, snapshot.context, policy).step(snapshot.context);
}


export interface LoopInput {
  /** Committed messages to start from, e.g. a session's history for its next run. */
  history?: Message[] | undefined;
}

export const emptyLoopContext = (history: Message[] = []): LoopContext => ({
  history,
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

/**
 * One action's change to the context: fields, and the conversation as a new `MessageLog` when it
 * changes. Updates never change what they were given: a log grows into a new log that shares the
 * old one's messages (see `MessageLog`), so every snapshot stays a value, for the statechart and
 * for the driver's reducer alike, and a turn does not copy the run's messages.
 */
export type LoopChange = Partial<LoopFields> & { log?: MessageLog | undefined };
type Update = (context: LoopFields, event: LoopEvent, log: MessageLog) => LoopChange;

const conclude = (outcome: Outcome): Update => () => ({ outcome });
const beginCompaction = (reason: CompactionReason): Update => (context) => ({
  compactionReason: reason,
  lastCompactionTokens: context.contextTokens,
});

/**
 * The brain's actions as pure context updates, by name. The statechart wraps each in `assign`;
 * `reduceLoop` applies the very same functions, so both move the brain identically.
 */
export const loopUpdates = {
  concludeCancelled: conclude({ type: 'Cancelled' }),
  concludeMaxTurns: conclude({ type: 'MaxTurnsExceeded' }),
  beginEmergencyCompaction: beginCompaction('Emergency'),
  beginThresholdCompaction: beginCompaction('ThresholdExceeded'),
  beginRun: (_context, event, log) => {
    assertEvent(event, 'acceptInput');
    return {
      log: log.discardPending().append([event.message]),
      pendingTools: [],
      turnsTaken: 0,
      totalToolCalls: 0,
      deferredCompaction: false,
      compactionReason: null,
      steering: [],
    };
  },
  appendToPending: (_context, event, log) => {
    assertEvent(event, ['inject', 'steer']);
    return { log: log.append([event.message]) };
  },
  adoptEstimate: (_context, event) => {
    assertEvent(event, 'setContextTokens');
    return { contextTokens: event.tokens };
  },
  requestCancel: () => ({ cancelled: true }),
  concludeFailed: (_context, event) => {
    assertEvent(event, 'fail');
    const { type, message, guardrail } = event.error;
    return { outcome: { type: 'Failed', error: { type, message, ...(guardrail && { guardrail }) } } };
  },
  concludeSealed: (_context, event) => {
    assertEvent(event, 'seal');
    return { outcome: { type: 'Sealed', reason: event.reason } };
  },
  queueSteering: (context, event) => {
    assertEvent(event, 'steer');
    return { steering: [...context.steering, event.message] };
  },
  deliverSteering: (context, _event, log) => (context.steering.length ? { log: log.append(context.steering), steering: [] } : {}),
  acceptReply: (context, event, log) => {
    assertEvent(event, 'modelResponse');
    return {
      log: log.append([event.response]),
      contextTokens: event.contextTokens,
      turnsTaken: context.turnsTaken + 1,
    };
  },
  classifyToolCalls: (_context, event) => {
    assertEvent(event, 'modelResponse');
    const advertised = new Set(event.availableTools);
    return {
      pendingTools: (event.response.toolCalls ?? []).map((call) =>
        advertised.has(call.name) ? { call } : { call, preAnswered: unavailableToolResult(call) },
      ),
    };
  },
  concludeCompleted: (_context, event) => {
    assertEvent(event, 'modelResponse');
    const { finishReason } = event;
    return {
      outcome:
        finishReason && finishReason !== 'stop'
          ? { type: 'Completed', finalText: event.response.content, finishReason }
          : { type: 'Completed', finalText: event.response.content },
    };
  },
  acceptToolResults: (context, event, log) => {
    assertEvent(event, 'toolResults');
    const byId = new Map(event.messages.map((message) => [message.toolCallId, message]));
    // Results go in call order whatever order they finished in: the transcript stays stable.
    const results = context.pendingTools.map((pending) => byId.get(pending.call.id)!);
    // An interrupted call was answered, not made: it does not count.
    const unfinished = new Set(event.unfinished ?? []);
    const made = context.pendingTools.filter((pending) => !unfinished.has(pending.call.id)).length;
    return {
      log: log.append(results),
      pendingTools: [],
      totalToolCalls: context.totalToolCalls + made,
    };
  },
  deferCompaction: (_context, event) => {
    assertEvent(event, ['compactionResult', 'compactionNoop']);
    return { deferredCompaction: true, contextTokens: event.after };
  },
  concludeStalled: (_context, event) => {
    assertEvent(event, ['compactionResult', 'compactionNoop']);
    return {
      outcome: {
        type: 'Failed',
        error: {
          type: 'CompactionStalled',
          message: `compaction made no progress (${event.before} tokens before, ${event.after} after)`,
        },
      },
    };
  },
  adoptCompacted: (_context, event) => {
    assertEvent(event, 'compactionResult');
    return {
      log: MessageLog.of(coalesceAdjacentAssistants(event.compacted), []),
      contextTokens: event.after,
      deferredCompaction: false,
    };
  },
  adoptCompactionEstimate: (_context, event) => {
    assertEvent(event, 'compactionNoop');
    return { contextTokens: event.after };
  },
  endCompactionPass: () => ({ compactionReason: null }),
  commitPending: (_context, _event, log) => ({ log: log.commit() }),
  discardPending: (_context, _event, log) => ({ log: log.discardPending() }),
  salvagePending: (_context, _event, log) => ({ log: log.commit(coherentCut(log.pendingView(), Infinity)) }),
  rewindHistory: (_context, event, log) => {
    assertEvent(event, 'rewindTo');
    if (event.len >= log.split) return {};
    return {
      log: log.rewind(coherentCut(log.historyView(), event.len)),
      deferredCompaction: false,
      // The estimate described the longer conversation; the driver measures afresh.
      contextTokens: 0,
    };
  },
  adoptPruned: (_context, event, log) => {
    assertEvent(event, 'adoptPruned');
    const { split } = log;
    return { log: MessageLog.of(event.messages.slice(0, split), event.messages.slice(split)) };
  },
} satisfies Record<string, Update>;

type ActionName = keyof typeof loopUpdates;

/** One transition of the brain: all `guards` must hold; first match wins, as in XState. */
export interface LoopTransition {
  readonly guards: readonly GuardName[];
  readonly target?: StateName | undefined;
  readonly actions: readonly ActionName[];
}

type TransitionTable = Readonly<Record<StateName, Partial<Record<LoopEvent['type'], readonly LoopTransition[]>>>>;

const when = (guards: GuardName[], actions: ActionName[], target?: StateName): LoopTransition => ({
  guards,
  actions,
  ...(target && { target }),
});

/** The `next` transitions of one state: the decision order, filtered to that state. */
function nextTransitions(state: StateName): LoopTransition[] {
  return decisionOrder
    .filter((decision) => decision.states.includes(state))
    .map(({ guard, target, action }) => when(guard ? [guard] : [], action ? [action] : [], target));
}

/** Feeds every non-terminal state accepts. */
const runningFeeds = {
  acceptInput: [when(['feedIsValid'], ['beginRun'], 'Start')],
  inject: [when(['feedIsValid'], ['appendToPending'])],
  setContextTokens: [when(['feedIsValid'], ['adoptEstimate'])],
  cancel: [when([], ['requestCancel'])],
  fail: [when(['feedIsValid'], ['concludeFailed'], 'Terminal')],
  seal: [when(['feedIsValid'], ['concludeSealed'], 'Terminal')],
  steer: [when(['feedIsValid'], ['queueSteering'])],
  adoptPruned: [when(['feedIsValid'], ['adoptPruned'])],
};

/** Maintenance that needs no turn in flight: at rest in Start, or after the run ended. */
const maintenanceFeeds = {
  commitPending: [when(['feedIsValid'], ['commitPending'])],
  discardPending: [when([], ['discardPending'])],
  salvagePending: [when([], ['salvagePending'])],
  rewindTo: [when(['feedIsValid'], ['rewindHistory'])],
};

const compactionOutcomes = (progress: 'adoptCompacted' | 'adoptCompactionEstimate') => [
  when(['feedIsValid', 'compactionMadeNoProgress', 'stallIsDeferrable'], ['deferCompaction', 'deliverSteering'], 'Start'),
  when(['feedIsValid', 'compactionMadeNoProgress'], ['concludeStalled'], 'Terminal'),
  when(['feedIsValid'], [progress, 'deliverSteering'], 'Start'),
];

/**
 * Every transition of the brain, by state and event: the one table the statechart and the
 * pure `reduceLoop` are both generated from.
 */
export const loopTransitions: TransitionTable = {
  Start: {
    ...runningFeeds,
    ...maintenanceFeeds,
    // At rest the conversation is coherent, so steering is delivered at once.
    steer: [when(['feedIsValid'], ['appendToPending'])],
    next: nextTransitions('Start'),
  },
  AwaitingModel: {
    ...runningFeeds,
    next: nextTransitions('AwaitingModel'),
    modelResponse: [
      when(['feedIsValid', 'replyHasToolCalls'], ['acceptReply', 'classifyToolCalls'], 'AwaitingTools'),
      // In-turn steering (seed 004): a queued user message keeps the run going.
      when(['feedIsValid', 'steeringQueued'], ['acceptReply', 'deliverSteering'], 'Start'),
      when(['feedIsValid'], ['acceptReply', 'concludeCompleted'], 'Terminal'),
    ],
  },
  AwaitingTools: {
    ...runningFeeds,
    next: nextTransitions('AwaitingTools'),
    toolResults: [when(['feedIsValid'], ['acceptToolResults', 'deliverSteering'], 'Start')],
  },
  AwaitingCompaction: {
    ...runningFeeds,
    next: nextTransitions('AwaitingCompaction'),
    compactionResult: compactionOutcomes('adoptCompacted'),
    compactionNoop: compactionOutcomes('adoptCompactionEstimate'),
  },
  Terminal: {
    ...maintenanceFeeds,
    next: nextTransitions('Terminal'),
  },
};

/** Actions run when a state is left for another one. */
const exitActions: Partial<Record<StateName, readonly ActionName[]>> = {
  AwaitingCompaction: ['endCompactionPass'],
};

/**
 * Whether `state` has any transition for this feed that does something, whatever its payload
 * (XState's notion of the events a state handles: one that neither moves nor acts is not one).
 */
export const acceptsFeed = (state: StateName, type: LoopEvent['type']): boolean =>
  loopTransitions[state][type]?.some(({ target, actions }) => target !== undefined || actions.length > 0) ?? false;

/**
 * The brain's transition as a pure function over plain data: the state it moves to and the new
 * context, or null when no transition is enabled (XState would ignore the event). Generated
 * from `loopTransitions` with XState's semantics (first enabled transition wins, guards read the
 * context before any action, exit actions run before the transition's own), and checked against
 * the statechart by a property test.
 *
 * `checked`: the caller has found no `feedProblem` with this context (as `feedRejection` does
 * before every feed the driver makes), so `feedIsValid` holds without walking the payload again:
 * a feed is validated once.
 */
export function reduceLoop(
  state: StateName,
  context: LoopContext,
  event: LoopEvent,
  checked = false,
): { value: StateName; context: LoopContext } | null {
  const candidates = loopTransitions[state][event.type];
  if (!candidates) return null;
  const args: GuardArgs = { context, event };
  // A loop, not closures: under `keepNames` (tsup, tsx) each named closure made here costs a call.
  let chosen: LoopTransition | undefined;
  for (const candidate of candidates) {
    if (candidate.guards.every((guard) => (checked && guard === 'feedIsValid') || loopGuards[guard](args))) {
      chosen = candidate;
      break;
    }
  }
  if (!chosen) return null;
  const leaving = chosen.target !== undefined && chosen.target !== state;
  const actions = leaving && exitActions[state] ? [...exitActions[state], ...chosen.actions] : chosen.actions;
  const value = chosen.target ?? state;
  if (actions.length === 0) return { value, context };
  // The actions read the fields and the log as the previous action left them; one context is built at the end.
  let fields = fieldsOf(context);
  let log = logOf(context);
  for (const action of actions) {
    const { log: changed, ...change }: LoopChange = loopUpdates[action](fields, event, log);
    fields = { ...fields, ...change };
    if (changed) log = changed;
  }
  return { value, context: loopContextOf(fields, log) };
}

/** A change as XState's `assign` takes it: the log's two views in place of the log. */
function asAssignment({ log, ...fields }: LoopChange): Partial<LoopContext> {
  return log ? { ...fields, history: log.historyView() as Message[], pending: log.pendingView() as Message[] } : fields;
}

const loopSetup = setup({
  types: {
    context: {} as LoopContext,
    events: {} as LoopEvent,
    input: {} as LoopInput | void,
  },
  guards: loopGuards,
  actions: Object.fromEntries(
    Object.entries(loopUpdates).map(([name, update]) => [
      name,
      assign<LoopContext, LoopEvent, undefined, LoopEvent, never>(({ context, event }) =>
        asAssignment((update as Update)(context, event, logOf(context))),
      ),
    ]),
  ) as Record<ActionName, ReturnType<typeof assign<LoopContext, LoopEvent, undefined, LoopEvent, never>>>,
});

const toXState = ({ guards, target, actions }: LoopTransition) => ({
  ...(guards.length === 1 ? { guard: guards[0] } : guards.length > 1 ? { guard: and([...guards]) } : {}),
  ...(target && { target }),
  actions: [...actions],
});

const stateConfig = (state: StateName) => ({
  on: Object.fromEntries(Object.entries(loopTransitions[state]).map(([type, list]) => [type, list!.map(toXState)])),
  ...(exitActions[state] && { exit: [...exitActions[state]] }),
});

export const loopMachine = loopSetup.createMachine({
  id: 'loop',
  initial: 'Start',
  context: ({ input }) => emptyLoopContext(input?.history ?? []),
  states: {
    Start: stateConfig('Start'),
    AwaitingModel: stateConfig('AwaitingModel'),
    AwaitingTools: stateConfig('AwaitingTools'),
    AwaitingCompaction: stateConfig('AwaitingCompaction'),
    Terminal: stateConfig('Terminal'),
  },
});

export type LoopSnapshot = SnapshotFrom<typeof loopMachine>;

export { coherentCut };
