import type { Message } from '../../schemas.js';
import type { ConversationRef } from '../protocol/io-protocol.js';

/**
 * The conversation as one list for a request: the prefix (the instructions), history, then
 * pending. The list is built once per log, so a call repeated on the same conversation (a retry,
 * a fallback, a restore re-issuing it) does not build it again; a log never changes, so a new turn
 * is a new log and a new list. Callers get it read-only.
 */
export function conversationView(prefix: Message | undefined) {
  let log: ConversationRef | undefined;
  let view: readonly Message[] = [];
  return (conversation: ConversationRef): readonly Message[] => {
    if (conversation !== log) {
      view = conversation.toArray(prefix);
      log = conversation;
    }
    return view;
  };
}
