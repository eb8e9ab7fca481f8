import { matchesState, type StateValue } from 'xstate';
import type { AgentContext } from '../agent/core/context.js';
import { waitsForSomeone } from '../agent/hosts/waiting.js';

/**
 * What a tick's run stands still for once it waits for someone outside it (`waitsForSomeone`): a
 * scheduler speaks for no one, so the tick ends there (`Waiting`) instead of holding its lease
 * and a run slot until `runTimeoutMs` cancels the run and its question with it.
 */

/** One line saying what the run waits for, or null when it does not wait for anyone. */
export function runWaitsFor(snapshot: { value: unknown; context: AgentContext }): string | null {
  if (!waitsForSomeone(snapshot)) return null;
  const { context } = snapshot;
  if (context.operations.waiting) return `the run waits for operation '${context.operations.waiting.operation}' to be resumed (${context.operations.waiting.reason})`;
  if (matchesState({ Running: 'BudgetPaused' }, snapshot.value as StateValue)) return 'the run is paused by its budget: send budget.raise or seal to its session';
  const doubt = context.doubt?.waiting ?? [];
  if (doubt.length > 0) return `the run waits for a decision on call(s) in doubt ${doubt.join(', ')}`;
  const calls = context.approvals.waiting.filter((id) => !Object.hasOwn(context.approvals.decisions, id));
  return `the run waits for an approval of call(s) ${calls.join(', ')}`;
}
