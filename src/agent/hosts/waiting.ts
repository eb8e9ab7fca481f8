import { matchesState, type StateValue } from 'xstate';

/** What `waitsForSomeone` reads of an agent actor's snapshot. */
export interface RunSnapshot {
  value: unknown;
  context: { budgetPause?: { usageLimit?: unknown } | undefined };
}

/** The states where a run waits for someone outside it, as state values of the agent chart. */
const WAITS: readonly StateValue[] = [
  // An operation yielded: its resume comes from outside.
  { Running: 'AwaitingOperation' },
  // A call waits for a decision and nothing else of its batch can run meanwhile.
  { Running: { AwaitingTools: { Working: { Approval: 'AwaitingApproval', Execution: 'Paused' } } } },
  // A call in doubt after a restart waits for a person's decision, and nothing else of its batch runs.
  { Running: { AwaitingTools: { Working: { Doubt: 'AwaitingDecision', Execution: 'Paused' } } } },
];

/**
 * Whether a run waits for someone outside it: an operation that yielded, a decision on a tool
 * call (to approve it, or on a call in doubt) with nothing else of its batch running, or a budget that paused it (a `budget.raise`
 * comes from outside). A pause on a provider's usage limit is no such wait: it resumes by itself
 * at its stored time. One rule for every host that must stop waiting on the run: the stepper
 * yields, a chat response ends.
 *
 * @example
 * ```ts
 * waitsForSomeone({ value: { Running: 'AwaitingOperation' }, context: {} }); // true
 * ```
 */
export function waitsForSomeone(snapshot: RunSnapshot): boolean {
  const value = snapshot.value as StateValue;
  if (typeof value !== 'object' || value === null) return false;
  if (WAITS.some((waiting) => matchesState(waiting, value))) return true;
  return matchesState({ Running: 'BudgetPaused' }, value) && !snapshot.context.budgetPause?.usageLimit;
}
