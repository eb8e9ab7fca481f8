import { z } from 'zod';
import { ModelError } from '../../model.js';
import { raisedBy, type BudgetPause, NO_BUDGET_PAUSE } from './budget-pause.js';
import { InvalidConfigError } from '../../errors.js';
import { parseOptions } from '../../known-keys.js';
import { MAX_TIMER_MS } from '../../timer-bound.js';

/**
 * Pausing on a provider's usage limit (issue 26): a model call that finally fails (after its own
 * retries and any fallback) with a 429 that names when to come back waits in `BudgetPaused`
 * until then, and the same call is made again. Off by default. The time to resume is kept with
 * the pause (driver clock, epoch ms), so a run restored elsewhere waits for the same moment.
 */

/** Longest a run waits for a provider's limit unless `maxWaitMs` says otherwise (15 minutes). */
export const DEFAULT_USAGE_LIMIT_MAX_WAIT_MS = 15 * 60_000;

const UsageLimitOptionSchema = z.union([
  z.boolean(),
  z.strictObject({ maxWaitMs: z.number().int().positive().max(MAX_TIMER_MS).optional() }),
]);

/** The checked option: the longest wait that pauses, or null when off. */
export type UsageLimitRule = { readonly maxWaitMs: number } | null;

/** `pauseOnUsageLimit` checked once, when the machine is created (`InvalidConfigError` otherwise). */
export function usageLimitRule(option: unknown): UsageLimitRule {
  if (option === undefined) return null;
  // An object's keys first: a misspelt one is named with `maxWaitMs`.
  if (typeof option === 'object' && option !== null && !Array.isArray(option)) parseOptions(UsageLimitOptionSchema.options[1], option, 'pauseOnUsageLimit');
  const parsed = UsageLimitOptionSchema.safeParse(option);
  if (!parsed.success) throw new InvalidConfigError(`pauseOnUsageLimit must be true, false or { maxWaitMs?: positive integer <= ${MAX_TIMER_MS} }: ${z.prettifyError(parsed.error)}`);
  if (parsed.data === false) return null;
  return { maxWaitMs: parsed.data === true ? DEFAULT_USAGE_LIMIT_MAX_WAIT_MS : (parsed.data.maxWaitMs ?? DEFAULT_USAGE_LIMIT_MAX_WAIT_MS) };
}

/** How long to wait for a failed model call: a 429 with a retry time within the bound; null means it fails as before. */
export function usageLimitWait(rule: UsageLimitRule, error: unknown): number | null {
  if (!rule || !(error instanceof ModelError) || error.status !== 429) return null;
  const wait = error.retryAfterMs;
  return wait !== undefined && Number.isFinite(wait) && wait >= 0 && wait <= rule.maxWaitMs ? wait : null;
}

/** The pause state once a usage limit pauses the run at `now` for `waitMs`. */
export function limitedUntil(pause: BudgetPause | undefined, error: { readonly message: string }, waitMs: number, now: number): BudgetPause {
  const reason = `the provider's usage limit was reached (${error.message}); resuming in ${waitMs} ms`;
  return { ...(pause ?? NO_BUDGET_PAUSE), usageLimit: { resumeAt: now + waitMs, reason } };
}

/** The pause state once the run goes on at `now`: the paused time banked, the limit's wait gone. */
export const limitLifted = (pause: BudgetPause | undefined, now: number): BudgetPause => raisedBy(pause, {}, now);

/** Milliseconds from `now` until the run resumes (0 when the time is past), within a timer's bound. */
export const resumeDelay = (pause: BudgetPause | undefined, now: number): number =>
  pause?.usageLimit ? Math.min(MAX_TIMER_MS, Math.max(0, pause.usageLimit.resumeAt - now)) : 0;
