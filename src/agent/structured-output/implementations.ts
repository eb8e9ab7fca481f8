/**
 * Structured output in the driver: the chart's guards and actions for the run's final call (an
 * output schema or `finalOutputCall`, asked before a limit ends the run) and the answers it
 * rejects, with the rule they read over the compiled agent and the run's context (the answer's
 * checks themselves: structured-output.ts).
 */
import { assigns, configured, configuredAction, rule, type ContextHook } from '../core/bind.js';
import type { CompiledAgent } from '../core/compile.js';
import type { AgentContext } from '../core/context.js';
import { answerOf, decisionPolicy, resetBatch } from '../core/driver-rules.js';
import { interruptBatch } from '../core/run-rules.js';
import type { Effect } from '../core/effects.js';
import { deadlinePassed, overBudget } from '../budget/implementations.js';
import type { AgentEvent } from '../protocol/agent-event.js';
import { beginFinalCall, finalCallReason, FRESH_OUTPUT_STATE } from './structured-output.js';

/** Why the run must ask for its answer now (an output schema, a limit about to end it), or null. */
export const finalCallDue = (agent: CompiledAgent, context: AgentContext) =>
  // Without an output schema there is no final call: nothing of the budgets is read.
  agent.structured ? finalCallReason(agent.structured, context.outputState, context.brain, decisionPolicy(agent, context), overBudget(agent, context)) : null;

/** A reply whose answer the output schema refused: reported, with whether it was the last try. */
export function emitOutputRejected(agent: CompiledAgent, context: AgentContext, event: AgentEvent): Effect[] {
  const out: Effect[] = [];
  const { rejected, overrule } = answerOf(agent, context, event);
  if (rejected) out.push({ emit: { type: 'output.rejected', turn: context.brain.context.turnsTaken, error: rejected, final: overrule !== undefined } });
  return out;
}

/** Whether the agent has an output schema (or asks a final call): the only agents whose answers are judged. */
const structuredOutput = (agent: CompiledAgent) => agent.structured !== undefined;

/** An agent whose time budget may pass while a call is in flight and that asks for its answer before a budget ends the run. */
const answersAtDeadline = (agent: CompiledAgent) => agent.budget !== undefined && agent.structured?.finalCall === true;

/**
 * The time budget passed, in a kind that seals, while a tool batch was in flight, and the run has
 * not asked for its answer yet: the batch is cut (aborted beside this, its calls answered as far
 * as they got, the rest interrupted) and the run asks for its answer, as when the budget passes
 * between two steps (see `finalCallReason`), instead of being sealed with the work of its turns
 * lost. A model call cut by the deadline is not made again as the final call: that model did not
 * answer within the budget, and a final call has no deadline (a run over a model server that never
 * answers still ends at its time budget).
 */
export const answerAtDeadline = (agent: CompiledAgent, context: AgentContext): boolean =>
  deadlinePassed(agent, context)?.pauses === false && !context.outputState?.finalCall && !context.brain.context.cancelled && context.brain.value === 'AwaitingTools';

/** The batch cut by the deadline before the final call: its calls answered as far as they got, the rest interrupted. */
export const cutForAnswer = (agent: CompiledAgent, context: AgentContext): Partial<AgentContext> => ({
  brain: interruptBatch(context, agent.maxCalls, { type: 'timeUp', reason: deadlinePassed(agent, context)?.reason ?? 'the time budget' }),
  ...resetBatch(agent, context),
});

/** The guards and actions the chart names for structured output. */
export const structuredOutputImplementations = {
  runStart: ((agent) => (agent.structured ? { outputState: FRESH_OUTPUT_STATE } : {})) satisfies ContextHook,
  guards: {
    finalCallDue: configured(structuredOutput, ({ agent, context }) => finalCallDue(agent, context) !== null),
    answerAtDeadline: configured(answersAtDeadline, ({ agent, context }) => answerAtDeadline(agent, context)),
  },
  actions: {
    beginFinalCall: assigns(({ agent, context }) => beginFinalCall(agent.structured!, context.brain, context.outputState, finalCallDue(agent, context)!)),
    emitOutputRejected: configuredAction(structuredOutput, rule.effects(emitOutputRejected)),
    cutForAnswer: assigns(({ agent, context }) => cutForAnswer(agent, context)),
  },
};
