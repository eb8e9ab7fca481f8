import type { Message } from '../../schemas.js';
import type { ConversationRef } from './protocol.js';

/**
 * The conversation as one list for a request, kept per agent and grown in place while the
 * brain only appends: a turn does not copy the conversation. Callers get it read-only.
 */
export function conversationView(prefix: Message | undefined) {
  let history: readonly Message[] | undefined;
  let pending: readonly Message[] | undefined;
  let taken = 0;
  let view: Message[] = [];
  return ({ history: h, pending: p }: ConversationRef): readonly Message[] => {
    if (!prefix && h.length === 0) return p;
    if (!prefix && p.length === 0) return h;
    if (h !== history || p !== pending || p.length < taken) {
      view = prefix ? [prefix, ...h] : [...h];
      history = h;
      pending = p;
      taken = 0;
    }
    for (; taken < p.length; taken++) view.push(p[taken]!);
    return view;
  };
}
