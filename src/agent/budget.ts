import { z } from 'zod';
import type { Usage } from '../schemas.js';

/** Limits on one run, checked between steps; exceeding one seals the run (seed 004). */
export const BudgetSchema = z.object({
  maxTokens: z.number().int().positive().optional(),
  maxCostUsd: z.number().positive().optional(),
  maxToolCalls: z.number().int().positive().optional(),
  maxDurationMs: z.number().int().positive().optional(),
});
export type Budget = z.infer<typeof BudgetSchema>;

/** What the model's tokens cost, in US dollars per million tokens. */
export const PricesSchema = z.object({
  inputPerMillionUsd: z.number().nonnegative(),
  outputPerMillionUsd: z.number().nonnegative(),
});
export type Prices = z.infer<typeof PricesSchema>;

export function costUsd(usage: Usage, prices: Prices | undefined): number | undefined {
  if (!prices) return undefined;
  return (usage.inputTokens * prices.inputPerMillionUsd + usage.outputTokens * prices.outputPerMillionUsd) / 1_000_000;
}

export interface RunSpend {
  usage: Usage;
  toolCalls: number;
  elapsedMs: number;
}

/** The first limit the run has gone past, as the seal reason, or null. */
export function budgetExceeded(budget: Budget | undefined, prices: Prices | undefined, spend: RunSpend): string | null {
  if (!budget) return null;
  const tokens = spend.usage.inputTokens + spend.usage.outputTokens;
  if (budget.maxTokens !== undefined && tokens > budget.maxTokens) {
    return `budget: ${tokens} tokens used, limit ${budget.maxTokens}`;
  }
  const cost = costUsd(spend.usage, prices);
  if (budget.maxCostUsd !== undefined && cost !== undefined && cost > budget.maxCostUsd) {
    return `budget: $${cost.toFixed(4)} spent, limit $${budget.maxCostUsd}`;
  }
  if (budget.maxToolCalls !== undefined && spend.toolCalls > budget.maxToolCalls) {
    return `budget: ${spend.toolCalls} tool calls made, limit ${budget.maxToolCalls}`;
  }
  if (budget.maxDurationMs !== undefined && spend.elapsedMs > budget.maxDurationMs) {
    return `budget: ${spend.elapsedMs} ms elapsed, limit ${budget.maxDurationMs} ms`;
  }
  return null;
}
