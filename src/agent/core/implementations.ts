/**
 * The loop every agent runs, in the driver: the chart's guards and actions for starting and
 * ending a run, the brain's steps (a model call, a tool batch, a compaction, pruning), steering,
 * policy changes and the events refused at the root. Each feature adds its own record beside this
 * one (`src/agent/<feature>/implementations.ts`); the chart spreads them all. The actions are pure
 * functions of (agent, context, event) that return the context change, the event to emit, the
 * request for the IO, or an ordered list of those (an `Effect` list); `bind` makes them XState's.
 */
import { feedProblem } from '../../brain/feed-problems.js';
import { PolicySchema, type Step, type ToolCall, type UserMessage } from '../../schemas.js';
import { outputOf, runInFlight, type AgentEmitted } from '../protocol/actor-types.js';
import { as, fromTelemetry, type AgentEvent } from '../protocol/agent-event.js';
import { deliveryIds, nextAttempt } from '../protocol/delivery.js';
import { externalEventProblem } from '../protocol/events.js';
import { agentOutcome, type FailureType } from '../protocol/failure.js';
import { fromIo, type IoRequest, type RequestOf } from '../protocol/io-protocol.js';
import { inputRefused } from './actor-input.js';
import { assign, assigns, configured, currentAgent, type ContextHook, type RefusalHook, effects, emit, emits, fromCurrent, rule, sendTo, sends, when, type Args } from './bind.js';
import { feedBrain, firstPending, pendingCalls, stepTypeOf, takeStep } from './brain-state.js';
import type { CompiledAgent } from './compile.js';
import type { AgentContext } from './context.js';
import { endRun, afterReply, answerOf, batchKey, compactionKey, conversation, decisionPolicy, extrasFor, modelKey, offeredTools, ownModel, ownOffered, policyProblem, pruneReport, resetBatch, runnable, speakerView, toolsetKey } from './driver-rules.js';
import { answeredCalls, toolFinished, toolStarted, type Effect } from './effects.js';
import { pendingPrune } from './pruning.js';
import { NO_USAGE, applyCompactionPass, applyPrune, applyToolResults, asUserMessage, batchComplete, batchResults, errorInfo, finishBrain, journalResult, startRun, withExtras, withListedTools } from './run-rules.js';

/** A new run: its message pending, its counters and batch cleared; each feature's `runStart` after. */
export function beginRun(agent: CompiledAgent, context: AgentContext, event: AgentEvent, features: readonly ContextHook[] = []): Partial<AgentContext> {
  const change: Partial<AgentContext> = {
    brain: startRun(context.brain, event.type === 'input' ? asUserMessage(event.message) : context.queued!, ownOffered(agent, context).definitions, context.extrasTokens),
    queued: null,
    runIndex: context.runIndex + 1,
    runUsage: NO_USAGE,
    compactionPasses: 0,
    ...resetBatch(agent, context),
    // Each run lists its sources once (its `toolset` step); an agent without sources records nothing.
    ...(agent.hasSources && { offered: null }),
  };
  for (const reset of features) Object.assign(change, reset(agent, context));
  return change;
}

/** The `beginRun` action, with the features' resets the chart composes (see `ContextHook`). */
export const beginRunWith = (features: readonly ContextHook[]) => assigns(({ agent, context, event }) => beginRun(agent, context, event, features));

export function emitRunStarted(agent: CompiledAgent, context: AgentContext, event: AgentEvent): AgentEmitted {
  return {
    type: 'run.started' as const,
    id: deliveryIds.runStarted(context.runIndex),
    run: context.runIndex,
    message: firstPending(context.brain) as UserMessage,
  };
}

export function refreshExtras(agent: CompiledAgent, context: AgentContext, event: AgentEvent): Partial<AgentContext> {
  const extrasTokens = extrasFor(agent, context) as number;
  return { brain: withExtras(context.brain, context.extrasTokens, extrasTokens), extrasTokens };
}

export function requestModel(agent: CompiledAgent, context: AgentContext, event: AgentEvent): IoRequest {
  return {
    type: 'model',
    key: modelKey(context),
    turn: context.brain.context.turnsTaken + 1,
    sessionId: context.sessionId,
    scope: context.scope,
    conversation: conversation(context),
    slices: context.operations.slices,
    tools: offeredTools(agent, context).definitions,
    model: ownModel(agent, context) ?? context.models?.active.index ?? 0,
    ...(agent.speakers && { speaker: speakerView(agent, context) }),
  };
}

// The run's first estimate counted the agent's own tools: the listed ones join the measure now.
export function recordOffered(agent: CompiledAgent, context: AgentContext, event: AgentEvent): Partial<AgentContext> {
  const { definitions, sources } = as(event, 'io.listed').output;
  return { offered: { definitions, ...(sources && { sources }) }, brain: withListedTools(context.brain, definitions) };
}

/**
 * A new batch, on the common path: calls answered up front (an unknown tool, past the per-reply
 * limit) start and finish here, and the calls the IO starts at once (`startsAtOnce`) start, handed
 * to it in the same step, so a batch within `toolConcurrency` costs the chart no event per call.
 * A call queued behind them is not running yet: the IO announces it as it starts it.
 */
export function announceBatch(agent: CompiledAgent, context: AgentContext, event: AgentEvent): Effect[] {
  const atOnce = new Set(startsAtOnce(agent, runnable(agent, context)).map((call) => call.id));
  const announced = answeredCalls(context, batchResults(context, agent.maxCalls).filter(({ call, result }) => result !== undefined || atOnce.has(call.id)));
  return atOnce.size > 0 ? [{ assign: { startedCalls: [...atOnce] } }, ...announced] : announced;
}

/** A call the IO started as it started it (queued, approved, or restored): announced, and known started should the run stop before its end. */
export function callStarted(agent: CompiledAgent, context: AgentContext, event: AgentEvent): Effect[] {
  const { call } = as(event, 'io.toolStarted');
  const started = context.startedCalls ?? [];
  return [...(started.includes(call.id) ? [] : [{ assign: { startedCalls: [...started, call.id] } }]), { emit: toolStarted(context, call) }];
}

/** Of a new batch's runnable calls, those the IO starts as it gets them: the first `toolConcurrency` (none other of the batch is in flight). */
const startsAtOnce = (agent: CompiledAgent, runnableCalls: readonly ToolCall[]) => runnableCalls.slice(0, agent.io.toolConcurrency);

export function requestCompaction(agent: CompiledAgent, context: AgentContext, event: AgentEvent): IoRequest {
  return {
    type: 'compaction',
    key: compactionKey(context),
    turn: context.brain.context.turnsTaken,
    reason: context.brain.context.compactionReason!,
    conversation: conversation(context),
    tokensBefore: context.brain.context.contextTokens,
    systemTokens: context.extrasTokens,
    contextWindow: context.policy.contextWindow,
    tools: offeredTools(agent, context).definitions,
    model: context.models?.active.index ?? 0,
  };
}

export function emitTurnFinished(agent: CompiledAgent, context: AgentContext, event: AgentEvent): AgentEmitted {
  return {
    type: 'turn.finished' as const,
    id: deliveryIds.reply(context.runIndex, context.brain.context.turnsTaken, context.attempt?.attempt ?? 1),
    turn: context.brain.context.turnsTaken,
    reply: as(event, 'io.replied').reply,
  };
}

/** The context with the result `event` (an `io.toolFinished`) reports journaled. */
const withResult = (context: AgentContext, event: AgentEvent): AgentContext => ({
  ...context,
  toolJournal: journalResult(context.toolJournal, as(event, 'io.toolFinished').result),
});

export function emitToolFinished(agent: CompiledAgent, context: AgentContext, event: AgentEvent): AgentEmitted {
  const { call, result } = as(event, 'io.toolFinished');
  return toolFinished(context, call, result);
}

export function acceptCompaction(agent: CompiledAgent, context: AgentContext, event: AgentEvent): Partial<AgentContext> {
  const { output } = as(event, 'io.compacted');
  return applyCompactionPass(context, output, context.policy);
}

export function emitCompactionFinished(agent: CompiledAgent, context: AgentContext, event: AgentEvent): AgentEmitted {
  const { reason, output } = as(event, 'io.compacted');
  return { type: 'compaction.finished' as const, reason, before: output.before, after: output.after, rewritten: output.messages !== undefined };
}

/** A `seal` from outside: the run ends Sealed with its reason, its calls answered interrupted (see `endRun`). */
export function sealRun(agent: CompiledAgent, context: AgentContext, event: AgentEvent): Partial<AgentContext> {
  return endRun(agent, context, { type: 'seal', reason: as(event, 'seal').reason });
}

export function rejectPolicy(agent: CompiledAgent, context: AgentContext, event: AgentEvent): AgentEmitted {
  return {
    type: 'policy.rejected' as const,
    reason: externalEventProblem(event) ?? policyProblem(agent, context, as(event, 'policy').policy) ?? '',
  };
}

export function emitTextDelta(agent: CompiledAgent, context: AgentContext, event: AgentEvent): AgentEmitted {
  const { turn, delta, index } = as(event, 'io.textDelta');
  return { type: 'text.delta' as const, id: deliveryIds.text(context.runIndex, turn, context.attempt?.attempt ?? 1, index), turn, delta };
}

export function emitRetry(agent: CompiledAgent, context: AgentContext, event: AgentEvent): AgentEmitted {
  const { turn, retry, delayMs, error } = as(event, 'io.retry');
  return { type: 'model.retry' as const, turn, retry, delayMs, error };
}

export function finishRun(agent: CompiledAgent, context: AgentContext, event: AgentEvent): Partial<AgentContext> {
  const brain = finishBrain(context.brain);
  const ended = agentOutcome(brain.context.outcome!);
  const outcome = agent.answers ? agent.answers.outcome(ended) : ended;
  return { brain, lastRun: { outcome, usage: context.runUsage, ...agent.pricing.run(context) } };
}

export function emitRunFinished(agent: CompiledAgent, context: AgentContext, event: AgentEvent): AgentEmitted {
  const sessionCostUsd = agent.pricing.session(context);
  return {
    type: 'run.finished' as const,
    id: deliveryIds.runFinished(context.runIndex, context.brain.context.turnsTaken),
    output: outputOf(context)!,
    sessionUsage: context.sessionUsage,
    ...(sessionCostUsd !== undefined && { sessionCostUsd }),
  };
}

/**
 * Hands the runnable calls to the IO. `announce`: the IO reports each call's start; false on a new
 * batch whose calls that start at once the chart announced itself (see announceBatch), so the IO
 * reports only the others', as each starts.
 */
export function requestTools(agent: CompiledAgent, context: AgentContext, announce: boolean): RequestOf<'tools'> {
  const calls = runnable(agent, context);
  return {
    type: 'tools',
    key: batchKey(context),
    turn: context.brain.context.turnsTaken,
    sessionId: context.sessionId,
    scope: context.scope,
    calls,
    batch: pendingCalls(context.brain),
    conversation: conversation(context),
    announced: announce ? [] : startsAtOnce(agent, calls).map((call) => call.id),
    offered: agent.hasSources && context.offered ? { key: toolsetKey(context), definitions: context.offered.definitions, sources: context.offered.sources } : null,
    doubt: context.doubt,
  };
}

/** A model call starts: its attempt is counted (stored before it runs); a later one voids the text before it. */
export function startAttempt(_agent: CompiledAgent, context: AgentContext, reason: 'retry' | 'resumed', change: Partial<Omit<AgentContext, 'attempt'>> = {}): Effect[] {
  const attempt = nextAttempt(context.attempt, modelKey(context));
  // `attempt` first: a literal that starts with a spread gets a map of its own per call in V8 when a key follows it.
  if (attempt.attempt === 1) return [{ assign: { attempt, ...change } }];
  const turn = context.brain.context.turnsTaken + 1;
  const voided = attempt.attempt - 1;
  return [{ assign: { attempt, ...change } }, { emit: { type: 'text.retracted', id: deliveryIds.retracted(context.runIndex, turn, voided), turn, attempt: voided, reason } }];
}

/**
 * Entering a model call: the brain takes its `CallLLM` step and the attempt is counted, in one
 * change (one snapshot, not two). A call entered again after a usage-limit pause finds the brain
 * at its call already: the step is not taken twice (from there, a turn limit would end the run).
 */
export function startModelCall(agent: CompiledAgent, context: AgentContext): Effect[] {
  if (context.brain.value === 'AwaitingModel') return startAttempt(agent, context, 'resumed');
  const brain = takeStep(context.brain, decisionPolicy(agent, context));
  return startAttempt(agent, { ...context, brain }, 'resumed', { brain });
}

/** What a refusal names of the agent: its context and where it is. */
type Shown = { context: AgentContext; value: unknown };

/**
 * An event refused where it arrived, and why: its payload, then the first reason a feature gives
 * (`refusals`: an approval or a resume it cannot be), else not now.
 */
export function rejectEvent(agent: CompiledAgent, snapshot: Shown, event: AgentEvent, refusals: readonly RefusalHook[]): AgentEmitted {
  let reason = externalEventProblem(event);
  for (const refusal of refusals) reason ??= refusal(agent, snapshot.context, event);
  return {
    type: 'event.rejected' as const,
    event: (event.type === 'event.malformed' ? event.of : String(event.type)).slice(0, 100),
    reason: reason ?? `not accepted now (the agent is ${JSON.stringify(snapshot.value)})`,
  };
}

/** The action that refuses an event, with the features' reasons in list order (see `rejectEvent`). */
export const rejectEventWith = (refusals: readonly RefusalHook[]) =>
  emit(({ event, self }) => rejectEvent(currentAgent(), self.getSnapshot() as Shown, event, refusals));

/** A guard: the brain's next step under the policy the agent decides with now is of this type. */
const stepIs = (type: Step['type']) => when(({ agent, context }) => stepTypeOf(context.brain, decisionPolicy(agent, context)) === type);

/** The guards and actions the chart names for the loop every agent runs. */
export const coreImplementations = {
  guards: {
    malformedPolicy: ({ event }: Args) => event.type === 'event.malformed' && event.of === 'policy',
    promptQueued: ({ context }: Args) => context.queued !== null,
    inputRefused: ({ context }: Args) => inputRefused(context),
    runInFlight: ({ context }: Args) => runInFlight(context.brain),
    rewindable: ({ context, event }: Args) => feedProblem(context.brain.context, { type: 'rewindTo', len: as(event, 'rewind').len }) === null,
    singleRun: ({ context }: Args) => context.once,
    extrasChanged: when(({ agent, context }) => extrasFor(agent, context) !== context.extrasTokens),
    shouldPrune: when(({ agent, context }) => !context.brain.context.cancelled && pendingPrune(context.brain, context.policy, agent.pruning, agent.config.pruner) !== null),
    callLLM: stepIs('CallLLM'),
    callTools: stepIs('CallTools'),
    compact: stepIs('Compact'),
    policyAcceptable: when(({ agent, context, event }) => policyProblem(agent, context, as(event, 'policy').policy) === null),
    batchComplete: when(({ agent, context }) => batchComplete(context, agent.maxCalls)),
    // A handoff is decided on the complete batch by the tools state's list (see `handsOff`), so an agent with handoffs goes there.
    completesBatch: when(({ agent, context, event }) => agent.team === null && batchComplete(withResult(context, event), agent.maxCalls)),
    callsRunnable: when(({ agent, context }) => runnable(agent, context).length > 0),
    nothingRunnable: when(({ agent, context }) => runnable(agent, context).length === 0),
    currentModelCall: fromCurrent(modelKey),
    currentBatch: fromCurrent(batchKey),
    currentCompaction: fromCurrent(compactionKey),
    currentToolset: fromCurrent(toolsetKey),
    toolsetDue: configured((agent) => agent.hasSources, ({ context }) => !context.offered),
    /** Unknown types from outside; XState's own events and the IO's late reports pass silently. */
    unknownExternal: ({ event }: Args) => !fromIo(event) && !fromTelemetry(event) && !event.type.startsWith('xstate.'),
  },
  actions: {
    emitRunStarted: rule.emit(emitRunStarted),
    takeStep: assigns(({ agent, context }) => ({ brain: takeStep(context.brain, decisionPolicy(agent, context)) })),
    rewindBrain: assign({ brain: ({ context, event }) => feedBrain(context.brain, { type: 'rewindTo', len: as(event, 'rewind').len }) }),
    refreshExtras: rule.assign(refreshExtras),
    prune: assigns(({ agent, context }) => ({ brain: applyPrune(context.brain, pendingPrune(context.brain, context.policy, agent.pruning, agent.config.pruner)!) })),
    emitPruned: emits(({ agent, context }) => ({ type: 'prune.finished' as const, ...pruneReport(agent, context) })),
    requestModel: rule.send(requestModel),
    requestToolset: sendTo('io', ({ context }): IoRequest => ({ type: 'toolset', key: toolsetKey(context) })),
    recordOffered: rule.assign(recordOffered),
    /** Hands the runnable calls to the IO; `announce`: the IO reports each start (else the chart did for those that start at once, see announceBatch). */
    requestTools: sends<boolean>(({ agent, context }, announce) => requestTools(agent, context, announce)),
    announceBatch: rule.effects(announceBatch),
    requestCompaction: rule.send(requestCompaction),
    abortIo: sendTo('io', { type: 'abort' } satisfies IoRequest),
    // Checked against the tools the model was offered: the run's recorded set (see ToolSource).
    acceptReply: assigns(({ agent, context, event }) => afterReply(agent, context, answerOf(agent, context, event))),
    emitTurnFinished: rule.emit(emitTurnFinished),
    journalToolResult: assign({ toolJournal: ({ context, event }) => withResult(context, event).toolJournal }),
    emitToolStarted: rule.effects(callStarted),
    emitToolFinished: rule.emit(emitToolFinished),
    acceptToolResults: assigns(({ agent, context }) => ({ brain: applyToolResults(context, agent.maxCalls), ...resetBatch(agent, context) })),
    // The result that completes its batch: journaled and the batch fed in one change (one snapshot, one microstep).
    acceptLastResult: assigns(({ agent, context, event }) => {
      const journaled = withResult(context, event);
      return { brain: applyToolResults(journaled, agent.maxCalls), ...resetBatch(agent, journaled) };
    }),
    acceptCompaction: rule.assign(acceptCompaction),
    emitCompactionFinished: rule.emit(emitCompactionFinished),
    failWith: assigns<FailureType>(({ context, event }, type) => ({ brain: feedBrain(context.brain, { type: 'fail', error: errorInfo(type, as(event, 'io.failed').error) }) })),
    sealRun: rule.assign(sealRun),
    steerRun: assign({
      brain: ({ context, event }) => feedBrain(context.brain, { type: 'steer', message: asUserMessage(as(event, 'steer').message) }),
    }),
    changePolicy: assign({ policy: ({ context, event }) => PolicySchema.parse({ ...context.policy, ...as(event, 'policy').policy }) }),
    rejectPolicy: rule.emit(rejectPolicy),
    emitTextDelta: rule.emit(emitTextDelta),
    /** A model call starts: its attempt is counted (stored before it runs); a later one voids the text before it. */
    startAttempt: effects<'retry' | 'resumed'>(({ agent, context }, reason) => startAttempt(agent, context, reason)),
    startModelCall: rule.effects(startModelCall),
    emitRetry: rule.emit(emitRetry),
    finishRun: rule.assign(finishRun),
    emitRunFinished: rule.emit(emitRunFinished),
  },
};
