import type { Message } from '../schemas.js';

/**
 * The log as last written: the brain's two arrays, kept by reference, with pending's length
 * then (the driver grows pending in place, so the array alone does not say what was written).
 */
export interface WrittenLog {
  history: readonly Message[];
  pending: readonly Message[];
  pendingLength: number;
}

/** The log as the brain holds it now. */
export const logNow = (history: readonly Message[], pending: readonly Message[]): WrittenLog => ({
  history,
  pending,
  pendingLength: pending.length,
});

export type LogEffect = { truncateTo?: number; append?: Message[] } | { replaceLog: Message[] };

/**
 * What a step must write so the stored log (history then pending) matches the brain's again.
 * Messages are immutable and the brain only ever appends, slices or concatenates, so unchanged
 * messages keep their identity: the common prefix is found by reference. While a run goes,
 * history is the same array and only pending is compared, so a step costs the same however
 * long the conversation is.
 */
export function logEffect(before: WrittenLog, after: WrittenLog): LogEffect {
  const oldLength = before.history.length + before.pendingLength;
  const common =
    after.history !== before.history
      ? sharedPrefixOfLogs(before, after)
      : after.pending === before.pending
        ? oldLength // grown in place: only appended to
        : before.history.length + sharedPrefix(before.pending, before.pendingLength, after.pending);
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

function sharedPrefix(a: readonly Message[], aLength: number, b: readonly Message[]): number {
  const end = Math.min(aLength, b.length);
  let i = 0;
  while (i < end && a[i] === b[i]) i++;
  return i;
}

function sharedPrefixOfLogs(before: WrittenLog, after: WrittenLog): number {
  const at = (log: WrittenLog, i: number) => (i < log.history.length ? log.history[i] : log.pending[i - log.history.length]);
  const end = Math.min(before.history.length + before.pendingLength, after.history.length + after.pending.length);
  let i = 0;
  while (i < end && at(before, i) === at(after, i)) i++;
  return i;
}
