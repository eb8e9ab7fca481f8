/**
 * The idempotency key of one service call: stable across retries and across a restore that
 * repeats the call, unique within a session (runs are numbered, turns within a run).
 */
export const serviceKey = (
  context: { sessionId: string; runIndex: number },
  turn: number,
  what: 'model' | 'tools' | 'compaction',
): string => `${context.sessionId}:run-${context.runIndex}:turn-${turn}:${what}`;
