import type { Handler, IoScope } from '../protocol/io-protocol.js';
import { routedEvent } from './subagents.js';

/** The `forward` request: a decision or a steer for a child run, sent to the running child of the call its path names (see `routedEvent`). */
export const forwardHandler =
  ({ children }: IoScope): Handler<'forward'> =>
  (request) => {
    const routed = routedEvent(request.event);
    if (routed) children.get(routed.callId)?.send(routed.event);
  };
