import type { Message } from '../schemas.js';

/** The log as last written: the brain's two arrays, kept by reference. */
export interface WrittenLog {
  history: readonly Message[];
  pending: readonly Message[];
}

export type LogEffect = { truncateTo?: number; append?: Message[] } | { replaceLog: Message[] };

/**
 * What a step must write so the stored log (history then pending) matches the brain's again.
 * Messages are immutable and the brain only ever appends, slices or concatenates, so unchanged
 * messages keep their identity: the common prefix is found by reference. While a run goes,
 * history is the same array and only pending is compared, so a step costs the same however
 * long the conversation is.
 */
export function logEffect(before: WrittenLog, after: WrittenLog): LogEffect {
  const oldLength = before.history.length + before.pending.length;
  const common =
    after.history === before.history
      ? before.history.length + sharedPrefix(before.pending, after.pending)
      : sharedPrefixOfLogs(before, after);
  const append = tail(after, common);
  if (common === 0 && oldLength > 0) return { replaceLog: append };
  return {
    ...(common < oldLength && { truncateTo: common }),
    ...(append.length > 0 && { append }),
  };
}

/** The log from position `from` on, without copying the part before it. */
function tail(log: WrittenLog, from: number): Message[] {
  const { history, pending } = log;
  return from >= history.length ? pending.slice(from - history.length) : history.slice(from).concat(pending);
}

function sharedPrefix(a: readonly Message[], b: readonly Message[]): number {
  const end = Math.min(a.length, b.length);
  let i = 0;
  while (i < end && a[i] === b[i]) i++;
  return i;
}

function sharedPrefixOfLogs(before: WrittenLog, after: WrittenLog): number {
  const at = (log: WrittenLog, i: number) => (i < log.history.length ? log.history[i] : log.pending[i - log.history.length]);
  const end = Math.min(before.history.length + before.pending.length, after.history.length + after.pending.length);
  let i = 0;
  while (i < end && at(before, i) === at(after, i)) i++;
  return i;
}
