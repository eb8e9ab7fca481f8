/**
 * What runs cost, as the agent's config prices them. The loop reports a run's cost when the run
 * ends, and the session's with it; how a price is found is a feature's (one price list: the
 * budget's `prices`; several models, each at its own: budget/model-pricing.ts), given to the agent
 * by `compile`, so the loop names neither.
 */
import type { Usage } from '../../model.js';
import type { AgentContext } from './context.js';

/** What a finished run reports of its cost. */
export type RunCost = Pick<NonNullable<AgentContext['lastRun']>, 'costUsd' | 'usageByModel'>;

/** What one model used in a run, with its cost at that model's prices where known. */
export type ModelSpend = NonNullable<RunCost['usageByModel']>[number];

/** How an agent prices its runs and its session. */
export interface Pricing {
  /** The run's cost (absent when a price is unknown) and, for an agent that books by model, what each model used and cost. */
  run(context: AgentContext): RunCost;
  /** The session's cost so far, or undefined when a price is unknown. */
  session(context: AgentContext): number | undefined;
  /**
   * What a reply's usage adds to the run's own books, beside its totals (booked to the model that
   * made it, at its prices); absent for an agent that does not book by model.
   */
  book?(context: AgentContext, usage: Usage | undefined): Partial<AgentContext>;
  /**
   * What usage spent by another run (a child's, by model, each at its own cost) adds to the books;
   * a row whose cost is unknown is priced as the run's own reply would be. Absent with `book`.
   */
  bookSpent?(context: AgentContext, spent: readonly ModelSpend[]): Partial<AgentContext>;
  /** What the run has spent so far, by model and at each model's prices: what a parent books of its child. */
  spent(context: AgentContext): ModelSpend[];
}

/** The pricing of each agent machine, by machine (see `pricingOf`). */
const byMachine = new WeakMap<object, Pricing>();

/**
 * Records `machine`'s pricing, so a parent that runs it as a child can book what it spends at its
 * own prices (the machine is the only handle an agent tool holds of its child).
 *
 * @example
 * ```ts
 * declare const machine: object;
 * declare const pricing: Pricing;
 * registerPricing(machine, pricing);
 * ```
 */
export const registerPricing = (machine: object, pricing: Pricing): void => void byMachine.set(machine, pricing);

/**
 * The pricing of an agent machine, if it is one.
 *
 * @example
 * ```ts
 * declare const machine: object;
 * declare const context: AgentContext;
 * console.log(pricingOf(machine)?.spent(context)); // what that agent's run spent, by model
 * ```
 */
export const pricingOf = (machine: object): Pricing | undefined => byMachine.get(machine);
