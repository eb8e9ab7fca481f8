import { fromPromise, type AnyActorRef } from 'xstate';
import type { Model, ModelReply } from '../model.js';
import type { CompactionReason, Message, PendingToolCall, ToolMessage } from '../schemas.js';
import { runToolCalls } from '../tools/run-tools.js';
import { withRetry, type RetryOptions } from '../models/retry.js';
import { estimateToolTokens } from '../tokens.js';
import type { ToolSet } from '../tools/define-tool.js';
import { conversationOf, pendingCalls, type BrainState } from './brain-state.js';
import type { Compactor } from './config.js';
import { durabilityOf } from './durability.js';
import { callsNeedingApproval, decisionFor, isWaiting, type Approvals } from './approvals.js';
import type { Operation, OperationContext, PreparedRequest } from './operation.js';
import type { Policy } from '../schemas.js';

/**
 * The driver's IO, as invoked actors. Their inputs are deliberately tiny (an idempotency key
 * and a turn number): XState stores an invoked actor's input in every snapshot and replays it
 * on restore, so the conversation is read from the parent when the call starts instead.
 */

/** The part of the driver's context services read. */
export interface DriverView {
  sessionId: string;
  brain: BrainState;
  policy: Policy;
  toolJournal: readonly ToolMessage[];
  approvals: Approvals;
}

export interface ServiceInput {
  /** Stable across retries and across a restore that repeats the call. */
  key: string;
  turn: number;
}

/** Events services send to the driver while they work. */
export type ServiceEvent =
  | { type: 'service.textDelta'; turn: number; delta: string }
  | { type: 'service.retry'; turn: number; retry: number; delayMs: number; error: unknown }
  | { type: 'service.toolStarted'; call: import('../schemas.js').ToolCall }
  | { type: 'service.toolFinished'; call: import('../schemas.js').ToolCall; result: ToolMessage };

// An invoked actor's `_parent` is the driver that invoked it: the one way to read the driver's
// current context without copying the conversation into the child's persisted input.
function driverView(self: AnyActorRef): DriverView {
  const parent = self._parent;
  if (!parent) throw new Error('loopchart services must be invoked by the agent machine');
  return parent.getSnapshot().context as DriverView;
}

/** Reports progress to the driver, unless the driver has already moved on (the call was aborted). */
const tell = (self: AnyActorRef, signal: AbortSignal, event: ServiceEvent) => {
  if (!signal.aborted) self._parent?.send(event);
};

export interface ServiceDeps {
  model: Model;
  /** Retry policy for model calls; false turns retries off. */
  retry: RetryOptions | false;
  tools: ToolSet;
  operations: readonly Operation[];
  compactor: Compactor | undefined;
  toolConcurrency: number;
}

/** The operations' prompt parts for this call: sent before the conversation, never stored. */
export function promptParts(operations: readonly Operation[], ctx: OperationContext): Message[] {
  return operations.flatMap((op) => {
    const text = op.prompt?.(ctx);
    return text ? [{ role: 'system' as const, content: text }] : [];
  });
}

export function prepareRequest(deps: ServiceDeps, ctx: OperationContext): PreparedRequest {
  const parts = promptParts(deps.operations, ctx);
  let request: PreparedRequest = { messages: [...parts, ...ctx.messages], tools: [...deps.tools.definitions] };
  for (const op of deps.operations) request = op.beforeModelCall?.(request, ctx) ?? request;
  return request;
}

export function modelService(deps: ServiceDeps) {
  return fromPromise<ModelReply, ServiceInput>(async ({ input, self, signal }) => {
    await durabilityOf(self._parent)?.flush();
    const view = driverView(self);
    const ctx: OperationContext = { sessionId: view.sessionId, turn: input.turn, messages: conversationOf(view.brain) };
    const request = prepareRequest(deps, ctx);
    // Wrapped per call so the driver hears of each retry: a UI must drop the text streamed so far.
    const retry = deps.retry;
    const model =
      retry === false
        ? deps.model
        : withRetry(deps.model, {
            ...retry,
            onRetry: (attempt) => {
              tell(self, signal, { type: 'service.retry', turn: input.turn, ...attempt });
              retry.onRetry?.(attempt);
            },
          });
    const reply = await model.generate({
      ...request,
      signal,
      idempotencyKey: input.key,
      onTextDelta: (delta) => tell(self, signal, { type: 'service.textDelta', turn: input.turn, delta }),
    });
    for (const op of deps.operations) op.afterReply?.(reply, ctx);
    return reply;
  });
}

/**
 * Runs the pending calls that may run now and have no result yet: not journaled (after a
 * restore, calls that had finished are not run again), not pre-answered, not denied, not
 * waiting for approval. Returns only the results it produced; the driver assembles the batch.
 */
export function toolsService(deps: ServiceDeps) {
  return fromPromise<ToolMessage[], ServiceInput>(async ({ input, self, signal }) => {
    const durable = durabilityOf(self._parent);
    await durable?.flush();
    const view = driverView(self);
    if (view.brain.value !== 'AwaitingTools') throw new Error(`tools invoked while the brain is ${view.brain.value}`);
    const calls = pendingCalls(view.brain);
    const done = new Map(view.toolJournal.map((result) => [result.toolCallId, result]));
    const runnable = runnableCalls(view, calls);
    const hooks = deps.operations.filter((op) => op.beforeTools);
    if (hooks.length) {
      const ctx: OperationContext = { sessionId: view.sessionId, turn: input.turn, messages: conversationOf(view.brain) };
      for (const op of hooks) op.beforeTools!(calls, ctx);
    }
    // Calls the brain answered itself (unknown tools) still show up in a UI's trace.
    for (const { call, preAnswered } of calls) {
      if (!preAnswered || done.has(call.id)) continue;
      tell(self, signal, { type: 'service.toolStarted', call });
      tell(self, signal, { type: 'service.toolFinished', call, result: preAnswered });
    }
    return runToolCalls(
      runnable,
      deps.tools,
      {
        concurrency: deps.toolConcurrency,
        signal,
        idempotencyKey: (call) => `${view.sessionId}:${call.id}`,
        onStart: (call) => tell(self, signal, { type: 'service.toolStarted', call }),
        onFinish: (call, result) => {
          // Journal first: a result that reached the driver but not the store would be run again.
          if (!signal.aborted) durable?.journal(input.key, result);
          tell(self, signal, { type: 'service.toolFinished', call, result });
        },
      },
    );
  });
}

/** The calls that may run now: no result yet, not pre-answered, not denied, not waiting for a human. */
export function runnableCalls(view: Pick<DriverView, 'toolJournal' | 'approvals'>, calls: readonly PendingToolCall[]): PendingToolCall[] {
  const done = new Set(view.toolJournal.map((result) => result.toolCallId));
  return calls.filter(({ call, preAnswered }) => {
    if (preAnswered || done.has(call.id)) return false;
    const decision = decisionFor(view.approvals, call);
    return decision ? decision.approved : !isWaiting(view.approvals, call);
  });
}

/** Which calls of the batch wait for a human: asks each tool's `needsApproval` (may be async). */
export function approvalService(deps: ServiceDeps) {
  return fromPromise<string[], ServiceInput>(async ({ self }) => {
    const view = driverView(self);
    const calls = pendingCalls(view.brain);
    const finished = new Set(view.toolJournal.map((result) => result.toolCallId));
    return callsNeedingApproval(calls, deps.tools, view.approvals, view.sessionId, finished);
  });
}

const retrying = (deps: ServiceDeps): Model => (deps.retry === false ? deps.model : withRetry(deps.model, deps.retry));

export interface CompactionOutput {
  reason: CompactionReason;
  before: number;
  after: number;
  /** Absent when nothing was rewritten. */
  messages?: Message[];
}

export function compactorService(deps: ServiceDeps) {
  return fromPromise<CompactionOutput, ServiceInput & { reason: CompactionReason }>(async ({ input, self, signal }) => {
    await durabilityOf(self._parent)?.flush();
    const view = driverView(self);
    const before = view.brain.context.contextTokens;
    const messages = conversationOf(view.brain);
    const result = deps.compactor
      ? await deps.compactor({
          messages,
          reason: input.reason,
          tokensBefore: before,
          contextWindow: view.policy.contextWindow,
          tools: deps.tools.definitions,
          idempotencyKey: input.key,
          model: retrying(deps),
          signal,
        })
      : null;
    if (!result) return { reason: input.reason, before, after: before };
    // Same measure as every other estimate the brain reads: the request, tool definitions included.
    const after = result.tokensAfter + estimateToolTokens(deps.tools.definitions);
    return { reason: input.reason, before, after, messages: result.messages };
  });
}
