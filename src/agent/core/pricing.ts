/**
 * What runs cost, as the agent's config prices them. The loop reports a run's cost when the run
 * ends, and the session's with it; how a price is found is a feature's (one price list: the
 * budget's `prices`; a model list: each model at its own, see fallback), given to the agent by
 * `compile`, so the loop names neither.
 */
import type { Usage } from '../../model.js';
import type { AgentContext } from './context.js';

/** What a finished run reports of its cost. */
export type RunCost = Pick<NonNullable<AgentContext['lastRun']>, 'costUsd' | 'usageByModel'>;

/** How an agent prices its runs and its session. */
export interface Pricing {
  /** The run's cost (absent when a price is unknown) and, with a model list, what each model used and cost. */
  run(context: AgentContext): RunCost;
  /** The session's cost so far, or undefined when a price is unknown. */
  session(context: AgentContext): number | undefined;
  /** What a reply's usage adds to the run's own books, beside its totals (with a model list: booked to the model that made it); none when absent. */
  book?(context: AgentContext, usage: Usage | undefined): Partial<AgentContext>;
}
