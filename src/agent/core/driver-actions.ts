/**
 * The driver's actions as pure functions of (agent, context, event): each returns the context
 * change, the event to emit, the request for the IO, or an ordered list of those (an Effect
 * list) that the chart performs. The chart (machines/agent.machine.ts) names them, one line each.
 */
import { conversationOf, feedBrain, firstPending, pendingCalls } from './brain-state.js';

import { type CompiledAgent } from './compile.js';
import { batchKey, compactionKey, conversation, extrasFor,  modelKey, offeredTools,  ownModel, ownOffered, policyProblem,  resetBatch, runnable, speakerView, stopRun, toolsetKey,  verdictOf } from './driver-rules.js';
import { as, type AgentEvent } from '../protocol/agent-event.js';

import { costUsd } from '../budget/budget.js';
import { type AgentContext } from './context.js';

import { applyOperated, closeOperations } from '../operations/operation-rules.js';
import { OperationError } from '../operations/operation.js';
import { agentOutcome } from '../protocol/failure.js';
import { interruptedStep, keepSteering, runCancelHooks } from '../cancel/cancel-rules.js';
import { startModels, totalCost, usageCosts } from '../fallback/fallback.js';

import { deliveryIds, nextAttempt } from '../protocol/delivery.js';
import { externalEventProblem } from '../protocol/events.js';
import type { IoRequest } from '../protocol/io-protocol.js';

import * as guard from '../guardrails/guardrails.js';

import { NO_USAGE, applyCompactionPass,  asUserMessage, batchResults, errorInfo, finishBrain, interruptBatch, journalResult, startRun,  withExtras, withListedTools } from './run-rules.js';
import { type UserMessage } from '../../schemas.js';


import { FRESH_OUTPUT_STATE, withOutput } from '../structured-output/structured-output.js';

import type { AgentEmitted } from '../protocol/actor-types.js';
import { toolFinished, toolStarted, type Effect } from './effects.js';
import { outputOf } from '../protocol/actor-types.js';

export function beginRun(agent: CompiledAgent, context: AgentContext, event: AgentEvent): Partial<AgentContext> {
  return {
    operations: { ...closeOperations(context.operations), done: null },
    brain: startRun(context.brain, event.type === 'input' ? asUserMessage(event.message) : context.queued!, ownOffered(agent, context).definitions, context.extrasTokens),
    queued: null,
    runIndex: context.runIndex + 1,
    runUsage: NO_USAGE,
    compactionPasses: 0,
    ...resetBatch(agent, context),
    runStartedAt: agent.clock(),
    budgetPause: undefined,
    // Each run lists its sources once (its `toolset` step); an agent without sources records nothing.
    ...(agent.hasSources && { offered: null }),
    ...(agent.structured && { outputState: FRESH_OUTPUT_STATE }),
    ...(agent.guardrails && { guard: guard.NO_GUARD }),
    // maxHandoffs counts per run.
    ...(agent.team && { handoffs: 0 }),
    // Each run starts on the first model of a list again.
    ...(agent.models.listed && { models: startModels(agent.models, context.models) }),
  };
}

export function emitRunStarted(agent: CompiledAgent, context: AgentContext, event: AgentEvent): AgentEmitted {
  return {
    type: 'run.started' as const,
    id: deliveryIds.runStarted(context.runIndex),
    run: context.runIndex,
    message: firstPending(context.brain) as UserMessage,
  };
}

export function requestOperations(agent: CompiledAgent, context: AgentContext, event: AgentEvent): IoRequest {
  const point = context.operations.point!;
  return {
    type: 'operation',
    key: point.key,
    hook: point.hook,
    from: point.next,
    turn: context.brain.context.turnsTaken + (point.hook === 'beforeModelCall' ? 1 : 0),
    sessionId: context.sessionId,
    scope: context.scope,
    conversation: conversation(context),
    slices: context.operations.slices,
    reply: point.reply,
    batch: pendingCalls(context.brain),
  };
}

export function acceptOperated(agent: CompiledAgent, context: AgentContext, event: AgentEvent): Effect[] {
  const out: Effect[] = [];
  const { index, output } = as(event, 'io.operated');
  out.push({ assign: { operations: applyOperated(context.operations, agent.plan, index, output) } });
  if (!output?.results) return out;
  // Calls an operation answered are done: they never run, and listeners see them finish.
  let toolJournal = context.toolJournal;
  for (const result of output.results) {
    const call = pendingCalls(context.brain).find((pending) => pending.call.id === result.toolCallId)!.call;
    if (toolJournal.some((known) => known.toolCallId === call.id)) continue;
    toolJournal = journalResult(toolJournal, result);
    out.push({ emit: toolStarted(context, call) });
    out.push({ emit: toolFinished(context, call, result) });
  }
  out.push({ assign: { toolJournal } });
  return out;
}

export function emitOperationYielded(agent: CompiledAgent, context: AgentContext, event: AgentEvent): AgentEmitted {
  const { operation, reason, payload } = context.operations.waiting!;
  return { type: 'operation.yielded' as const, operation, reason, payload };
}

export function failOperation(agent: CompiledAgent, context: AgentContext, event: AgentEvent): Effect[] {
  const out: Effect[] = [];
  const error = (
    event.type === 'operation.resume'
      ? (verdictOf(agent, context, event) as { error: OperationError }).error
      : event.type === 'io.failed'
        ? event.error
        : extrasFor(agent, context)
  ) as OperationError;
  out.push({ emit: { type: 'operation.failed', operation: error.operation, error } });
  out.push({ assign: {
    brain: stopRun(agent, context, { type: 'Failed', error: errorInfo('OperationError', error) }),
    operations: closeOperations(context.operations),
    ...resetBatch(agent, context),
  } });
  return out;
}

export function refreshExtras(agent: CompiledAgent, context: AgentContext, event: AgentEvent): Partial<AgentContext> {
  const extrasTokens = extrasFor(agent, context) as number;
  return { brain: withExtras(context.brain, context.extrasTokens, extrasTokens), extrasTokens };
}

export function recordTrace(agent: CompiledAgent, context: AgentContext, event: AgentEvent): Partial<AgentContext> {
  const { runIndex, traceparent } = as(event, 'telemetry.traced');
  return runIndex === context.runIndex ? { trace: traceparent } : {};
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
    ...(agent.team && { speaker: speakerView(agent, context) }),
  };
}

// The run's first estimate counted the agent's own tools: the listed ones join the measure now.
export function recordOffered(agent: CompiledAgent, context: AgentContext, event: AgentEvent): Partial<AgentContext> {
  const { definitions } = as(event, 'io.listed').output;
  return { offered: { definitions }, brain: withListedTools(context.brain, definitions) };
}

/**
 * A new batch, on the common path: every call shows up in a UI's trace at once. Calls answered
 * up front (an unknown tool, past the per-reply limit) start and finish here; the others start,
 * handed to the IO in the same step.
 */
export function announceBatch(agent: CompiledAgent, context: AgentContext, event: AgentEvent): Effect[] {
  const out: Effect[] = [];
  for (const { call, result } of batchResults(context, agent.maxCalls)) {
    out.push({ emit: toolStarted(context, call) });
    if (result) out.push({ emit: toolFinished(context, call, result) });
  }
  return out;
}

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

/** Seed 003: operations keep what the interrupted step received, calls are answered once, the run ends Cancelled. */
export function cancelRun(agent: CompiledAgent, context: AgentContext, event: AgentEvent): Effect[] {
  const out: Effect[] = [];
  const turn = context.brain.context.turnsTaken;
  const ctx = { sessionId: context.sessionId, scope: context.scope, turn, messages: conversationOf(context.brain) };
  const { slices, failures } = runCancelHooks(agent.plan, context.operations.slices, interruptedStep(context, agent.maxCalls), ctx);
  for (const error of failures) out.push({ emit: { type: 'operation.failed', operation: error.operation, error } });
  out.push({ assign: {
    brain: keepSteering(stopRun(agent, context, { type: 'Cancelled' })),
    operations: closeOperations({ ...context.operations, slices }),
    ...resetBatch(agent, context),
  } });
  return out;
}

export function sealRun(agent: CompiledAgent, context: AgentContext, event: AgentEvent): Partial<AgentContext> {
  return {
    brain:
      context.brain.value === 'Terminal'
        ? context.brain
        : feedBrain(interruptBatch(context, agent.maxCalls), { type: 'seal', reason: as(event, 'seal').reason }),
    operations: closeOperations(context.operations),
    ...resetBatch(agent, context),
  };
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
  const byModel = agent.models.listed ? context.models?.run ?? [] : undefined;
  const cost = byModel ? totalCost(agent.models, byModel) : costUsd(context.runUsage, agent.prices);
  const usageByModel = byModel && { usageByModel: usageCosts(agent.models, byModel) };
  const outcome = withOutput(agent.structured, agentOutcome(brain.context.outcome!));
  return { brain, lastRun: { outcome, usage: context.runUsage, ...(cost !== undefined && { costUsd: cost }), ...usageByModel } };
}

export function emitRunFinished(agent: CompiledAgent, context: AgentContext, event: AgentEvent): AgentEmitted {
  const sessionCostUsd = agent.models.listed ? totalCost(agent.models, context.models?.session ?? []) : costUsd(context.sessionUsage, agent.prices);
  return {
    type: 'run.finished' as const,
    id: deliveryIds.runFinished(context.runIndex, context.brain.context.turnsTaken),
    output: outputOf(context)!,
    sessionUsage: context.sessionUsage,
    ...(sessionCostUsd !== undefined && { sessionCostUsd }),
  };
}

/** Hands the runnable calls to the IO; `announce`: the IO reports each start (else the chart did, see announceBatch). */
export function requestTools(agent: CompiledAgent, context: AgentContext, announce: boolean): IoRequest {
  return {
    type: 'tools',
    key: batchKey(context),
    turn: context.brain.context.turnsTaken,
    sessionId: context.sessionId,
    scope: context.scope,
    calls: runnable(agent, context),
    batch: pendingCalls(context.brain),
    conversation: conversation(context),
    announce,
    offered: agent.hasSources && context.offered ? { key: toolsetKey(context), definitions: context.offered.definitions } : null,
    doubt: context.doubt,
  };
}

/** A model call starts: its attempt is counted (stored before it runs); a later one voids the text before it. */
export function startAttempt(_agent: CompiledAgent, context: AgentContext, reason: 'retry' | 'resumed'): Effect[] {
  const attempt = nextAttempt(context.attempt, modelKey(context));
  if (attempt.attempt === 1) return [{ assign: { attempt } }];
  const turn = context.brain.context.turnsTaken + 1;
  const voided = attempt.attempt - 1;
  return [{ assign: { attempt } }, { emit: { type: 'text.retracted', id: deliveryIds.retracted(context.runIndex, turn, voided), turn, attempt: voided, reason } }];
}
