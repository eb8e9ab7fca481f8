import { z } from 'zod';
import { BudgetLimitsSchema, type Budget, type BudgetKind, type BudgetLimits, type BudgetOverrun } from './budget.js';

/**
 * Budgets that pause (issue 26): a run past a limit whose kind pauses waits in `BudgetPaused`
 * until a raise lifts that limit (the same run continues) or a seal ends it. Nothing here is a
 * flag of its own: the run is paused exactly when it is past a pausing limit, so a stored run
 * reopened anywhere pauses again by the same rule. What the run keeps is its raised limits and
 * the time it spent paused, which does not count as its wall time.
 */

const count = z.number().int().nonnegative();

/** A run's raised limits and its paused time, stored with its session. */
export const BudgetPauseSchema = z.object({
  /** Limits raised during this run (they replace the configured ones until the run ends). */
  raised: BudgetLimitsSchema,
  /** When the pause in progress began (driver clock), or null. */
  pausedAt: count.nullable(),
  /** Time spent paused earlier in this run (ms). */
  pausedMs: count,
  /** Waiting for a provider's usage limit (see usage-limit.ts): when the run goes on by itself, and why it waits. */
  usageLimit: z.object({ resumeAt: count, reason: z.string() }).optional(),
  /**
   * The time limit passed mid-batch (a pausing budget): the calls started by then, which may
   * finish; no other call of the batch (waiting for a person's decision, in doubt, or queued
   * behind `toolConcurrency`) starts until a raise lifts the limit (see `heldAt`, `heldWithout`).
   * Absent: the batch is not held.
   */
  held: z.array(z.string()).optional(),
});
export type BudgetPause = z.infer<typeof BudgetPauseSchema>;

export const NO_BUDGET_PAUSE: BudgetPause = { raised: {}, pausedAt: null, pausedMs: 0 };

/**
 * The name a budget pause yields under (`operation.yielded`) and is resumed by:
 * `{ type: 'operation.resume', operation: 'budget', payload: { budget: { maxTokens: 5000 } } }`,
 * the same as `{ type: 'budget.raise', budget: { maxTokens: 5000 } }`.
 *
 * @example
 * ```ts
 * import { BUDGET_OPERATION } from 'loopchart/schemas';
 *
 * actor.on('operation.yielded', ({ operation }) => {
 *   if (operation === BUDGET_OPERATION) actor.send({ type: 'budget.raise', budget: { maxTokens: 50_000 } });
 * });
 * ```
 */
export const BUDGET_OPERATION = 'budget';

/**
 * What a raise carries: new limits (only those it names change).
 *
 * @example
 * ```ts
 * import { BudgetRaiseSchema } from 'loopchart/schemas';
 *
 * const raise = BudgetRaiseSchema.parse({ budget: { maxCostUsd: 2 } });
 * ```
 */
export const BudgetRaiseSchema = z.strictObject({ budget: BudgetLimitsSchema.strict() });

const LIMIT_FIELD: Record<BudgetKind, keyof BudgetLimits> = {
  tokens: 'maxTokens',
  cost: 'maxCostUsd',
  toolCalls: 'maxToolCalls',
  duration: 'maxDurationMs',
};

/** The limits in force: the configured ones, with this run's raises over them. */
export const limitsOf = (budget: Budget, pause: BudgetPause | undefined): BudgetLimits => ({ ...budget, ...pause?.raised });

/** Whether going past a limit of this kind pauses the run (else it seals). */
export const pausesOn = (budget: Budget, kind: BudgetKind): boolean =>
  budget.pause === true || (Array.isArray(budget.pause) && budget.pause.includes(kind));

/** The run's wall time on the driver clock, its paused time left out (also a pause in progress). */
export function activeMs(runStartedAt: number, now: number, pause: BudgetPause | undefined): number {
  if (!pause) return now - runStartedAt;
  const current = pause.pausedAt === null ? 0 : Math.max(0, now - pause.pausedAt);
  return Math.max(0, now - runStartedAt - pause.pausedMs - current);
}

/** The pause state once the run pauses at `now` (a pause in progress keeps its start). */
export const pausedAt = (pause: BudgetPause | undefined, now: number): BudgetPause => {
  const state = pause ?? NO_BUDGET_PAUSE;
  return state.pausedAt === null ? { ...state, pausedAt: now } : state;
};

/**
 * The pause state once a pausing time limit passes mid-batch at the calls `running`: those may
 * finish (a tool's side effect cannot be taken back), no other call of the batch starts. A hold
 * in progress is kept (the deadline fires again when a restored run re-arms it).
 */
export const heldAt = (pause: BudgetPause | undefined, running: readonly string[]): BudgetPause =>
  pause?.held ? pause : { ...(pause ?? NO_BUDGET_PAUSE), held: [...running] };

/**
 * A held batch less the calls the IO reports it had not started (queued behind
 * `toolConcurrency` when the hold came): like a call waiting for a decision, they start after
 * the raise. A pause state without a hold is left as it is.
 */
export const heldWithout = (pause: BudgetPause, queued: readonly string[]): BudgetPause =>
  pause.held ? { ...pause, held: pause.held.filter((id) => !queued.includes(id)) } : pause;

/** The pause state after a raise at `now`: the limits raised, the paused time banked (a hold and a usage limit's wait end with it). */
export function raisedBy(pause: BudgetPause | undefined, change: BudgetLimits, now: number): BudgetPause {
  const state = pause ?? NO_BUDGET_PAUSE;
  const paused = state.pausedAt === null ? 0 : Math.max(0, now - state.pausedAt);
  return { raised: { ...state.raised, ...change }, pausedAt: null, pausedMs: state.pausedMs + paused };
}

/** Why a raise does not continue the paused run (it must lift the limit the run paused on), or null. */
export function raiseProblem(overrun: BudgetOverrun, change: BudgetLimits): string | null {
  const field = LIMIT_FIELD[overrun.kind];
  const next = change[field];
  if (next === undefined) return `the run is paused on its ${overrun.kind} limit (${overrun.reason}): a raise must set ${field}`;
  if (overrun.used > next) return `${field} ${next} does not lift the limit: ${overrun.used} already used`;
  return null;
}

/** The change a budget event carries: a `budget.raise`, or the budget operation's resume payload; null otherwise. */
export function raiseOf(event: { type: string; budget?: unknown; operation?: unknown; payload?: unknown }): BudgetLimits | null {
  const source = event.type === 'budget.raise' ? { budget: event.budget } : event.type === 'operation.resume' && event.operation === BUDGET_OPERATION ? event.payload : undefined;
  if (source === undefined) return null;
  const parsed = BudgetRaiseSchema.safeParse(source);
  return parsed.success ? parsed.data.budget : null;
}
