import { z } from 'zod';
import { pruneToolResults, type PruneOptions, type PruneResult } from '../../compaction/prune.js';
import { objectSlot } from '../../object-slot.js';
import type { Message, Policy } from '../../schemas.js';
import { conversationOf, type BrainState } from './brain-state.js';

export const PruningSchema = z.object({
  /** Percent of the window above which old tool results are pruned; strictly below compactThreshold. */
  threshold: z.number().min(0).max(100),
  /** Recent tokens whose tool results are never pruned. */
  protectTokens: z.number().int().nonnegative().default(4_000),
});
export type Pruning = z.output<typeof PruningSchema>;
export type PruningInput = z.input<typeof PruningSchema>;

/** Pruning must come before summarizing, so its line sits strictly below the compaction threshold. */
export function pruneLineProblem(pruning: Pruning | undefined, policy: Policy): string | null {
  if (!pruning || pruning.threshold < policy.compactThreshold) return null;
  return `the prune line (${pruning.threshold}%) must be strictly below compactThreshold (${policy.compactThreshold}%)`;
}

// Guard and action look at the same brain; computing the prune once per brain keeps it O(n) per step.
const cache = objectSlot<object, PruneResult | null>();

/** The prune the driver would apply now, or null when the estimate is under the line or nothing is prunable. */
export function pendingPrune(
  brain: BrainState,
  policy: Policy,
  pruning: Pruning | undefined,
  pruner: (messages: readonly Message[], options: PruneOptions) => PruneResult = pruneToolResults,
): PruneResult | null {
  if (!pruning || policy.contextWindow === 0) return null;
  if (brain.value !== 'Start' && brain.value !== 'AwaitingModel') return null;
  if (brain.context.contextTokens * 100 <= policy.contextWindow * pruning.threshold) return null;
  if (cache.has(brain.context)) return cache.get(brain.context)!;
  const result = pruner(conversationOf(brain), { protectTokens: pruning.protectTokens });
  const useful = result.pruned > 0 ? result : null;
  cache.set(brain.context, useful);
  return useful;
}
