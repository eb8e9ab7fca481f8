/** What `waitsForSomeone` reads of an agent actor's snapshot. */
export interface RunSnapshot {
  value: unknown;
  context: { budgetPause?: { usageLimit?: unknown } | undefined };
}

/**
 * Whether a run waits for someone outside it: a decision on a tool call with nothing else of its
 * batch running, an operation that yielded, or a budget that paused it (a raise, `budget.raise`,
 * sent by the product: the chat protocol carries none). Then a chat response ends; the run goes
 * on when what it waits for arrives. A pause on a provider's usage limit is no such wait: it
 * resumes by itself at its stored time, so the response stays open.
 */
export function waitsForSomeone(snapshot: RunSnapshot): boolean {
  return waitsIn(snapshot.value, !snapshot.context.budgetPause?.usageLimit);
}

function waitsIn(value: unknown, pauseWaits: boolean): boolean {
  if (value === 'AwaitingOperation') return true;
  if (value === 'BudgetPaused') return pauseWaits;
  if (typeof value !== 'object' || value === null) return false;
  const state = value as Record<string, unknown>;
  if (state.Approval === 'AwaitingApproval' && state.Execution === 'Paused') return true;
  return Object.values(state).some((inner) => waitsIn(inner, pauseWaits));
}
