/**
 * Cancellation in the driver (seed 003): the chart's guards, actions and delay for a run
 * cancelled mid-step; a hook in flight gets its grace to return what it received (see
 * cancel-rules.ts for the operations' onCancel and the steering kept).
 */
import { assign, assigns, rule, type Args } from '../core/bind.js';
import { conversationOf } from '../core/brain-state.js';
import type { CompiledAgent } from '../core/compile.js';
import type { AgentContext } from '../core/context.js';
import { endRun } from '../core/driver-rules.js';
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

/** The guards, actions and delay the chart names for cancellation. */
export const cancelImplementations = {
  delays: {
    cancelGrace: ({ context }: Args) => context.cancelGraceMs ?? DEFAULT_CANCEL_GRACE_MS,
  },
  guards: {
    hookInFlight: ({ context }: Args) => context.operations.point !== null && context.operations.waiting === null,
    cancelWaits: ({ event }: Args) => (as(event, 'cancel').graceMs ?? DEFAULT_CANCEL_GRACE_MS) > 0,
  },
  actions: {
    recordCancelGrace: assign({ cancelGraceMs: ({ event }) => as(event, 'cancel').graceMs ?? DEFAULT_CANCEL_GRACE_MS }),
    cancelRun: rule.effects(cancelRun),
    /** A hook that returned while the run was being cancelled: its state is kept, nothing else it asked for. */
    keepOperatedState: assigns(({ agent, context, event }) => {
      const { index, output } = as(event, 'io.operated');
      return { operations: output && 'state' in output ? applyOperated(context.operations, agent.plan, index, { state: output.state }) : context.operations };
    }),
  },
};
