/**
 * One price list for every model of the agent (`prices`): the cost of a run and of a session.
 */
import type { Pricing } from '../core/pricing.js';
import { costUsd, type Prices } from './budget.js';

/**
 * The pricing of an agent with one model and one price list (none: costs unknown); `model`, the
 * model's name, is what a parent that runs it as a child books its usage under.
 *
 * @example
 * ```ts
 * declare const context: Parameters<ReturnType<typeof flatPricing>['session']>[0];
 * const pricing = flatPricing({ inputPerMillionUsd: 3, outputPerMillionUsd: 15 }, 'gpt-4.1');
 * console.log(pricing.session(context)); // the session's tokens at $3 and $15 per million
 * ```
 */
export const flatPricing = (prices: Prices | undefined, model: string): Pricing => ({
  run: (context) => {
    const cost = costUsd(context.runUsage, prices);
    return cost === undefined ? {} : { costUsd: cost };
  },
  session: (context) => costUsd(context.sessionUsage, prices),
  spent: (context) => {
    const cost = costUsd(context.runUsage, prices);
    return [{ model, usage: context.runUsage, ...(cost !== undefined && { costUsd: cost }) }];
  },
});
