import type { Message } from '../../schemas.js';
import type { ConversationRef } from './protocol.js';

/**
 * The conversation as one list for a request: the prefix (the instructions), history, then
 * pending. With nothing to join the brain's own list is handed over as is; otherwise the joined
 * list is built once per (history, pending) pair, so a call repeated on the same conversation (a
 * retry, a fallback, a restore re-issuing it) does not build it again. A list once handed out
 * never changes: the brain appends by copying (snapshots are values), so a new turn is a new
 * pair and a new list. Callers get it read-only.
 */
export function conversationView(prefix: Message | undefined) {
  let history: readonly Message[] | undefined;
  let pending: readonly Message[] | undefined;
  let view: readonly Message[] = [];
  return ({ history: h, pending: p }: ConversationRef): readonly Message[] => {
    if (!prefix && h.length === 0) return p;
    if (!prefix && p.length === 0) return h;
    if (h !== history || p !== pending) {
      view = prefix ? [prefix, ...h, ...p] : [...h, ...p];
      history = h;
      pending = p;
    }
    return view;
  };
}
