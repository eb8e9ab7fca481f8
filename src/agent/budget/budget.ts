import { z } from 'zod';
import type { Usage } from '../../schemas.js';

/** The kinds of limit a budget sets, as a pause or a refusal names them. */
export const BUDGET_KINDS = ['tokens', 'cost', 'toolCalls', 'duration'] as const;
export type BudgetKind = (typeof BUDGET_KINDS)[number];

/** The limits alone: what a raise may change. */
export const BudgetLimitsSchema = z.object({
  maxTokens: z.number().int().positive().optional(),
  maxCostUsd: z.number().positive().optional(),
  maxToolCalls: z.number().int().positive().optional(),
  maxDurationMs: z.number().int().positive().optional(),
});
export type BudgetLimits = z.infer<typeof BudgetLimitsSchema>;

/**
 * Limits on one run, checked between steps; exceeding one seals the run (seed 004), or with
 * `pause` (true: every kind; a list: those kinds) pauses it until a raise or a seal.
 */
export const BudgetSchema = BudgetLimitsSchema.extend({
  pause: z.union([z.literal(true), z.array(z.enum(BUDGET_KINDS))]).optional(),
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
  /** The run's cost when it is not the usage at `prices` (models with prices of their own). */
  costUsd?: number | undefined;
}

/** A limit the run has gone past: which, what was used, the limit, and the seal or pause reason. */
export interface BudgetOverrun {
  kind: BudgetKind;
  used: number;
  limit: number;
  reason: string;
}

/** The first limit the run has gone past, or null. */
export function budgetOverrun(budget: BudgetLimits | undefined, prices: Prices | undefined, spend: RunSpend): BudgetOverrun | null {
  if (!budget) return null;
  const tokens = spend.usage.inputTokens + spend.usage.outputTokens;
  if (budget.maxTokens !== undefined && tokens > budget.maxTokens) {
    return { kind: 'tokens', used: tokens, limit: budget.maxTokens, reason: `budget: ${tokens} tokens used, limit ${budget.maxTokens}` };
  }
  const cost = spend.costUsd ?? costUsd(spend.usage, prices);
  if (budget.maxCostUsd !== undefined && cost !== undefined && cost > budget.maxCostUsd) {
    return { kind: 'cost', used: cost, limit: budget.maxCostUsd, reason: `budget: $${cost.toFixed(4)} spent, limit $${budget.maxCostUsd}` };
  }
  if (budget.maxToolCalls !== undefined && spend.toolCalls > budget.maxToolCalls) {
    return { kind: 'toolCalls', used: spend.toolCalls, limit: budget.maxToolCalls, reason: `budget: ${spend.toolCalls} tool calls made, limit ${budget.maxToolCalls}` };
  }
  if (budget.maxDurationMs !== undefined && spend.elapsedMs > budget.maxDurationMs) {
    return { kind: 'duration', used: spend.elapsedMs, limit: budget.maxDurationMs, reason: `budget: ${spend.elapsedMs} ms elapsed, limit ${budget.maxDurationMs} ms` };
  }
  return null;
}

/** The first limit the run has gone past, as the seal reason, or null. */
export function budgetExceeded(budget: BudgetLimits | undefined, prices: Prices | undefined, spend: RunSpend): string | null {
  return budgetOverrun(budget, prices, spend)?.reason ?? null;
}
