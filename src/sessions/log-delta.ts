import { logOf, MessageLog } from '../brain/message-log.js';
import type { LoopContext, Message } from '../schemas.js';

/** The log as last written: the brain's `MessageLog`, which never changes once held. */
export type WrittenLog = MessageLog;

/** The log of a brain context, as a step writes it. */
export const logNow = (context: LoopContext): WrittenLog => logOf(context);

/** The log of a session that has written nothing. */
export const EMPTY_LOG: WrittenLog = MessageLog.of([], []);

export type LogEffect = { truncateTo?: number; append?: Message[] } | { replaceLog: Message[] };

/**
 * What a step must write so the stored log (history then pending) matches the brain's again.
 * Messages are immutable and keep their identity, so the common prefix is found by reference;
 * two logs cut from one list (every step of a run) share it whole, so a step costs the same
 * however long the conversation is.
 */
export function logEffect(before: WrittenLog, after: WrittenLog): LogEffect {
  const common = before.commonPrefix(after);
  const append = after.tail(common);
  if (common === 0 && before.length > 0) return { replaceLog: append };
  return {
    ...(common < before.length && { truncateTo: common }),
    ...(append.length > 0 && { append }),
  };
}
