import type { Budget, BudgetOverrun } from './budget.js';
import { activeMs, limitsOf, pausesOn, type BudgetPause } from './budget-pause.js';
import { MAX_TIMER_MS } from '../../timer-bound.js';

/**
 * The time budget as a deadline on the side effect in flight. The other limits are checked
 * between steps (a model call cannot spend tokens it has not been billed for), but a model call
 * or a tool that honours its signal and never answers would keep a run past `maxDurationMs` for
 * ever. So while a side effect runs, the driver holds a timer for the time the run has left;
 * when it fires, the effect is aborted and the run ends by the budget: sealed with the same reason
 * a step boundary gives, or, when the duration kind pauses, paused (a model call is made again
 * after the raise; a tool batch is let finish, since a tool's side effect cannot be taken back).
 */

/**
 * The states of the chart's `Running` whose side effect in flight is held to the deadline: each
 * waits with an `after: { budgetDeadline }` (a test holds the chart to this list). A raise while
 * one of them waits arms its timer again for the new limit (see `rearmDeadline`).
 */
export const DEADLINE_STATES = ['ListingTools', 'AwaitingModel', 'AwaitingTools', 'AwaitingCompaction'] as const;

/** The event XState raises when the deadline of `state` (one of `DEADLINE_STATES`) passes: `xstate.after.<delay>.<state id>`, its timer's id too. */
export const deadlineEventOf = (state: (typeof DEADLINE_STATES)[number]) => `xstate.after.budgetDeadline.agent.Running.${state}` as const;

/** What the deadline reads of a run: its start, its pause state, and whether it is past budgets already. */
export interface DeadlineRun {
  runStartedAt: number;
  budgetPause?: BudgetPause | undefined;
  /** The run's final call (an output schema's last answer) is made past a budget on purpose: no deadline. */
  finalCall: boolean;
  cancelled: boolean;
}

/** The limit in force (raises included), or undefined when the run has no time budget to hold. */
function limitOf(budget: Budget | undefined, run: DeadlineRun): number | undefined {
  if (!budget || run.finalCall || run.cancelled) return undefined;
  return limitsOf(budget, run.budgetPause).maxDurationMs;
}


/**
 * How long from `now` the side effect just started may run before the budget ends it, in ms;
 * undefined without a time budget (XState then arms no timer). One ms past the limit, since the
 * limit is "more than maxDurationMs elapsed". At most a timer's bound: a deadline further away
 * (a budget of weeks, or a run's clock stepped back that far) is looked at again then, and the
 * timer armed again for the time left (see `deadlineAhead`).
 */
export function deadlineDelay(budget: Budget | undefined, run: DeadlineRun, now: number): number | undefined {
  const limit = limitOf(budget, run);
  if (limit === undefined) return undefined;
  // At most the timer's bound: past it Node fires at once, the deadline finds time left and arms
  // the same delay again, every ms for as long as the call runs. At the bound it is looked at again.
  return Math.min(MAX_TIMER_MS, Math.max(0, limit - activeMs(run.runStartedAt, now, run.budgetPause)) + 1);
}

/** The time budget passed while a side effect ran, with whether its kind pauses, or null (raised meanwhile, no budget). */
export function deadlineOverrun(budget: Budget | undefined, run: DeadlineRun, now: number): (BudgetOverrun & { pauses: boolean }) | null {
  const limit = limitOf(budget, run);
  if (limit === undefined) return null;
  const used = activeMs(run.runStartedAt, now, run.budgetPause);
  if (used < limit) return null;
  return { kind: 'duration', used, limit, reason: `budget: ${used} ms elapsed, limit ${limit} ms`, pauses: pausesOn(budget!, 'duration') };
}
