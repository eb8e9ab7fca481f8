import { MessageLog } from '../brain/message-log.js';
import type { Message } from '../schemas.js';

/** The log of a session that has written nothing. */
export const EMPTY_LOG = MessageLog.of([], []);

export type LogEffect = { truncateTo?: number | undefined; append?: Message[] | undefined } | { replaceLog: Message[] };

/**
 * What a step must write so the stored log (history then pending) matches the brain's again.
 * Messages are immutable and keep their identity, so the common prefix is found by reference;
 * two logs cut from one list (every step of a run) share it whole, so a step costs the same
 * however long the conversation is.
 */
export function logEffect(before: MessageLog, after: MessageLog): LogEffect {
  const common = before.commonPrefix(after);
  const append = after.tail(common);
  if (common === 0 && before.length > 0) return { replaceLog: append };
  return {
    ...(common < before.length && { truncateTo: common }),
    ...(append.length > 0 && { append }),
  };
}
