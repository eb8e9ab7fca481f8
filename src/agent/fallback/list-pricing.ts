/**
 * A model list's pricing: each model's usage at its own prices (else the agent's), per run and
 * per session, from the usage the run books by model (see `bookUsage`).
 */
import type { Pricing } from '../core/pricing.js';
import { bookUsage, totalCost, usageCosts, type ModelList } from './fallback.js';

/**
 * The pricing of an agent with a model list.
 *
 * @example
 * ```ts
 * declare const list: Parameters<typeof listPricing>[0];
 * declare const context: Parameters<ReturnType<typeof listPricing>['run']>[0];
 * const { costUsd, usageByModel } = listPricing(list).run(context); // each model at its own prices
 * ```
 */
export const listPricing = (list: ModelList): Pricing => ({
  run: (context) => {
    const rows = context.models?.run ?? [];
    const cost = totalCost(list, rows);
    return { ...(cost !== undefined && { costUsd: cost }), usageByModel: usageCosts(list, rows) };
  },
  session: (context) => totalCost(list, context.models?.session ?? []),
  book: (context, usage) => (context.models ? { models: bookUsage(context.models, usage) } : {}),
});
