/**
 * Cancellation in the driver (seed 003): the chart's guards, actions and delay for a run
 * cancelled mid-step; a hook in flight gets its grace to return what it received (see
 * cancel-rules.ts for the operations' onCancel and the steering kept).
 */
import { assign, assigns, rule, type Args } from '../core/bind.js';
import { conversationOf } from '../core/brain-state.js';
import type { CompiledAgent } from '../core/compile.js';
import type { AgentContext } from '../core/context.js';
import { batchKey, endRun } from '../core/driver-rules.js';
import type { Effect } from '../core/effects.js';
import { DEFAULT_CANCEL_GRACE_MS } from '../operations/operation.js';
import { applyOperated } from '../operations/operation-rules.js';
import { as, type AgentEvent } from '../protocol/agent-event.js';
import { interruptedStep, runCancelHooks } from './cancel-rules.js';

/** Seed 003: operations keep what the interrupted step received, calls are answered once, the run ends Cancelled. */
export function cancelRun(agent: CompiledAgent, context: AgentContext, _event: AgentEvent): Effect[] {
  const out: Effect[] = [];
  const turn = context.brain.context.turnsTaken;
  const ctx = { sessionId: context.sessionId, scope: context.scope, turn, messages: conversationOf(context.brain) };
  const { slices, failures } = runCancelHooks(agent.plan, context.operations.slices, interruptedStep(context, agent.maxCalls), ctx);
  for (const error of failures) out.push({ emit: { type: 'operation.failed', operation: error.operation, error } });
  out.push({ assign: endRun(agent, context, { type: 'Cancelled' }, { slices }) });
  return out;
}

/**
 * Whether a call the IO started has no result yet. Its result may exist and be on its way to the
 * chart (the tool's promise resolved, the IO and the executor still handing it on): a cancel or a
 * seal then waits in `Ending` for what arrives before it ends the run.
 */
export function callsRunning(context: AgentContext): boolean {
  const started = context.startedCalls;
  if (!started || started.length === 0) return false;
  const done = new Set(context.toolJournal.map((result) => result.toolCallId));
  return started.some((id) => !done.has(id));
}

/**
 * A cancel or a seal while calls run: the end is kept for later, the IO starts no other call of
 * the batch and aborts what runs at once, reporting still the results that existed by then.
 */
export function beginEnding(agent: CompiledAgent, context: AgentContext, event: AgentEvent): Effect[] {
  const ending = event.type === 'seal' ? { type: 'seal' as const, reason: as(event, 'seal').reason } : { type: 'cancel' as const };
  return [{ assign: { ending } }, { send: { type: 'endTools', key: batchKey(context) } }, { send: { type: 'abort' } }];
}

/** The end `Ending` kept, now: a cancel as `cancelRun` does it, a seal with its reason (see `endRun`). */
export function endAsAsked(agent: CompiledAgent, context: AgentContext, event: AgentEvent): Effect[] {
  const ending = context.ending ?? { type: 'cancel' };
  if (ending.type === 'cancel') return cancelRun(agent, context, event);
  return [{ assign: endRun(agent, context, { type: 'seal', reason: ending.reason }) }];
}

/** The guards, actions and delays the chart names for cancellation. */
export const cancelImplementations = {
  delays: {
    cancelGrace: ({ context }: Args) => context.cancelGraceMs ?? DEFAULT_CANCEL_GRACE_MS,
    // A macrotask: every result whose promise had resolved when the end came has reached the chart by then.
    endingWait: 0,
  },
  guards: {
    callsRunning: ({ context }: Args) => callsRunning(context),
    noCallRunning: ({ context }: Args) => !callsRunning(context),
    hookInFlight: ({ context }: Args) => context.operations.point !== null && context.operations.waiting === null,
    cancelWaits: ({ event }: Args) => (as(event, 'cancel').graceMs ?? DEFAULT_CANCEL_GRACE_MS) > 0,
  },
  actions: {
    recordCancelGrace: assign({ cancelGraceMs: ({ event }) => as(event, 'cancel').graceMs ?? DEFAULT_CANCEL_GRACE_MS }),
    cancelRun: rule.effects(cancelRun),
    beginEnding: rule.effects(beginEnding),
    endAsAsked: rule.effects(endAsAsked),
    /** A hook that returned while the run was being cancelled: its state is kept, nothing else it asked for. */
    keepOperatedState: assigns(({ agent, context, event }) => {
      const { index, output } = as(event, 'io.operated');
      return { operations: output && 'state' in output ? applyOperated(context.operations, agent.plan, index, { state: output.state }) : context.operations };
    }),
  },
};
