/**
 * Handoffs in the driver: the chart's guards and actions for a transfer call that hands the
 * conversation to another agent of the team (refused past `maxHandoffs`), with the rule they read
 * over the compiled agent and the run's context (the team itself: handoffs.ts).
 */
import { configured, emit, rule, type ContextHook } from '../core/bind.js';
import type { CompiledAgent } from '../core/compile.js';
import type { AgentContext } from '../core/context.js';
import { endRun, storedFits } from '../core/driver-rules.js';
import { batchResults } from '../core/run-rules.js';
import type { AgentEvent } from '../protocol/agent-event.js';
import { activeAgentProblem, handoffLimitReached, refusedHandoff, settleHandoff } from './handoffs.js';

/** The handoff the finished batch asks for (its tool result names the next agent), or null. */
export const handoffOf = (agent: CompiledAgent, context: AgentContext) => agent.team && settleHandoff(agent.team, context.agent, batchResults(context, agent.maxCalls));

/** The agent the batch's transfer names speaks from the next step on. */
export function handOff(agent: CompiledAgent, context: AgentContext, _event: AgentEvent): Partial<AgentContext> {
  const { to, results } = handoffOf(agent, context)!;
  return { agent: to, toolJournal: results, handoffs: (context.handoffs ?? 0) + 1 };
}

/**
 * A transfer past `maxHandoffs`: refused (its result says so, the agent that asked keeps the
 * conversation), the batch's results applied, and the run sealed (`maxHandoffs: …`) like every
 * other per-run limit, so its conversation is kept.
 */
export function refuseHandoff(agent: CompiledAgent, context: AgentContext, _event: AgentEvent): Partial<AgentContext> {
  const { to, results: settled } = handoffOf(agent, context)!;
  const { results, reason } = refusedHandoff(agent.team!, to.name, settled);
  return endRun(agent, context, { type: 'seal', reason }, { results });
}

/** An agent with handoffs: only its batches can transfer the run. */
const inTeam = (agent: CompiledAgent) => agent.team !== null;

/** The guards and actions the chart names for handoffs. */
export const handoffImplementations = {
  // A stored speaking agent must be one of this team.
  restore: ((agent, context) => storedFits('context.agent', activeAgentProblem(agent.team, context.agent))) satisfies ContextHook,
  // maxHandoffs counts per run.
  runStart: ((agent) => (agent.team ? { handoffs: 0 } : {})) satisfies ContextHook,
  guards: {
    handsOff: configured(inTeam, ({ agent, context }) => handoffOf(agent, context) !== null),
    handoffLimitReached: configured(inTeam, ({ agent, context }) => handoffLimitReached(agent.team!, context.handoffs)),
  },
  actions: {
    handOff: rule.assign(handOff),
    refuseHandoff: rule.assign(refuseHandoff),
    emitHandoff: emit(({ context }) => ({ type: 'agent.handoff' as const, run: context.runIndex, turn: context.brain.context.turnsTaken, ...context.agent! })),
  },
};
