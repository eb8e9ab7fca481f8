/**
 * Model fallback in the driver: the chart's guard and action for a model call that failed after
 * its model's own retries, taken by the next model of the list (see fallback.ts).
 */
import { configured, rule, type ContextHook } from '../core/bind.js';
import type { CompiledAgent } from '../core/compile.js';
import type { AgentContext } from '../core/context.js';
import { storedFits, ownModel } from '../core/driver-rules.js';
import type { Effect } from '../core/effects.js';
import { as, type AgentEvent } from '../protocol/agent-event.js';
import { activeModelProblem, fallbackAfter, startModels } from './fallback.js';

/** The next model of the list takes the same call: reported, then made the active one. */
export function fallBack(agent: CompiledAgent, context: AgentContext, event: AgentEvent): Effect[] {
  const out: Effect[] = [];
  const { error } = as(event, 'io.failed');
  const next = fallbackAfter(agent.models, context.models, error)!;
  const from = context.models!.active.name;
  out.push({ emit: { type: 'model.fallback', turn: context.brain.context.turnsTaken + 1, from, to: next.name, trigger: next.trigger, error } });
  out.push({ assign: { models: { ...context.models!, active: { index: next.index, name: next.name } } } });
  return out;
}

/** The guards and actions the chart names for model fallback. */
export const fallbackImplementations = {
  // A stored active model must be one of this agent's list.
  restore: ((agent, context) => storedFits('context.models', activeModelProblem(agent.models, context.models))) satisfies ContextHook,
  // Each run starts on the first model of a list again; an agent that books usage by model (see budget/model-pricing.ts) starts its run's books.
  runStart: ((agent, context) => (agent.models.listed || agent.pricing.book ? { models: startModels(agent.models, context.models) } : {})) satisfies ContextHook,
  guards: {
    // A speaker with a model of its own (handoffs) keeps it: no list to fall back along.
    fallsBack: configured((agent) => agent.models.listed, ({ agent, context, event }) => ownModel(agent, context) === null && fallbackAfter(agent.models, context.models, as(event, 'io.failed').error) !== null),
  },
  actions: {
    fallBack: rule.effects(fallBack),
  },
};
