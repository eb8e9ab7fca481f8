import { and, assertEvent, assign, setup, type SnapshotFrom } from 'xstate';
import {
  coalesceAdjacentAssistants,
  coherentCut,
  unavailableToolResult,
} from '../src/conversation.js';
import { feedProblem } from '../src/feed-problems.js';
import type { LoopEvent } from '../src/loop-events.js';
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
  guard?: GuardName;
  /** Where the brain moves when this decision is taken; none means it stays. */
  target?: StateName;
  action?: 'concludeCancelled' | 'concludeMaxTurns' | 'beginEmergencyCompaction' | 'beginThresholdCompaction';
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

/** The `next` transitions of one state: the decision order, filtered to that state. */
function nextTransitions(state: StateName) {
  return decisionOrder
    .filter((decision) => decision.states.includes(state))
    .map(({ guard, target, action }) => ({
      ...(guard && { guard }),
      ...(target && { target }),
      actions: action ? [action] : [],
    }));
}

const conclude = (outcome: Outcome) => assign<LoopContext, LoopEvent, undefined, LoopEvent, never>({ outcome });
const beginCompaction = (reason: CompactionReason) =>
  assign<LoopContext, LoopEvent, undefined, LoopEvent, never>({
    compactionReason: reason,
    lastCompactionTokens: ({ context }) => context.contextTokens,
  });

export interface LoopInput {
  /** Committed messages to start from, e.g. a session's history for its next run. */
  history?: Message[];
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

const loopSetup = setup({
  types: {
    context: {} as LoopContext,
    events: {} as LoopEvent,
    input: {} as LoopInput | void,
  },
  guards: loopGuards,
  actions: {
    concludeCancelled: conclude({ type: 'Cancelled' }),
    concludeMaxTurns: conclude({ type: 'MaxTurnsExceeded' }),
    beginEmergencyCompaction: beginCompaction('Emergency'),
    beginThresholdCompaction: beginCompaction('ThresholdExceeded'),
    beginRun: assign(({ event }) => {
      assertEvent(event, 'acceptInput');
      return {
        pending: [event.message],
        pendingTools: [],
        turnsTaken: 0,
        totalToolCalls: 0,
        deferredCompaction: false,
        compactionReason: null,
        steering: [],
      };
    }),
    appendToPending: assign({
      pending: ({ context, event }) => {
        assertEvent(event, ['inject', 'steer']);
        return [...context.pending, event.message];
      },
    }),
    adoptEstimate: assign({
      contextTokens: ({ event }) => {
        assertEvent(event, 'setContextTokens');
        return event.tokens;
      },
    }),
    requestCancel: assign({ cancelled: true }),
    concludeFailed: assign({
      outcome: ({ event }) => {
        assertEvent(event, 'fail');
        return { type: 'Failed' as const, error: { type: event.error.type, message: event.error.message } };
      },
    }),
    concludeSealed: assign({
      outcome: ({ event }) => {
        assertEvent(event, 'seal');
        return { type: 'Sealed' as const, reason: event.reason };
      },
    }),
    queueSteering: assign({
      steering: ({ context, event }) => {
        assertEvent(event, 'steer');
        return [...context.steering, event.message];
      },
    }),
    deliverSteering: assign(({ context }) =>
      context.steering.length
        ? { pending: [...context.pending, ...context.steering], steering: [] }
        : {},
    ),
    acceptReply: assign(({ context, event }) => {
      assertEvent(event, 'modelResponse');
      return {
        pending: [...context.pending, event.response],
        contextTokens: event.contextTokens,
        turnsTaken: context.turnsTaken + 1,
      };
    }),
    classifyToolCalls: assign({
      pendingTools: ({ event }) => {
        assertEvent(event, 'modelResponse');
        const advertised = new Set(event.availableTools);
        return (event.response.toolCalls ?? []).map((call) =>
          advertised.has(call.name) ? { call } : { call, preAnswered: unavailableToolResult(call) },
        );
      },
    }),
    concludeCompleted: assign({
      outcome: ({ event }) => {
        assertEvent(event, 'modelResponse');
        const { finishReason } = event;
        return finishReason && finishReason !== 'stop'
          ? { type: 'Completed' as const, finalText: event.response.content, finishReason }
          : { type: 'Completed' as const, finalText: event.response.content };
      },
    }),
    acceptToolResults: assign(({ context, event }) => {
      assertEvent(event, 'toolResults');
      const byId = new Map(event.messages.map((message) => [message.toolCallId, message]));
      // Results go in call order whatever order they finished in: the transcript stays stable.
      const results = context.pendingTools.map((pending) => byId.get(pending.call.id)!);
      return {
        pending: [...context.pending, ...results],
        pendingTools: [],
        totalToolCalls: context.totalToolCalls + results.length,
      };
    }),
    deferCompaction: assign(({ event }) => {
      assertEvent(event, ['compactionResult', 'compactionNoop']);
      return { deferredCompaction: true, contextTokens: event.after };
    }),
    concludeStalled: assign({
      outcome: ({ event }) => {
        assertEvent(event, ['compactionResult', 'compactionNoop']);
        return {
          type: 'Failed' as const,
          error: {
            type: 'CompactionStalled',
            message: `compaction made no progress (${event.before} tokens before, ${event.after} after)`,
          },
        };
      },
    }),
    adoptCompacted: assign(({ event }) => {
      assertEvent(event, 'compactionResult');
      return {
        history: coalesceAdjacentAssistants(event.compacted),
        pending: [],
        contextTokens: event.after,
        deferredCompaction: false,
      };
    }),
    adoptCompactionEstimate: assign(({ event }) => {
      assertEvent(event, 'compactionNoop');
      return { contextTokens: event.after };
    }),
    endCompactionPass: assign({ compactionReason: null }),
    commitPending: assign(({ context }) => ({
      history: context.pending.length ? context.history.concat(context.pending) : context.history,
      pending: [],
    })),
    discardPending: assign({ pending: [] }),
    salvagePending: assign(({ context }) => {
      const keep = coherentCut(context.pending, Infinity);
      return {
        history: keep ? context.history.concat(context.pending.slice(0, keep)) : context.history,
        pending: [],
      };
    }),
    rewindHistory: assign(({ context, event }) => {
      assertEvent(event, 'rewindTo');
      if (event.len >= context.history.length) return {};
      return {
        history: context.history.slice(0, coherentCut(context.history, event.len)),
        deferredCompaction: false,
        // The estimate described the longer conversation; the driver measures afresh.
        contextTokens: 0,
      };
    }),
    adoptPruned: assign(({ context, event }) => {
      assertEvent(event, 'adoptPruned');
      const split = context.history.length;
      return { history: event.messages.slice(0, split), pending: event.messages.slice(split) };
    }),
  },
});

/** Feeds every non-terminal state accepts. */
const runningFeeds = {
  acceptInput: { guard: 'feedIsValid', target: 'Start', actions: 'beginRun' },
  inject: { guard: 'feedIsValid', actions: 'appendToPending' },
  setContextTokens: { guard: 'feedIsValid', actions: 'adoptEstimate' },
  cancel: { actions: 'requestCancel' },
  fail: { guard: 'feedIsValid', target: 'Terminal', actions: 'concludeFailed' },
  seal: { guard: 'feedIsValid', target: 'Terminal', actions: 'concludeSealed' },
  steer: { guard: 'feedIsValid', actions: 'queueSteering' },
  adoptPruned: { guard: 'feedIsValid', actions: 'adoptPruned' },
} as const;

/** Maintenance that needs no turn in flight: at rest in Start, or after the run ended. */
const maintenanceFeeds = {
  commitPending: { guard: 'feedIsValid', actions: 'commitPending' },
  discardPending: { actions: 'discardPending' },
  salvagePending: { actions: 'salvagePending' },
  rewindTo: { guard: 'feedIsValid', actions: 'rewindHistory' },
} as const;

const compactionOutcomes = (progress: 'adoptCompacted' | 'adoptCompactionEstimate') => [
  {
    guard: and(['feedIsValid', 'compactionMadeNoProgress', 'stallIsDeferrable']),
    target: 'Start',
    actions: ['deferCompaction', 'deliverSteering'],
  },
  {
    guard: and(['feedIsValid', 'compactionMadeNoProgress']),
    target: 'Terminal',
    actions: 'concludeStalled',
  },
  { guard: 'feedIsValid', target: 'Start', actions: [progress, 'deliverSteering'] },
] as const;

export const loopMachine = loopSetup.createMachine({
  id: 'loop',
  initial: 'Start',
  context: ({ input }) => emptyLoopContext(input?.history ?? []),
  states: {
    Start: {
      on: {
        ...runningFeeds,
        ...maintenanceFeeds,
        // At rest the conversation is coherent, so steering is delivered at once.
        steer: { guard: 'feedIsValid', actions: 'appendToPending' },
        next: nextTransitions('Start'),
      },
    },
    AwaitingModel: {
      on: {
        ...runningFeeds,
        next: nextTransitions('AwaitingModel'),
        modelResponse: [
          {
            guard: and(['feedIsValid', 'replyHasToolCalls']),
            target: 'AwaitingTools',
            actions: ['acceptReply', 'classifyToolCalls'],
          },
          // In-turn steering (seed 004): a queued user message keeps the run going.
          {
            guard: and(['feedIsValid', 'steeringQueued']),
            target: 'Start',
            actions: ['acceptReply', 'deliverSteering'],
          },
          { guard: 'feedIsValid', target: 'Terminal', actions: ['acceptReply', 'concludeCompleted'] },
        ],
      },
    },
    AwaitingTools: {
      on: {
        ...runningFeeds,
        next: nextTransitions('AwaitingTools'),
        toolResults: {
          guard: 'feedIsValid',
          target: 'Start',
          actions: ['acceptToolResults', 'deliverSteering'],
        },
      },
    },
    AwaitingCompaction: {
      exit: 'endCompactionPass',
      on: {
        ...runningFeeds,
        next: nextTransitions('AwaitingCompaction'),
        compactionResult: compactionOutcomes('adoptCompacted'),
        compactionNoop: compactionOutcomes('adoptCompactionEstimate'),
      },
    },
    Terminal: {
      on: {
        ...maintenanceFeeds,
        next: nextTransitions('Terminal'),
      },
    },
  },
});

export type LoopSnapshot = SnapshotFrom<typeof loopMachine>;

export { coherentCut };
