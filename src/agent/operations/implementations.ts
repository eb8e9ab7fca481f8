/**
 * Operations in the driver: the chart's guards and actions for the hook points (beforeModelCall,
 * afterReply, beforeTools) where the agent's operations run in list order, an operation that
 * yields and the resume that continues it, and an operation's failure (a hook, a prompt part);
 * with the rules they read over the compiled agent and the run's context (the operations
 * themselves: operation.ts, operation-rules.ts, their IO: io.ts).
 */
import { assigns, configured, rule, when, type Args, type ContextHook, type RefusalHook } from '../core/bind.js';
import type { FeatureHandlers } from '../protocol/io-protocol.js';
import { operationHandler } from './io.js';
import { conversationOf, pendingCalls } from '../core/brain-state.js';
import { agentMemo, type CompiledAgent } from '../core/compile.js';
import type { AgentContext } from '../core/context.js';
import { conversation, endRun, extrasFor } from '../core/driver-rules.js';
import { answeredCalls, type Effect } from '../core/effects.js';
import type { ToolCall, ToolMessage } from '../../schemas.js';
import { errorInfo, journalResult } from '../core/run-rules.js';
import type { AgentEmitted } from '../protocol/actor-types.js';
import { as, type AgentEvent } from '../protocol/agent-event.js';
import { fromIo, type IoRequest } from '../protocol/io-protocol.js';
import { keyOf, turnAt } from '../protocol/keys.js';
import { OperationError } from './operation.js';
import { applyOperated, applyResumed, checkStoredOperations, closeOperations, openPoint, resumeVerdict, type ResumeVerdict } from './operation-rules.js';
import type { OperationHook } from './operation-state.js';

/** The key of a hook point: its step's key (the model call it precedes or follows, the batch it precedes). */
export const pointKey = (context: AgentContext, hook: OperationHook) =>
  keyOf({ kind: 'point', hook, ...turnAt(context, context.brain.context.turnsTaken + (hook === 'beforeModelCall' ? 1 : 0)) });

const verdictMemo = agentMemo<ResumeVerdict>();

/** What a resume event does, decided once per event (guards and actions read the same verdict). */
export const verdictOf = (agent: CompiledAgent, context: AgentContext, event: AgentEvent): ResumeVerdict => {
  let verdict = verdictMemo.get(agent, event);
  if (!verdict) {
    const { operation, payload } = as(event, 'operation.resume');
    const ctx = { sessionId: context.sessionId, scope: context.scope, turn: context.brain.context.turnsTaken, messages: conversationOf(context.brain) };
    verdict = resumeVerdict(context.operations, agent.plan, { operation, payload }, ctx);
    verdictMemo.set(agent, event, verdict);
  }
  return verdict;
};

/** Asks the IO to run the open point's hooks, from the next one in list order. */
export function requestOperations(_agent: CompiledAgent, context: AgentContext, _event: AgentEvent): IoRequest {
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

/** One hook's output applied; calls it answered are done (they never run, and listeners see them finish). */
export function acceptOperated(agent: CompiledAgent, context: AgentContext, event: AgentEvent): Effect[] {
  const out: Effect[] = [];
  const { index, output } = as(event, 'io.operated');
  out.push({ assign: { operations: applyOperated(context.operations, agent.plan, index, output) } });
  if (!output?.results) return out;
  let toolJournal = context.toolJournal;
  const answered: { call: ToolCall; result: ToolMessage }[] = [];
  for (const result of output.results) {
    const call = pendingCalls(context.brain).find((pending) => pending.call.id === result.toolCallId)!.call;
    if (toolJournal.some((known) => known.toolCallId === call.id)) continue;
    toolJournal = journalResult(toolJournal, result);
    answered.push({ call, result });
  }
  out.push(...answeredCalls(context, answered));
  out.push({ assign: { toolJournal } });
  return out;
}

export function emitOperationYielded(_agent: CompiledAgent, context: AgentContext, _event: AgentEvent): AgentEmitted {
  const { operation, reason, payload } = context.operations.waiting!;
  return { type: 'operation.yielded' as const, operation, reason, payload };
}

/** An operation failed (a hook or its IO, a resume's apply, a prompt part): reported, and the run fails naming it. */
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
  out.push({ assign: endRun(agent, context, { type: 'Failed', error: errorInfo('OperationError', error) }) });
  return out;
}

/** A guard: the hook point has hooks and has not been done at its key. */
const pointDue = (hook: OperationHook) =>
  configured((agent) => agent.plan.at[hook].length > 0, ({ context }) => context.operations.done !== pointKey(context, hook));

/** An agent with operations: only its runs open hook points, wait on an operation, or carry prompt parts. */
const hasOperations = (agent: CompiledAgent) => agent.operations.length > 0;

/** The guards and actions the chart names for operations. */
export const operationImplementations = {
  // A stored operation state is checked against this agent's operations.
  restore: ((agent, context) => ({ operations: checkStoredOperations(agent.plan, context.operations) })) satisfies ContextHook,
  // The IO's handler for this feature's requests.
  io: { operation: operationHandler } satisfies FeatureHandlers,
  // A run starts with no hook point open and none done.
  runStart: ((_agent, context) => ({ operations: { ...closeOperations(context.operations), done: null } })) satisfies ContextHook,
  // A resume no transition took while an operation waits: why its operation refuses it.
  refusal: ((agent, context, event) =>
    event.type === 'operation.resume' && context.operations.waiting ? (verdictOf(agent, context, event) as { reason: string }).reason : null) satisfies RefusalHook,
  guards: {
    promptFails: configured(hasOperations, ({ agent, context }) => typeof extrasFor(agent, context) !== 'number'),
    operationFailure: ({ event }: Args) => event.type === 'io.failed' && OperationError.isInstance(event.error),
    currentPoint: ({ context, event }: Args) => fromIo(event) && context.operations.point?.key === (event as { key: string }).key,
    operationWaiting: configured(hasOperations, ({ context }) => context.operations.waiting !== null),
    pointOpen: configured(hasOperations, ({ context }) => context.operations.point !== null),
    beforeModelCallDue: pointDue('beforeModelCall'),
    beforeToolsDue: pointDue('beforeTools'),
    resumeRefused: when(({ agent, context, event }) => verdictOf(agent, context, event).type === 'refused'),
    resumeFailed: when(({ agent, context, event }) => verdictOf(agent, context, event).type === 'failed'),
  },
  actions: {
    openPoint: assigns<OperationHook>(({ agent, context }, hook) => ({ operations: openPoint(context.operations, agent.plan, hook, pointKey(context, hook)) })),
    requestOperations: rule.send(requestOperations),
    applyOperated: rule.effects(acceptOperated),
    emitOperationYielded: rule.emit(emitOperationYielded),
    applyResume: assigns(({ agent, context, event }) => ({
      operations: applyResumed(context.operations, agent.plan, (verdictOf(agent, context, event) as Extract<ResumeVerdict, { type: 'accepted' }>).output),
    })),
    failOperation: rule.effects(failOperation),
  },
};
