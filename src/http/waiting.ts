/**
 * Whether a run's state (the agent actor's state value) waits for someone outside the run: a
 * decision on a tool call with nothing else of its batch running, or an operation that yielded.
 * Then a chat response ends; the run goes on when the next request brings what it waits for.
 */
export function waitsForSomeone(value: unknown): boolean {
  if (value === 'AwaitingOperation') return true;
  if (typeof value !== 'object' || value === null) return false;
  const state = value as Record<string, unknown>;
  if (state.Approval === 'AwaitingApproval' && state.Execution === 'Paused') return true;
  return Object.values(state).some(waitsForSomeone);
}
