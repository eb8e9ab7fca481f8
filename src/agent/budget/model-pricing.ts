/**
 * Pricing by model, for an agent whose runs use more than one model: a fallback list, handoff
 * agents with models of their own, child agents (agent tools) with theirs. Each model call's usage
 * is booked under the model that made it, at that model's prices, and a child run's under its
 * models at the child's own prices (it reports what it spent, priced: see `Pricing.spent`). A row
 * carries its cost, so two models of one name priced differently (the parent's and a child's) add
 * up right; a row stored before rows carried their cost is priced by its model's name.
 */
import type { Usage } from '../../schemas.js';
import type { AgentContext } from '../core/context.js';
import type { ModelSpend, Pricing } from '../core/pricing.js';
import { addUsage, NO_USAGE } from '../core/run-rules.js';
import type { BookedRow, ModelsState } from '../fallback/fallback.js';
import { costUsd, type Prices } from './budget.js';

/** A model the agent calls itself, with its prices (none: its cost unknown). */
export interface PricedModel {
  readonly name: string;
  readonly prices: Prices | undefined;
}

/** A row's cost: its own (null: unknown), or, stored without one by an older build, its usage at the prices of the agent's first model of that name. */
export function rowCost(models: readonly PricedModel[], row: BookedRow): number | undefined {
  if (row.costUsd !== undefined) return row.costUsd ?? undefined;
  return costUsd(row.usage, models.find((model) => model.name === row.model)?.prices);
}

/** `rows` with `spent` added under its model: the usage added, the cost too (unknown once a part of it is). */
export function addSpend(models: readonly PricedModel[], rows: readonly BookedRow[], spent: ModelSpend): BookedRow[] {
  const cost = spent.costUsd ?? null;
  if (!rows.some((row) => row.model === spent.model)) return [...rows, { model: spent.model, usage: spent.usage, costUsd: cost }];
  return rows.map((row) => {
    if (row.model !== spent.model) return row;
    const before = rowCost(models, row);
    return { model: row.model, usage: addUsage(row.usage, spent.usage), costUsd: before === undefined || cost === null ? null : before + cost };
  });
}

/** The books with `spent` added, for the run and the session. */
export const booked = (models: readonly PricedModel[], state: ModelsState, spent: ModelSpend): ModelsState => ({
  ...state,
  run: addSpend(models, state.run, spent),
  session: addSpend(models, state.session, spent),
});

const minus = (a: Usage, b: Usage): Usage => ({ inputTokens: Math.max(0, a.inputTokens - b.inputTokens), outputTokens: Math.max(0, a.outputTokens - b.outputTokens) });

/**
 * The books as a report reads them: each row with its cost where known, and what `usage` holds
 * that no row does (a run begun before this agent kept books: a stored session of an older build)
 * as the first model's, at its prices.
 */
export function spendOf(models: readonly PricedModel[], rows: readonly BookedRow[], usage: Usage): ModelSpend[] {
  const out: ModelSpend[] = rows.map((row) => {
    const cost = rowCost(models, row);
    return cost === undefined ? { model: row.model, usage: row.usage } : { model: row.model, usage: row.usage, costUsd: cost };
  });
  const rest = minus(usage, rows.reduce((sum, row) => addUsage(sum, row.usage), NO_USAGE));
  if (rest.inputTokens + rest.outputTokens === 0) return out;
  const [first] = models;
  const cost = costUsd(rest, first!.prices);
  return [...out, { model: first!.name, usage: rest, ...(cost !== undefined && { costUsd: cost }) }];
}

/** The sum of the rows' costs, or undefined when one is unknown (or, with nothing spent, when no model has prices). */
export function totalOf(models: readonly PricedModel[], spent: readonly ModelSpend[]): number | undefined {
  if (spent.length === 0) return models.some((model) => model.prices) ? 0 : undefined;
  let total = 0;
  for (const row of spent) {
    if (row.costUsd === undefined) return undefined;
    total += row.costUsd;
  }
  return total;
}

/**
 * The pricing of an agent that books usage by model: `models` are the models it calls itself (by
 * their index in the IO's list: its own, then its handoff agents'), `speaking` the index of the
 * one that makes the run's next call. A child's row whose cost is unknown (a child without prices)
 * is priced as the speaking model's own tokens.
 *
 * @example
 * ```ts
 * declare const context: AgentContext;
 * const pricing = modelPricing([{ name: 'gpt-4.1', prices: { inputPerMillionUsd: 2, outputPerMillionUsd: 8 } }], () => 0);
 * const { costUsd, usageByModel } = pricing.run(context); // each model at its own prices
 * ```
 */
export function modelPricing(models: readonly PricedModel[], speaking: (context: AgentContext) => number): Pricing {
  const speaker = (context: AgentContext) => models[speaking(context)] ?? models[0]!;
  const runSpend = (context: AgentContext) => spendOf(models, context.models?.run ?? [], context.runUsage);
  return {
    run: (context) => {
      const usageByModel = runSpend(context);
      const cost = totalOf(models, usageByModel);
      return { ...(cost !== undefined && { costUsd: cost }), usageByModel };
    },
    session: (context) => totalOf(models, spendOf(models, context.models?.session ?? [], context.sessionUsage)),
    book: (context, usage) => {
      if (!context.models || !usage) return {};
      const { name, prices } = speaker(context);
      const cost = costUsd(usage, prices);
      return { models: booked(models, context.models, { model: name, usage, ...(cost !== undefined && { costUsd: cost }) }) };
    },
    bookSpent: (context, spent) => {
      if (!context.models) return {};
      const { prices } = speaker(context);
      let state = context.models;
      for (const row of spent) {
        const cost = row.costUsd ?? costUsd(row.usage, prices);
        state = booked(models, state, { model: row.model, usage: row.usage, ...(cost !== undefined && { costUsd: cost }) });
      }
      return { models: state };
    },
    spent: runSpend,
  };
}
